// Package notify sends offline push notifications: through APNs, FCM and
// Web Push (the clients in internal/notify/apns, fcm and webpush), to the
// devices that did not receive a stored message in time.
//
// The path of one message: the chat service calls Stored after the message
// is durable (on the node that stored it, so exactly one node decides). The
// message joins its conversation's window, which closes Delay after its
// first message. Then, for each recipient, the window's messages not from
// them, not in a conversation they muted and not from a sender they block
// are due on each of their registered devices that is not connected, or is
// connected but whose user has not acknowledged the messages as delivered.
// A device's due messages go out as one notification, and for Coalesce after
// it further ones wait and go out together ("3 new messages"). Each
// notification is queued for its platform's senders (a bounded queue per
// platform; full: dropped and counted), sent with retries on 429/5xx
// (honouring Retry-After), and a target the platform reports gone is
// removed. Nothing here blocks the chat service: Stored only appends to
// memory.
//
// What is pending lives in memory: a process killed with kill -9 does not
// send the notifications still waiting in a window (docs/push.md says so).
package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/tracing"
)

// Chat is what the notifier asks of the chat service.
type Chat interface {
	// GroupMembers lists a group's current members. The slice is shared
	// and must not be modified.
	GroupMembers(ctx context.Context, conv string) ([]string, error)
	// GroupName is the group's name ("" if unknown).
	GroupName(ctx context.Context, conv string) string
	// ConnectedDevices lists the device ids of uid connected now, on any
	// node of a cluster.
	ConnectedDevices(ctx context.Context, uid string) (map[string]bool, error)
	// Unread is uid's unread message count (the badge); hint, when not
	// nil, is their state in one conversation as just read.
	Unread(ctx context.Context, uid string, hint *chat.UnreadHint) (int, error)
	// TakesPart reports whether uid takes part in the thread under root
	// (wrote it or a reply): thread replies notify only those, and the
	// users they mention.
	TakesPart(ctx context.Context, uid, conv string, root uint64) bool
}

// Template makes a notification's title and body. {sender}, {group},
// {text} and {count} are replaced by the sender's id, the group's name, the
// message text (text content types only) and the number of messages.
type Template struct {
	Title, Body string
}

// Preview modes.
const (
	// PreviewFull shows the sender and a preview of the text.
	PreviewFull = "full"
	// PreviewHidden shows only "New message" (or "N new messages").
	PreviewHidden = "hidden"
)

// Config configures the notifier. Zero values take the stated defaults.
type Config struct {
	Store store.Store
	// Providers send to the platforms; a kind without one is not offered
	// (devices cannot register for it).
	Providers []provider.Provider
	// Delay is how long a connected device has to acknowledge a message
	// before it is pushed. Default 3s.
	Delay time.Duration
	// Coalesce is how long after a notification to a device further ones
	// wait, to go out as one. Default 10s.
	Coalesce time.Duration
	// TTL is how long a platform keeps a notification for a device it
	// cannot reach. Default 24h.
	TTL time.Duration
	// Preview is PreviewFull (default) or PreviewHidden.
	Preview string
	// Templates by content type ("text", "image", ...; "*" for any other);
	// a single message only (several are "N new messages"). Defaults: title
	// "{sender}" (in a group "{sender} in {group}"), body "{text}" for text
	// and "New message" otherwise.
	Templates map[string]Template
	// NoBadge leaves the app badge alone instead of setting the unread count.
	NoBadge bool
	// QueueSize bounds the notifications waiting per platform. Default 10,000.
	QueueSize int
	// Workers is how many requests each platform has in flight. Default 64.
	Workers int
	// MaxRetries is how many times a temporary failure is retried. Default 3.
	MaxRetries int
	// SendTimeout bounds one request to a platform. Default 10s.
	SendTimeout time.Duration
	// LogSize is how many attempts are kept per device; LogDevices how
	// many devices' logs (the oldest device's is dropped first). Defaults
	// 20 and 10,000.
	LogSize, LogDevices int
	// MaxPendingBytes bounds the memory of messages waiting in windows;
	// past it new messages are not considered (counted). Default 64 MiB.
	MaxPendingBytes int64
	// MaxTargetsPerUser caps the devices with a target per user. Default 20.
	MaxTargetsPerUser int
	// Offline, when set, is told of each window's recipients who were
	// pushed or would have been (the message.offline webhook event),
	// including users with no target at all.
	Offline func(chat.Event)
	Logger  *slog.Logger
	// Tracer, when set, traces each request to a platform. Nil: off.
	Tracer *tracing.Tracer
}

func (c *Config) setDefaults() {
	if c.Delay <= 0 {
		c.Delay = 3 * time.Second
	}
	if c.Coalesce <= 0 {
		c.Coalesce = 10 * time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 24 * time.Hour
	}
	if c.Preview == "" {
		c.Preview = PreviewFull
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 10_000
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 3
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 10 * time.Second
	}
	if c.LogSize <= 0 {
		c.LogSize = 20
	}
	if c.LogDevices <= 0 {
		c.LogDevices = 10_000
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = 64 << 20
	}
	if c.MaxTargetsPerUser <= 0 {
		c.MaxTargetsPerUser = 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Notifier decides who is pushed and sends. Create with New, start with
// Start, stop with Close.
type Notifier struct {
	cfg       Config
	log       *slog.Logger
	store     store.Store
	chat      Chat
	providers map[string]*platform

	windows windows
	devices coalescer
	plog    pushLog

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	fire   chan *window // windows whose delay is over, for the deciders
	stop   chan struct{}
	closed sync.Once

	stats struct {
		considered, skippedPending, windows, decided, offline atomic.Uint64
	}
}

// deciders is how many windows are decided at once (each reads the store).
const deciders = 32

// New builds a notifier; it decides nothing until Start.
func New(cfg Config) (*Notifier, error) {
	cfg.setDefaults()
	if cfg.Store == nil {
		return nil, errors.New("notify: a store is required")
	}
	if cfg.Preview != PreviewFull && cfg.Preview != PreviewHidden {
		return nil, errors.New(`notify: preview must be "full" or "hidden"`)
	}
	n := &Notifier{cfg: cfg, log: cfg.Logger, store: cfg.Store, providers: make(map[string]*platform),
		fire: make(chan *window, 1024), stop: make(chan struct{})}
	n.life, n.cancel = context.WithCancel(context.Background())
	for _, p := range cfg.Providers {
		if _, dup := n.providers[p.Kind()]; dup {
			return nil, errors.New("notify: two providers for " + p.Kind())
		}
		n.providers[p.Kind()] = newPlatform(n, p)
	}
	n.windows.init(cfg.MaxPendingBytes)
	n.devices.init()
	n.plog.init(cfg.LogSize, cfg.LogDevices)
	return n, nil
}

// Start begins deciding and sending; c answers the notifier's questions.
func (n *Notifier) Start(c Chat) {
	n.chat = c
	n.wg.Add(2 + deciders)
	go n.windowLoop()
	go n.devices.loop(n)
	for range deciders {
		go n.decideLoop()
	}
	for _, p := range n.providers {
		p.start()
	}
}

// Close stops the notifier; what is still pending is dropped.
func (n *Notifier) Close() {
	n.closed.Do(func() {
		close(n.stop)
		n.cancel()
	})
	n.wg.Wait()
}

// Kinds lists the platforms this server sends to.
func (n *Notifier) Kinds() []string {
	var out []string
	for _, k := range []string{provider.APNs, provider.FCM, provider.WebPush} {
		if n.providers[k] != nil {
			out = append(out, k)
		}
	}
	return out
}

// Enabled reports whether anything is sent or told: a platform or the
// message.offline event. When not, Stored costs nothing.
func (n *Notifier) Enabled() bool {
	return n != nil && (len(n.providers) > 0 || n.cfg.Offline != nil)
}
