// Package server assembles a Parley node from one Config: storage, the
// connection gateway, the messaging service, routing and the HTTP API.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parleyim/parley/internal/account"
	"github.com/parleyim/parley/internal/api"
	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/gateway"
	"github.com/parleyim/parley/internal/media"
	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/notify"
	"github.com/parleyim/parley/internal/retention"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	"github.com/parleyim/parley/internal/store/pgstore"
	"github.com/parleyim/parley/internal/web"
	"github.com/parleyim/parley/internal/webhook"
)

// Server is one Parley node. New builds it, Start opens its listeners without
// blocking, Shutdown drains and stops it. Several servers can run in one process.
type Server struct {
	cfg Config
	// retention deletes expired messages (retention.go); its sweeper runs
	// from Start until Shutdown (sweep).
	retention *retention.Service
	sweep     sweeper
	log       *slog.Logger
	store     store.Store
	gw        *gateway.Gateway
	chat      *chat.Service
	router    route.Router
	nats      *route.NATS // the router in a cluster, else nil
	api       *api.API
	hooks     *webhook.Dispatcher
	notify    *notify.Notifier
	media     *media.Service // nil: no media (a cluster without a bucket)
	search    *searchPart    // nil: no search (off, or a store without a log)
	mod       *moderation.Service
	// accounts exports and deletes accounts (account.go).
	accounts *account.Service
	backup   *backupPart // POST /v1/admin/backup (backup.go)
	live     liveConfig  // what reloads (reload.go)
	tracer   tracer      // OpenTelemetry traces (tracing.go); zero: off

	httpSrv *http.Server
	tlsCfg  *tls.Config // nil: plaintext
	started time.Time   // when New built it (process_start_time_seconds)

	mu      sync.Mutex // guards the fields below
	httpLn  net.Listener
	tcpLn   net.Listener
	running bool
	closed  bool // Shutdown began (/readyz then says the node is draining)
}

// New validates cfg, opens storage and builds the server. It listens on nothing until Start.
func New(cfg Config) (_ *Server, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("parley: invalid config: %w", err)
	}
	embedded := cfg.Logger != nil
	var logLevel *slog.LevelVar
	cfg.Logger, logLevel = newLogger(cfg)
	if _, err := os.Stat(cfg.DataDir); errors.Is(err, fs.ErrNotExist) {
		// A first start that cannot listen (a port taken) must not leave a
		// fresh data directory with new secrets behind: check first.
		if err := probePorts(cfg); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("parley: data dir: %w", err)
	}
	if err := checkSecretsKept(cfg); err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	secrets, err := auth.LoadOrCreateSecrets(cfg.DataDir, auth.Secrets{
		TokenKey: cfg.TokenKey, AppSecret: cfg.AppSecret, AdminAPIKeys: cfg.AdminAPIKeys, WebhookSecret: cfg.WebhookSecret,
	})
	if err != nil {
		return nil, fmt.Errorf("parley: secrets: %w", err)
	}
	tokens, err := auth.NewTokens([]byte(secrets.TokenKey), []byte(secrets.AppSecret), cfg.AppIssuer, auth.Issuer)
	if err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	// Each resource is registered here as soon as it is open; if New fails
	// they are released in reverse order. (Once New succeeds, Shutdown
	// owns them.)
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()
	st, err := openStore(cfg)
	if err != nil && cfg.PostgresURL == "" && (errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "lock held by current process")) {
		// Pebble's LOCK file is held (by another process: EWOULDBLOCK; by
		// this one: pebble's own error, which has no sentinel): say what
		// that means.
		return nil, fmt.Errorf("parley: the data directory %s is in use by another process (another parley serve?); stop it or start with another --data: %w", cfg.DataDir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("parley: open store: %w", err)
	}
	cleanups = append(cleanups, func() { st.Close() })
	raw := st
	if cfg.storeWrap != nil {
		st = cfg.storeWrap(st)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: st, started: time.Now()}
	s.live.logLevel, s.live.cfg, s.live.embedded = logLevel, cfg, embedded
	if s.tracer, err = newTracer(cfg.Tracing, cfg.Logger); err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	cleanups = append(cleanups, func() { s.tracer.shutdown(context.Background()) })
	if s.search, err = newSearch(cfg, raw, st); err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	cleanups = append(cleanups, func() { s.search.close() })
	s.hooks, err = webhook.New(webhook.Config{URLs: cfg.WebhookURLs, Secret: secrets.WebhookSecret,
		Events: cfg.WebhookEvents, QueueSize: cfg.WebhookQueue, Logger: cfg.Logger, Tracer: s.tracer.t})
	if err != nil {
		return nil, fmt.Errorf("parley: webhooks: %w", err)
	}
	cleanups = append(cleanups, s.hooks.Close)
	var events func(chat.Event)
	if s.hooks.Enabled() {
		events = s.hooks.Publish
	}
	var offline func(chat.Event)
	if s.hooks.Subscribed(chat.EventMessageOffline) {
		offline = s.hooks.Publish
	}
	var webPushKey string
	s.notify, webPushKey, err = newNotifier(cfg, st, secrets, offline, &s.live, s.tracer.t)
	if err != nil {
		return nil, fmt.Errorf("parley: push notifications: %w", err)
	}
	cleanups = append(cleanups, s.notify.Close)
	s.media, err = newMedia(cfg, st, secrets.TokenKey)
	if err != nil {
		return nil, fmt.Errorf("parley: media: %w", err)
	}
	if s.media != nil {
		cleanups = append(cleanups, s.media.Close)
	}
	s.retention = newRetention(cfg, st, s.search, s.media)
	s.mod, err = newModeration(cfg, st)
	if err != nil {
		return nil, fmt.Errorf("parley: moderation: %w", err)
	}
	cleanups = append(cleanups, s.mod.Close)
	exempt, _ := cfg.exemptPrefixes()                  // validated
	unauthExempt, _ := prefixes(cfg.UnauthConnsExempt) // validated
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("parley: tls: %w", err)
		}
		// The certificate is looked up per handshake, so a reload can swap
		// it (reload.go); WebSocket upgrades need HTTP/1.1.
		s.live.cert.Store(&cert)
		s.tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.live.cert.Load(), nil }}
	}

	policy, _ := session.ParseKickPolicy(cfg.KickPolicy)
	reg := session.NewRegistry(policy)
	var natsRouter *route.NATS
	if cfg.clustered() {
		natsRouter, err = route.NewNATS(route.NATSConfig{
			URLs: cfg.NATSURLs, ClusterListen: cfg.NATSClusterListen, ClusterAdvertise: cfg.NATSClusterAdvertise, Routes: cfg.NATSRoutes,
			ClusterName: cfg.NATSClusterName, ClusterSecret: cfg.NATSClusterSecret, ClientListen: cfg.NATSListen,
			Prefix: cfg.NATSSubjectPrefix, NodeID: strconv.Itoa(int(cfg.NodeID)), Logger: cfg.Logger,
			Tracer: s.tracer.t,
		}, reg)
		if err != nil {
			return nil, fmt.Errorf("parley: %w", err)
		}
		s.router, s.nats = natsRouter, natsRouter
	} else {
		s.router = route.NewInProcess(reg)
	}
	cleanups = append(cleanups, func() { s.router.Close() })
	s.chat = chat.New(chat.Config{
		NodeID:           cfg.NodeID,
		HeartbeatSeconds: uint32(cfg.Heartbeat / time.Second),
		MaxFrameBytes:    uint32(cfg.MaxFrameBytes),
		MaxGroupMembers:  cfg.MaxGroupMembers,
		RecallWindow:     cfg.RecallWindow,
		StreamIdle:       cfg.StreamIdleTimeout,
		MaxStreams:       cfg.MaxStreams,
		ReceiptListMax:   cfg.ReceiptListMax,
		GroupCacheSize:   cfg.GroupCacheSize,
		PageBytes:        cfg.PageBytes,
		ReadMemoryBytes:  cfg.ReadMemoryBytes,
		DenyStrangers:    cfg.DenyStrangers,
		RefuseUnknown:    cfg.UnknownRecipients == "refuse",
		RoomClientSend:   cfg.RoomClientSend,
		SendRate:         rate(cfg.UserSendRate),
		RequestRate:      rate(cfg.UserRequestRate),
		MaxUserSessions:  orZero(cfg.MaxSessionsPerUser),
		UserStorageQuota: orZero(cfg.UserStorageQuotaBytes),
		Events:           events,
		Notifier:         s.notify,
		Search:           s.search.searcher(),
		Retention:        s.retention,
		Media:            chatMedia(s.media),
		Moderator:        s.mod,
		Logger:           cfg.Logger,
		Tracer:           s.tracer.t,
	}, st, s.router, reg, tokens)
	s.notify.Start(s.chat)
	node := clusterNode{Service: s.chat, s: s, ready: new(atomic.Bool)}
	if natsRouter != nil {
		natsRouter.Start(node)
	}
	s.gw, err = gateway.New(gateway.Config{
		MaxFrameBytes:   cfg.MaxFrameBytes,
		SendQueueFrames: cfg.SendQueueFrames,
		SendQueueBytes:  cfg.SendQueueBytes,
		WriteTimeout:    cfg.WriteTimeout,
		AuthTimeout:     cfg.AuthTimeout,
		IdleTimeout:     cfg.IdleTimeout,
		ConnRate:        rate(cfg.ConnRatePerIP),
		ConnRateExempt:  exempt,
		MaxUnauth:       orZero(cfg.MaxUnauthConns),
		MaxUnauthPerIP:  orZero(cfg.MaxUnauthConnsPerIP),
		UnauthExempt:    unauthExempt,
		MaxOpenFiles:    cfg.MaxOpenFiles,
		FDReserve:       orZero(cfg.FDReserve),
		DrainWindow:     cfg.DrainWindow,
		Logger:          cfg.Logger,
	}, s.chat)
	if err != nil {
		return nil, fmt.Errorf("parley: gateway: %w", err)
	}
	// The gateway's loops run from New on; nothing is connected yet.
	cleanups = append(cleanups, func() { s.gw.Shutdown(context.Background()) })
	node.ready.Store(true)
	s.newAccounts()
	s.api, err = api.New(api.Config{
		Store: st, Tokens: tokens, Chat: s.chat,
		AdminAPIKeys: secrets.AdminAPIKeys, TokenTTL: cfg.TokenTTL, MaxTokenTTL: cfg.MaxTokenTTL,
		DisableRegistration: cfg.DisableRegistration,
		Ready:               s.ready,
		KeyRate:             rate(cfg.APIKeyRate),
		Metrics:             s.writeMetrics,
		Stats:               s.adminStats,
		Webhooks:            s.hooks.Stats,
		Nodes:               s.adminNodes,
		Notify:              s.notify,
		WebPushKey:          webPushKey,
		Media:               s.media,
		Moderation:          s.mod,
		Extra:               append(s.accountRoutes(), s.reloadRoutes()...),
		Deleted:             s.accounts.Deleted,
		Retention:           s.retention,
		Logger:              cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("parley: api: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", s.gw)
	s.backup = newBackup(s, raw, secrets.AdminAPIKeys)
	mux.Handle(backupRoute, s.backup)
	for _, p := range []string{"/v1/", "/healthz", "/readyz", "/metrics", "/admin", "/openapi.json"} {
		mux.Handle(p, s.api)
	}
	mux.Handle("/", web.Handler())
	s.httpSrv = &http.Server{
		Handler:           withRequestIDs(s.tracer.handler(mux)), // the tracer next to the mux: it names spans by the route the mux sets on its request
		ReadHeaderTimeout: cfg.HTTPHeaderTimeout,
		ReadTimeout:       cfg.HTTPReadTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// probePorts checks that the addresses Start listens on are free, by
// listening on them and closing at once. (Ports with a 0 are always free.)
func probePorts(cfg Config) error {
	addrs := []struct{ what, addr string }{{"http", cfg.HTTPAddr}, {"tcp", cfg.TCPAddr}}
	for _, a := range addrs {
		if a.addr == "off" || a.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			return fmt.Errorf("parley: listen %s: %w (nothing was created in %s)", a.what, err, cfg.DataDir)
		}
		ln.Close()
	}
	return nil
}

// openStore opens PostgreSQL when configured, else the embedded store.
func openStore(cfg Config) (store.Store, error) {
	if cfg.PostgresURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return pgstore.Open(ctx, cfg.PostgresURL, pgstore.Options{Schema: cfg.PostgresSchema, Logger: cfg.Logger})
	}
	return pebblestore.Open(cfg.DataDir+"/store", pebblestore.Options{
		NoSync: cfg.NoSync, Logger: cfg.Logger, MinFreeDisk: cfg.MinFreeDisk, FS: cfg.storeFS,
		AcceptDataLoss: cfg.AcceptDataLoss,
	})
}

// checkSecretsKept refuses a data directory whose embedded store exists but
// whose secrets.json does not, unless NewSecrets: generating new secrets
// there would silently invalidate every token and admin key in use. With
// every secret given by the config nothing is generated, so nothing is lost.
func checkSecretsKept(cfg Config) error {
	if cfg.NewSecrets || cfg.PostgresURL != "" {
		return nil
	}
	if cfg.TokenKey != "" && cfg.AppSecret != "" && len(cfg.AdminAPIKeys) > 0 &&
		(cfg.WebhookSecret != "" || len(cfg.WebhookURLs) == 0) {
		return nil
	}
	secretsPath := filepath.Join(cfg.DataDir, auth.SecretsFile)
	if _, err := os.Stat(secretsPath); !errors.Is(err, fs.ErrNotExist) {
		return nil // present (or unreadable: LoadOrCreateSecrets reports that)
	}
	entries, err := os.ReadDir(filepath.Join(cfg.DataDir, "store"))
	if err != nil || len(entries) == 0 {
		return nil // a new data directory
	}
	return fmt.Errorf("%s holds a store but no %s: new secrets would invalidate every token and admin API key issued before; "+
		"restore %s from a backup, or start with --new-secrets to generate new ones", cfg.DataDir, auth.SecretsFile, secretsPath)
}

// Start opens the listeners and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed {
		return errors.New("parley: already started or shut down")
	}
	// No TCP keepalive on accepted sockets: heartbeats and idle_timeout
	// find dead peers, and the four setsockopt calls per accept cost ~6 %
	// of a login.
	lc := net.ListenConfig{KeepAlive: -1}
	httpLn, err := lc.Listen(context.Background(), "tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("parley: listen http: %w", err)
	}
	var tcpLn net.Listener
	if s.cfg.TCPAddr != "off" {
		tcpLn, err = lc.Listen(context.Background(), "tcp", s.cfg.TCPAddr)
		if err != nil {
			httpLn.Close()
			return fmt.Errorf("parley: listen tcp: %w", err)
		}
	}
	// The descriptor reserve covers HTTP connections too (the gateway
	// applies it to its own).
	httpLn = s.gw.ReserveListener(httpLn)
	s.mod.Start()
	if s.tlsCfg != nil {
		// Handshakes happen on the first read: for HTTP under the server's
		// header timeout, for TCP under the gateway's auth timeout, so a
		// slow or plaintext client is closed by the same timers as any other.
		httpLn = tls.NewListener(httpLn, s.tlsCfg)
		if tcpLn != nil {
			tcpLn = tls.NewListener(tcpLn, s.tlsCfg)
		}
	}
	s.httpLn, s.tcpLn, s.running = httpLn, tcpLn, true
	s.chat.Start()
	s.search.start()
	s.accounts.Start()
	s.sweep.start(s.retention)
	go func() {
		if err := s.httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	if tcpLn != nil {
		go func() {
			if err := s.gw.ServeTCP(tcpLn); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Error("tcp listener stopped", "err", err)
			}
		}()
	}
	return nil
}

// HTTPAddr is the HTTP listen address once started (WebSocket: ws://HTTPAddr/ws).
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// TCPAddr is the TCP listen address once started, "" when TCP is off.
func (s *Server) TCPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcpLn == nil {
		return ""
	}
	return s.tcpLn.Addr().String()
}

// Routes lists the HTTP API's routes as "METHOD /path/{param}" (the set
// internal/api/openapi.json documents).
func (s *Server) Routes() []string { return append(s.api.Routes(), backupRoute) }

// Stats are the figures the server exposes about itself.
type Stats struct {
	Connections int
	Sessions    int
	// ClusterRoutes is the number of other nodes the embedded NATS is routed to.
	ClusterRoutes int
	Chat          chat.Stats
	Gateway       gateway.Stats
}

// Stats returns current figures.
func (s *Server) Stats() Stats {
	st := Stats{Connections: s.gw.Len(), Sessions: s.chat.Sessions().Len(), Chat: s.chat.Stats(), Gateway: s.gw.Stats()}
	if s.nats != nil {
		st.ClusterRoutes = s.nats.Routes()
	}
	return st
}

func (s *Server) ready(ctx context.Context) error {
	s.mu.Lock()
	draining := s.closed
	s.mu.Unlock()
	if draining {
		return errors.New("draining")
	}
	if err := s.chat.ClusterError(); err != nil {
		return err
	}
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	return s.router.Ready()
}

// Shutdown stops accepting, closes every connection with a "server shutdown"
// frame, commits the sends already accepted, and closes storage.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	wasStarted := s.running
	s.running, s.closed = false, true
	s.mu.Unlock()
	// Deferred first, so it runs last: the spans of the work below go out too.
	defer func() {
		if err := s.tracer.shutdown(ctx); err != nil {
			s.log.Warn("spans not exported at shutdown", "err", err)
		}
	}()
	defer s.hooks.Close()
	if !wasStarted {
		s.mod.Close()
		s.router.Close()
		s.search.close()
		return s.store.Close()
	}
	var errs []error
	start := time.Now()
	conns, before := s.gw.Len(), s.chat.Stats()
	if s.tcpLn != nil {
		s.tcpLn.Close()
	}
	if err := s.httpSrv.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.gw.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.chat.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	s.accounts.Close() // after the chat service, before the media and the store
	s.notify.Close()   // after the chat service: nothing is stored any more
	s.mod.Close()      // after the chat service (nothing is decided any more), before the store its reloads read
	s.sweep.stop()     // before the store closes
	if err := s.search.close(); err != nil {
		errs = append(errs, err)
	}
	if s.media != nil {
		s.media.Close() // after the HTTP server: no upload is running
	}
	if err := s.router.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, err)
	}
	// One line that says the stop is over and what it saw through: an
	// operator waiting on a drain knows it ended, and whether cleanly.
	after := s.chat.Stats()
	err := errors.Join(errs...)
	s.log.Info("shutdown complete", "took", time.Since(start).Round(time.Millisecond),
		"connections_closed", conns, "messages_stored_while_stopping", after.SendsAccepted-before.SendsAccepted,
		"store_closed", err == nil, "err", err)
	return err
}
