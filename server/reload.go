package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/parleyim/parley/internal/api"
	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/moderation/hook"
	"github.com/parleyim/parley/internal/moderation/wordfilter"
	"github.com/parleyim/parley/internal/notify/provider"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// reloadable are the keys a reload applies to a running server; a change
// to any other key needs a restart. docs/operations.md ("Reloading
// configuration") lists the same keys. Files named by the TLS, push and
// word list keys are read again at every reload, changed or not, so a
// certificate or credential replaced in place is picked up.
var reloadable = map[string]bool{
	"user_send_rate": true, "user_request_rate": true, "conn_rate_per_ip": true, "api_key_rate": true,
	"log_level":     true,
	"tls_cert_file": true, "tls_key_file": true,
	"webhook_urls":      true,
	"word_filter_lists": true, "moderation_hooks": true,
	"apns_key_file": true, "apns_key_id": true, "apns_team_id": true, "fcm_credentials_file": true,
}

// liveConfig is what a reload swaps. Each part is read on its hot path
// with one atomic load; reloads are serialized by mu.
type liveConfig struct {
	mu       sync.Mutex // serializes reloads; guards cfg
	cfg      Config     // the configuration in force (with defaults)
	embedded bool       // Config.Logger was set by the program embedding the server

	logLevel *slog.LevelVar
	cert     atomic.Pointer[tls.Certificate] // nil: plaintext
	apns     *swapProvider                   // nil: APNs off
	fcm      *swapProvider                   // nil: FCM off
	pushCAs  *x509.CertPool
}

// swapProvider is a push platform whose credentials a reload replaces:
// notifications sent from then on use the new ones.
type swapProvider struct {
	kind string
	p    atomic.Pointer[provider.Provider]
}

func newSwapProvider(p provider.Provider) *swapProvider {
	sp := &swapProvider{kind: p.Kind()}
	sp.p.Store(&p)
	return sp
}

func (sp *swapProvider) Kind() string { return sp.kind }

func (sp *swapProvider) Send(ctx context.Context, t provider.Target, n *provider.Notification) provider.Result {
	return (*sp.p.Load()).Send(ctx, t, n)
}

// RestartRequiredError refuses a reload that changes keys only a restart
// applies; nothing of that reload was applied.
type RestartRequiredError struct {
	Keys []string // the YAML keys, sorted
}

func (e *RestartRequiredError) Error() string {
	return "parley: reload refused, nothing applied: a restart is needed to change " + strings.Join(e.Keys, ", ")
}

// Reload applies next to the running server: the keys listed in
// docs/operations.md ("Reloading configuration") take effect without
// closing any connection. A change to another key is refused with a
// *RestartRequiredError naming it, and an invalid configuration or an
// unreadable file (certificate, credentials, word list) with its error;
// in both cases nothing is applied. It returns the keys that changed.
func (s *Server) Reload(next Config) ([]string, error) {
	return s.reload(context.Background(), next)
}

// reload is Reload logging with ctx's attributes (an admin request's id).
func (s *Server) reload(ctx context.Context, next Config) ([]string, error) {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	cur := s.live.cfg
	if s.live.embedded && next.Logger == nil {
		next.Logger = cur.Logger // the embedder's: an unset log_level keeps deferring to it
	}
	next = next.withDefaults()
	if err := next.validate(); err != nil {
		return nil, fmt.Errorf("parley: reload: invalid config: %w", err)
	}
	changed, restart := diffConfig(cur, next)
	// Reloadable keys whose change a running server still cannot take.
	if (cur.TLSCertFile == "") != (next.TLSCertFile == "") {
		restart = append(restart, "tls_cert_file")
	}
	if len(cur.WebhookURLs) != len(next.WebhookURLs) {
		restart = append(restart, "webhook_urls")
	}
	if (cur.APNsKeyFile == "") != (next.APNsKeyFile == "") {
		restart = append(restart, "apns_key_file")
	}
	if (cur.FCMCredentialsFile == "") != (next.FCMCredentialsFile == "") {
		restart = append(restart, "fcm_credentials_file")
	}
	if len(restart) > 0 {
		slices.Sort(restart)
		return nil, &RestartRequiredError{Keys: slices.Compact(restart)}
	}

	// Everything that can fail is done before anything is swapped in.
	var cert *tls.Certificate
	if next.TLSCertFile != "" {
		c, err := tls.LoadX509KeyPair(next.TLSCertFile, next.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("parley: reload: tls: %w", err)
		}
		cert = &c
	}
	var apns, fcm provider.Provider
	var err error
	if s.live.apns != nil {
		if apns, err = apnsProvider(next, s.live.pushCAs); err != nil {
			return nil, fmt.Errorf("parley: reload: %w", err)
		}
	}
	if s.live.fcm != nil {
		if fcm, err = fcmProvider(next, s.live.pushCAs); err != nil {
			return nil, fmt.Errorf("parley: reload: %w", err)
		}
	}
	var hooks *hook.Hooks
	if slices.Contains(changed, "moderation_hooks") {
		if hooks, err = s.mod.NewHooks(hookConfigs(next)); err != nil {
			return nil, fmt.Errorf("parley: reload: moderation_hooks: %w", err)
		}
	}
	// The word lists swap themselves in, all or nothing, as the last
	// step that can fail.
	if err := s.mod.SetFilterLists(configLists(next)); err != nil {
		if hooks != nil {
			hooks.Close()
		}
		return nil, fmt.Errorf("parley: reload: word_filter_lists: %w", err)
	}

	s.chat.SetRates(rate(next.UserSendRate), rate(next.UserRequestRate))
	s.gw.SetConnRate(rate(next.ConnRatePerIP))
	s.api.SetKeyRate(rate(next.APIKeyRate))
	l, _ := parseLevel(next.LogLevel) // validated
	s.live.logLevel.Set(l)
	if cert != nil {
		s.live.cert.Store(cert)
	}
	_ = s.hooks.SetURLs(next.WebhookURLs) // the number of URLs was checked above
	if apns != nil {
		s.live.apns.p.Store(&apns)
	}
	if fcm != nil {
		s.live.fcm.p.Store(&fcm)
	}
	if hooks != nil {
		s.mod.SwapHooks(hooks)
	}
	s.live.cfg = next
	s.log.InfoContext(ctx, "configuration reloaded", "changed", strings.Join(changed, ","))
	return changed, nil
}

// ReloadConfig reads the configuration again through Config.ConfigSource
// and applies it (Reload).
func (s *Server) ReloadConfig() ([]string, error) { return s.reloadConfig(context.Background()) }

func (s *Server) reloadConfig(ctx context.Context) ([]string, error) {
	if s.cfg.ConfigSource == nil {
		return nil, errNoConfigSource
	}
	next, err := s.cfg.ConfigSource()
	if err != nil {
		return nil, fmt.Errorf("parley: reload: %w", err)
	}
	return s.reload(ctx, next)
}

var errNoConfigSource = errors.New("parley: reload: this server was started without a configuration file to read again")

// diffConfig compares the YAML keys of two configurations: the keys that
// differ, and those of them that only a restart applies.
func diffConfig(a, b Config) (changed, restart []string) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		if reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		changed = append(changed, key)
		if !reloadable[key] {
			restart = append(restart, key)
		}
	}
	return changed, restart
}

// configLists turns the configuration's word lists into moderation's.
func configLists(cfg Config) []moderation.ConfigList {
	var out []moderation.ConfigList
	for _, l := range cfg.WordFilterLists {
		a, _ := moderation.ParseAction(l.Action) // validated
		out = append(out, moderation.ConfigList{WordsFile: l.WordsFile, List: wordfilter.List{
			Name: l.Name, Action: a, Words: l.Words, Leet: l.Leet, IgnoreSeparators: l.IgnoreSeparators, WholeWords: l.WholeWords}})
	}
	return out
}

// hookConfigs turns the configuration's hooks into the hook package's.
func hookConfigs(cfg Config) []hook.HookConfig {
	var out []hook.HookConfig
	for _, h := range cfg.ModerationHooks {
		hc, _ := h.config() // validated
		out = append(out, hc)
	}
	return out
}

// reloadRoutes serves POST /v1/admin/reload.
func (s *Server) reloadRoutes() []api.Route {
	return []api.Route{{Pattern: "POST /v1/admin/reload", Admin: s.adminReload}}
}

// adminReload: POST /v1/admin/reload reads the configuration file again
// and applies it; 200 {"changed": [keys]}, 409 when a key needs a restart
// (the message names it) or no file is known, 400 when the file is invalid.
func (s *Server) adminReload(w http.ResponseWriter, r *http.Request) {
	changed, err := s.reloadConfig(r.Context())
	var restart *RestartRequiredError
	switch {
	case errors.As(err, &restart), errors.Is(err, errNoConfigSource):
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_CONFLICT, err.Error())
	case err != nil:
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_BAD_REQUEST, err.Error())
	default:
		api.NoteAudit(r, "changed", strings.Join(changed, ","))
		api.WriteJSON(w, http.StatusOK, map[string]any{"changed": append([]string{}, changed...)})
	}
}
