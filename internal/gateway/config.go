package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"time"

	"github.com/parleyim/parley/internal/limit"
)

// Config configures a Gateway. The zero value of every field selects its
// documented default; negative values are rejected by New. The defaults
// serve direct users of the package: a Parley server (package server)
// passes every field that has a configuration key explicitly, with the
// defaults of server.Config, so only Workers takes its default here.
type Config struct {
	// MaxFrameBytes is the largest client frame accepted, in bytes of payload
	// (a WebSocket message after reassembly of continuation frames, or a TCP
	// frame after its 4-byte prefix). Larger frames are refused with
	// ERROR_CODE_FRAME_TOO_LARGE before anything is allocated for them.
	// Default 64 KiB; at most 1 GiB.
	MaxFrameBytes int
	// SendQueueFrames caps the frames queued for one connection and not yet
	// handed to the socket. Exceeding it closes the connection with
	// DISCONNECT_CODE_SLOW. Default 1024.
	SendQueueFrames int
	// SendQueueBytes caps the encoded bytes queued or being written for one
	// connection. Exceeding it closes the connection with DISCONNECT_CODE_SLOW.
	// Default 4 MiB.
	SendQueueBytes int
	// WriteTimeout bounds how long a write to a backed-up socket may take
	// before the connection is closed with DISCONNECT_CODE_SLOW. Default 10 s.
	WriteTimeout time.Duration
	// AuthTimeout is how long a connection may stay without
	// Conn.SetAuthenticated before it is closed with
	// DISCONNECT_CODE_AUTH_TIMEOUT. Default 10 s.
	AuthTimeout time.Duration
	// IdleTimeout is how long a connection may send no frame (WebSocket
	// control frames count) before it is closed with
	// DISCONNECT_CODE_HEARTBEAT_TIMEOUT. Default 90 s (three missed 30 s
	// heartbeats).
	IdleTimeout time.Duration
	// Workers is the number of goroutines that read ready sockets and call
	// the Handler (epoll driver only). Default 4 × GOMAXPROCS.
	Workers int
	// ConnRate limits new connections per client IP address (TCP and
	// WebSocket together); past it a TCP connection is closed at once and a
	// WebSocket upgrade is answered 429. Zero: unlimited.
	ConnRate limit.Rate
	// ConnRateExempt lists the networks ConnRate does not apply to (a load
	// balancer's address, the load generator's loopback). Default none.
	ConnRateExempt []netip.Prefix
	// MaxUnauth caps the connections that have not yet authenticated
	// (Conn.SetAuthenticated), over every address; past it a new TCP
	// connection is closed at once and a WebSocket upgrade is answered 503.
	// Zero: unlimited.
	MaxUnauth int
	// MaxUnauthPerIP caps the unauthenticated connections from one client
	// IP address, loopback included; past it new ones are refused as above.
	// Zero: unlimited.
	MaxUnauthPerIP int
	// UnauthExempt lists the networks MaxUnauthPerIP does not apply to (a
	// load balancer's address). Default none.
	UnauthExempt []netip.Prefix
	// MaxOpenFiles is the process's limit on open file descriptors; with
	// FDReserve it keeps descriptors free for storage files and requests
	// in progress. Zero: no reserve.
	MaxOpenFiles int
	// FDReserve: a new connection is refused (as above) while the process
	// has MaxOpenFiles-FDReserve descriptors or more open. The count is the
	// number of open descriptors (Linux: /proc/self/fd; elsewhere there is
	// no reserve) read once per sweep, and every 100 ms when within
	// FDReserve of the reserve, plus the connections opened since. Zero: none.
	FDReserve int
	// DrainWindow spreads Shutdown's closing of connections over this long
	// (bounded by Shutdown's context), so clients of a cluster node move to
	// the other nodes gradually rather than all at once. Default 0: at once.
	DrainWindow time.Duration

	// Logger receives panics and unexpected socket errors. Default
	// slog.Default().
	Logger *slog.Logger
}

const (
	defaultMaxFrameBytes   = 64 << 10
	defaultSendQueueFrames = 1024
	defaultSendQueueBytes  = 4 << 20
	defaultWriteTimeout    = 10 * time.Second
	defaultAuthTimeout     = 10 * time.Second
	defaultIdleTimeout     = 90 * time.Second
	maxMaxFrameBytes       = 1 << 30
)

// withDefaults validates cfg and fills in its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.MaxFrameBytes < 0 || cfg.SendQueueFrames < 0 || cfg.SendQueueBytes < 0 ||
		cfg.WriteTimeout < 0 || cfg.AuthTimeout < 0 || cfg.IdleTimeout < 0 || cfg.Workers < 0 || cfg.DrainWindow < 0 ||
		cfg.MaxUnauth < 0 || cfg.MaxUnauthPerIP < 0 || cfg.MaxOpenFiles < 0 || cfg.FDReserve < 0 {
		return cfg, errors.New("gateway: negative Config value")
	}
	if cfg.MaxOpenFiles > 0 && cfg.FDReserve >= cfg.MaxOpenFiles {
		return cfg, fmt.Errorf("gateway: FDReserve %d not below MaxOpenFiles %d", cfg.FDReserve, cfg.MaxOpenFiles)
	}
	if cfg.MaxFrameBytes > maxMaxFrameBytes {
		return cfg, fmt.Errorf("gateway: MaxFrameBytes %d above %d", cfg.MaxFrameBytes, maxMaxFrameBytes)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxFrameBytes, defaultMaxFrameBytes)
	def(&cfg.SendQueueFrames, defaultSendQueueFrames)
	def(&cfg.SendQueueBytes, defaultSendQueueBytes)
	def(&cfg.Workers, 4*runtime.GOMAXPROCS(0))
	defDur(&cfg.WriteTimeout, defaultWriteTimeout)
	defDur(&cfg.AuthTimeout, defaultAuthTimeout)
	defDur(&cfg.IdleTimeout, defaultIdleTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}
