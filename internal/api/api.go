// Package api is Parley's HTTP API: accounts (register, login, logout, password
// change), token minting for app servers (admin API key), conversations and
// history for a user's own token, the push API (push.go), and health endpoints.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/limit"
	"github.com/parleyim/parley/internal/media"
	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/notify"
	"github.com/parleyim/parley/internal/retention"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/webhook"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 64 << 10

// Config is what the API needs. All fields are required unless stated.
type Config struct {
	Store  store.Store
	Tokens *auth.Tokens
	Chat   *chat.Service
	// AdminAPIKeys authenticate /v1/admin/* (header X-Api-Key). Empty disables the admin API.
	AdminAPIKeys []string
	// TokenTTL is the lifetime of tokens from register/login/password. Required (> 0).
	TokenTTL time.Duration
	// MaxTokenTTL bounds ttl_seconds of minted tokens. Required (> 0).
	MaxTokenTTL time.Duration
	// DisableRegistration turns off POST /v1/register (for apps that bring their own users).
	DisableRegistration bool
	// Ready reports readiness for /readyz; nil means ready when the store pings.
	Ready func(context.Context) error
	// KeyRate limits requests per admin API key; zero: unlimited.
	KeyRate limit.Rate
	// Metrics writes the Prometheus text for GET /metrics (API key required).
	// Nil: /metrics answers 404.
	Metrics func(io.Writer) error
	// Stats returns the live figures for GET /v1/admin/stats (the admin page).
	Stats func() any
	// Webhooks returns this node's webhook queue figures (GET
	// /v1/admin/queues). Nil: none shown.
	Webhooks func() webhook.Stats
	// Nodes returns every node's figures, this node first (GET
	// /v1/admin/nodes). Nil: that route answers 404.
	Nodes func(context.Context) []NodeStats
	// Notify handles push targets: removed with the tokens that registered
	// them, listed and tested by the admin API. Nil: no push notifications.
	Notify *notify.Notifier
	// WebPushKey is the VAPID public key browsers subscribe with (GET
	// /v1/push/webpush-key); empty: Web Push is off.
	WebPushKey string
	// Media serves uploads and files (docs/media.md). Nil: no files.
	Media *media.Service
	// Moderation serves reports, the word filter's lists and the audit
	// log (docs/moderation.md). Required.
	Moderation *moderation.Service
	// Extra are routes served by other packages (extra.go).
	Extra []Route
	// Deleted reports whether a user's account was deleted (its record is
	// a tombstone that no admin change may bring back). Nil: none is.
	Deleted func(ctx context.Context, userID string) (bool, error)
	// Retention serves retention policies (retention.go); nil: no routes.
	Retention *retention.Service
	Logger    *slog.Logger
}

// API serves the HTTP routes. Build with New; it is an http.Handler.
type API struct {
	cfg      Config
	mux      *http.ServeMux
	log      *slog.Logger
	hashes   chan struct{} // bounds concurrent password hashing (CPU-heavy by design)
	keyLimit *limit.Keyed  // per API key; SetKeyRate changes it
	uploads  http.Handler  // resumable uploads (tusd); nil without Media
	limited  atomic.Uint64 // admin requests refused by keyLimit
	keys     []adminKey    // Config.AdminAPIKeys, parsed
	// dummyHash is checked against when a user does not exist, so a login takes
	// as long for unknown users as for wrong passwords.
	dummyHash string
}

// New builds the API.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil || cfg.Tokens == nil || cfg.Chat == nil || cfg.TokenTTL <= 0 || cfg.MaxTokenTTL <= 0 {
		return nil, errors.New("api: incomplete config")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dummy, err := auth.HashPassword("parley-timing-equaliser")
	if err != nil {
		return nil, err
	}
	a := &API{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger,
		hashes: make(chan struct{}, runtime.GOMAXPROCS(0)), dummyHash: dummy, keyLimit: limit.NewVar(cfg.KeyRate)}
	if cfg.Media != nil {
		if a.uploads, err = cfg.Media.TusHandler(a.authenticate); err != nil {
			return nil, err
		}
	}
	for _, k := range cfg.AdminAPIKeys {
		name, secret := auth.ParseAdminKey(k)
		a.keys = append(a.keys, adminKey{name: name, secret: secret})
	}
	a.routes()
	return a, nil
}

// SetKeyRate changes KeyRate from the next request on.
func (a *API) SetKeyRate(r limit.Rate) { a.keyLimit.SetRate(r) }

// routes registers every route; docs/openapi.json must list the same set
// (TestOpenAPIMatchesRoutes).
func (a *API) routes() {
	for _, r := range a.routeTable() {
		a.mux.HandleFunc(r.pattern, r.h)
	}
}

type route struct {
	pattern string // "METHOD /path/{param}"
	h       http.HandlerFunc
}

// Routes lists every route the API serves as "METHOD /path/{param}".
func (a *API) Routes() []string {
	var out []string
	for _, r := range a.routeTable() {
		out = append(out, r.pattern)
	}
	return out
}

func (a *API) routeTable() []route {
	return append(append(append(append(append(a.mediaRoutes(), a.moderationRoutes()...), a.consoleRoutes()...), a.extraRoutes()...), a.retentionRoutes()...), []route{
		{"POST /v1/register", a.register},
		{"POST /v1/login", a.login},
		{"POST /v1/logout", a.user(a.logout)},
		{"POST /v1/password", a.user(a.password)},
		{"GET /v1/conversations", a.user(a.conversations)},
		{"GET /v1/conversations/{id}/messages", a.user(a.messages)},
		{"POST /v1/rpc", a.user(a.rpc)},
		{"GET /v1/push/webpush-key", a.webPushKey},

		{"POST /v1/admin/tokens", a.admin(a.mintToken)},
		{"POST /v1/admin/users", a.admin(a.adminCreateUser)},
		{"GET /v1/admin/users/{id}", a.admin(a.adminGetUser)},
		{"PATCH /v1/admin/users/{id}", a.admin(a.adminUpdateUser)},
		{"POST /v1/admin/users/{id}/revoke-tokens", a.admin(a.adminRevokeTokens)},
		{"GET /v1/admin/users/{id}/sessions", a.admin(a.adminSessions)},
		{"DELETE /v1/admin/users/{id}/sessions", a.admin(a.adminKick)},
		{"DELETE /v1/admin/users/{id}/sessions/{session}", a.admin(a.adminKick)},
		{"GET /v1/admin/users/{id}/conversations", a.admin(a.adminConversations)},
		{"GET /v1/admin/users/{id}/contacts", a.admin(a.adminContacts)},
		{"POST /v1/admin/users/{id}/contacts", a.admin(a.adminBefriend)},
		{"DELETE /v1/admin/users/{id}/contacts/{other}", a.admin(a.adminUnfriend)},
		{"POST /v1/admin/users/{id}/rpc", a.admin(a.adminUserRPC)},
		{"GET /v1/admin/users/{id}/push", a.admin(a.adminPushTargets)},
		{"POST /v1/admin/users/{id}/push/test", a.admin(a.adminPushTest)},

		{"POST /v1/admin/groups", a.admin(a.adminCreateGroup)},
		{"GET /v1/admin/groups/{id}", a.admin(a.adminGetGroup)},
		{"PATCH /v1/admin/groups/{id}", a.admin(a.adminUpdateGroup)},
		{"DELETE /v1/admin/groups/{id}", a.admin(a.adminDissolveGroup)},
		{"GET /v1/admin/groups/{id}/members", a.admin(a.adminMembers)},
		{"POST /v1/admin/groups/{id}/members", a.admin(a.adminAddMembers)},
		{"DELETE /v1/admin/groups/{id}/members/{uid}", a.admin(a.adminRemoveMember)},
		{"PUT /v1/admin/groups/{id}/members/{uid}/role", a.admin(a.adminSetRole)},
		{"PUT /v1/admin/groups/{id}/members/{uid}/mute", a.admin(a.adminMute)},
		{"POST /v1/admin/groups/{id}/owner", a.admin(a.adminTransfer)},

		{"POST /v1/admin/messages", a.admin(a.adminSendMessage)},
		{"GET /v1/admin/conversations/{id}/messages", a.admin(a.adminMessages)},
		{"POST /v1/admin/search", a.admin(a.adminSearch)},
		{"POST /v1/admin/conversations/{id}/messages/{seq}/recall", a.admin(a.adminRecall)},

		{"POST /v1/admin/push/users", a.admin(a.pushUsers)},
		{"POST /v1/admin/push/devices", a.admin(a.pushDevices)},
		{"POST /v1/admin/push/room", a.admin(a.pushRoom)},
		{"POST /v1/admin/push/all", a.admin(a.pushAll)},
		{"GET /v1/admin/rooms", a.admin(a.adminRooms)},
		{"GET /v1/admin/rooms/{room}", a.admin(a.roomInfo)},
		{"GET /v1/admin/online", a.admin(a.adminOnline)},
		{"GET /v1/admin/stats", a.admin(a.adminStats)},

		{"GET /metrics", a.admin(a.metrics)},
		{"GET /healthz", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{"GET /readyz", a.readyz},
		{"GET /openapi.json", a.openAPI},
		{"GET /admin", a.adminPage},
	}...)
}

type adminKey struct{ name, secret string }

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["Cache-Control"] = noStore // shared, never modified: no allocation per request
	a.mux.ServeHTTP(w, r)
}

// Wire codes the HTTP API answers with; their status, "code" string and
// temporary flag come from the error table (package errcode).
const (
	codeBadRequest  = pb.ErrorCode_ERROR_CODE_BAD_REQUEST
	codeUnauth      = pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED
	codeDenied      = pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	codeConflict    = pb.ErrorCode_ERROR_CODE_CONFLICT
	codeUnavailable = pb.ErrorCode_ERROR_CODE_UNAVAILABLE
	codeInternal    = pb.ErrorCode_ERROR_CODE_INTERNAL
	codeTooMany     = pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS
)

// Codes of the HTTP API alone: they describe an endpoint's answer (a login's
// wrong password, a request body over MaxBodyBytes) rather than a wire
// error, so their status is chosen here and none of them is temporary.
const (
	codeTooLarge    = "body_too_large"
	codeRegisterOff = "registration_disabled"
	codeBadCreds    = "invalid_credentials"
	codeNotFound    = "not_found"
)

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Temporary: the same request may succeed later.
		Temporary bool `json:"temporary"`
		// Reason and RejectCode are a "rejected" answer's: the text the
		// app's moderation wants the sender to see, and its rule.
		Reason     string `json:"reason,omitempty"`
		RejectCode string `json:"reject_code,omitempty"`
	} `json:"error"`
}

// writeFrameError answers with a chat Error frame's code in its HTTP form,
// keeping a rejection's reason and rule.
func writeFrameError(w http.ResponseWriter, e *pb.Error) {
	i := errcode.Of(e.Code)
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Temporary = i.APICode, e.Message, i.Temporary
	b.Error.Reason, b.Error.RejectCode = e.Reason, e.RejectCode
	writeJSON(w, i.HTTPStatus, b)
}

// writeCode answers with wire code c in its HTTP form (from the error
// table) and msg.
func writeCode(w http.ResponseWriter, c pb.ErrorCode, msg string) {
	i := errcode.Of(c)
	writeErrorBody(w, i.HTTPStatus, i.APICode, msg, i.Temporary)
}

// writeError answers with one of the HTTP API's own codes (see above).
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeErrorBody(w, status, code, msg, false)
}

func writeErrorBody(w http.ResponseWriter, status int, code, msg string, temporary bool) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Temporary = code, msg, temporary
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var protoJSON = protojson.MarshalOptions{}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		writeCode(w, codeInternal, "internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// decodeBody reads a JSON body of at most MaxBodyBytes into v, refusing unknown fields.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, "request body too large")
		} else {
			writeCode(w, codeBadRequest, "malformed JSON body")
		}
		return false
	}
	if dec.More() {
		writeCode(w, codeBadRequest, "malformed JSON body")
		return false
	}
	return true
}

// writeChatError maps a chat error to its HTTP form.
func writeChatError(w http.ResponseWriter, err error) {
	var ce *chat.Error
	if !errors.As(err, &ce) {
		writeCode(w, codeInternal, "internal error")
		return
	}
	writeFrameError(w, ce.Frame(0).GetError())
}

// user wraps a handler that needs a user's bearer token.
func (a *API) user(h func(http.ResponseWriter, *http.Request, auth.Claims, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			writeCode(w, codeUnauth, "missing bearer token")
			return
		}
		claims, err := a.cfg.Chat.Authenticate(r.Context(), tok)
		if err != nil {
			writeChatError(w, err)
			return
		}
		h(w, r, claims, tok)
	}
}

// admin wraps a handler that needs an admin API key: header X-Api-Key, or
// Authorization: Bearer KEY (what Prometheus sends for /metrics).
func (a *API) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		name, ok := a.adminKey(key)
		if !ok {
			writeCode(w, codeUnauth, "missing or invalid API key")
			return
		}
		if !a.keyLimit.Allow(key) {
			a.limited.Add(1)
			writeCode(w, codeTooMany, "request rate of this API key exceeded")
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead || !audited(r.Pattern) {
			h(w, r)
			return
		}
		a.audit(w, r, name, h)
	}
}

// RateLimited counts admin requests refused by the per-key rate.
func (a *API) RateLimited() uint64 { return a.limited.Load() }

func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Metrics == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "metrics are off")
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := a.cfg.Metrics(w); err != nil {
		a.log.Debug("metrics write failed", "err", err)
	}
}

func (a *API) adminStats(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Stats == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "stats are off")
		return
	}
	writeJSON(w, http.StatusOK, a.cfg.Stats())
}

// adminKey returns the name of the admin API key key; false when it is none.
func (a *API) adminKey(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	found := -1
	for i, k := range a.keys {
		// Compare against every key in constant time; no early exit.
		if subtle.ConstantTimeCompare([]byte(k.secret), []byte(key)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return a.keys[found].name, true
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var err error
	if a.cfg.Ready != nil {
		err = a.cfg.Ready(ctx)
	} else {
		err = a.cfg.Store.Ping(ctx)
	}
	if err != nil {
		body := map[string]string{"status": "not ready"}
		// Disk space is the one cause an operator must act on outside
		// Parley; its text holds only sizes, so it is safe to show.
		if errors.Is(err, store.ErrNoSpace) {
			body["reason"] = err.Error()
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func queryUint(r *http.Request, name string) (uint64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}
