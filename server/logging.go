package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/parleyim/parley/internal/logx"
)

// parseLevel reads a log_level; "" is the lowest level (with an embedder's
// Logger and no log_level, its handler alone decides).
func parseLevel(s string) (slog.Level, error) {
	if s == "" {
		return slog.LevelDebug - 4, nil
	}
	var l slog.Level
	switch s {
	case "debug", "info", "warn", "error":
		return l, l.UnmarshalText([]byte(s))
	}
	return l, fmt.Errorf("unknown log level %q", s)
}

// newLogger returns the server's logger: cfg.Logger's handler, or one on
// LogOutput in LogFormat, behind a level that reloads (the LevelVar
// returned) and the sampling of floods. cfg has its defaults and is valid.
func newLogger(cfg Config) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	l, _ := parseLevel(cfg.LogLevel) // validated
	level.Set(l)
	var inner slog.Handler
	if cfg.Logger != nil {
		inner = cfg.Logger.Handler()
	} else {
		out := cfg.LogOutput
		if out == nil {
			out = os.Stderr
		}
		opts := &slog.HandlerOptions{Level: level}
		if cfg.LogFormat == "json" {
			inner = slog.NewJSONHandler(out, opts)
		} else {
			inner = slog.NewTextHandler(out, opts)
		}
	}
	return slog.New(logx.New(inner, logx.Options{Level: level, First: orZero(cfg.LogSampleFirst),
		Interval: cfg.LogSampleInterval})), level
}

// requestIDHeader carries an HTTP request's id: the client's, when it sent
// a usable one (a proxy's), else one made here; the answer carries it back.
const requestIDHeader = "X-Request-Id"

// withRequestIDs gives every HTTP request (but WebSocket upgrades, whose
// connections the gateway logs by their own id) an id, in the answer's
// header and in every record logged with the request's context.
func withRequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(requestIDHeader)
		if !usableRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(requestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(logx.With(r.Context(), slog.String("request_id", id))))
	})
}

// usableRequestID accepts a short id of safe characters: a client's id ends
// up in logs, so it must not be able to forge lines or fill them.
func usableRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
}

// Logger is the server's logger (Config.Logger, or the one made from
// LogFormat), with its level and sampling: for a program's own lines.
func (s *Server) Logger() *slog.Logger { return s.log }
