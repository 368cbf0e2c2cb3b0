// Package webhook delivers Parley's events to the app's HTTP endpoints:
// asynchronously, through a bounded queue (an event that finds it full is
// dropped and counted, never waited for), in batches, with retries and
// exponential backoff, each request signed with HMAC-SHA256.
//
// A request is POST with a JSON body {"events": [...]} and the headers
//
//	X-Parley-Timestamp: unix seconds when it was signed
//	X-Parley-Signature: v1=hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// A receiver recomputes the signature and rejects old timestamps (replays).
// Any 2xx answer acknowledges the batch; anything else is retried.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/tracing"
	"github.com/parleyim/parley/internal/webhook/signature"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Config configures the dispatcher. Zero values take the stated defaults.
type Config struct {
	// URLs receive every event (each URL its own copy). Empty: webhooks off.
	URLs []string
	// Secret signs the requests. Required when URLs is set.
	Secret string
	// Events limits which event types are sent ("message.stored",
	// "group.changed", "user.online", "user.offline"). Empty: all.
	Events []string
	// QueueSize bounds the events waiting per URL. Default 10,000. (A
	// Parley server passes URLs, Secret, Events, QueueSize and Logger
	// explicitly, from server.Config; the fields below have no
	// configuration key and take their defaults here.)
	QueueSize int
	// MaxBatch is the most events in one request. Default 100.
	MaxBatch int
	// Timeout bounds one request. Default 5s.
	Timeout time.Duration
	// MaxRetries is how many times a failed batch is retried (with backoff
	// from 100 ms doubling to 30 s) before it is dropped and counted. Default 8.
	MaxRetries int
	Logger     *slog.Logger
	// Tracer, when set, traces each POST and sends its traceparent. Nil: off.
	Tracer *tracing.Tracer
}

// Stats are running totals, summed over URLs.
type Stats struct {
	Queued    int    // events waiting now
	Delivered uint64 // events acknowledged by a receiver
	Dropped   uint64 // events dropped: queue full, or retries exhausted
	Failures  uint64 // failed requests (each retry counts)
}

// Dispatcher queues events and sends them. Create with New, stop with Close.
type Dispatcher struct {
	cfg    Config
	types  map[chat.EventType]bool // nil: all
	sinks  []*sink
	client *http.Client
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

type sink struct {
	addr  atomic.Pointer[sinkURL] // swapped by SetURLs
	queue chan chat.Event         // encoded by the sender, off the delivery path

	delivered, dropped, failures atomic.Uint64
}

type sinkURL struct {
	url    string
	logURL string // url without credentials, for logs
}

// New validates cfg and starts one sender per URL.
func New(cfg Config) (*Dispatcher, error) {
	if len(cfg.URLs) > 0 && cfg.Secret == "" {
		return nil, errors.New("webhook: a secret is required")
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 10_000
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dispatcher{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout, Transport: cfg.Tracer.Transport(nil, "parley.webhook")}, stop: make(chan struct{})}
	if len(cfg.Events) > 0 {
		d.types = make(map[chat.EventType]bool)
		for _, e := range cfg.Events {
			switch t := chat.EventType(e); t {
			case chat.EventMessageStored, chat.EventGroupChanged, chat.EventUserOnline, chat.EventUserOffline, chat.EventMessageOffline:
				d.types[t] = true
			default:
				return nil, errors.New("webhook: unknown event type " + strconv.Quote(e))
			}
		}
	}
	for _, u := range cfg.URLs {
		s := &sink{queue: make(chan chat.Event, cfg.QueueSize)}
		s.addr.Store(&sinkURL{url: u, logURL: redactURL(u)})
		d.sinks = append(d.sinks, s)
		d.wg.Add(1)
		go d.run(s)
	}
	return d, nil
}

// SetURLs changes the URLs events are sent to, each in the place of the
// one at its position: the events queued for a URL go to its replacement.
// The number of URLs is fixed at New (each has its queue and sender).
func (d *Dispatcher) SetURLs(urls []string) error {
	if len(urls) != len(d.sinks) {
		return fmt.Errorf("webhook: %d URLs configured, %d given: the number of URLs changes only with a restart", len(d.sinks), len(urls))
	}
	for i, u := range urls {
		d.sinks[i].addr.Store(&sinkURL{url: u, logURL: redactURL(u)})
	}
	return nil
}

// Enabled reports whether any URL is configured.
func (d *Dispatcher) Enabled() bool { return d != nil && len(d.sinks) > 0 }

// Subscribed reports whether events of type t were asked for by name in
// Events (message.offline costs a check of every recipient, so "all" does
// not include it).
func (d *Dispatcher) Subscribed(t chat.EventType) bool {
	return d.Enabled() && d.types[t]
}

// Publish queues ev for every URL without blocking; a full queue drops it (counted).
func (d *Dispatcher) Publish(ev chat.Event) {
	if !d.Enabled() || (d.types != nil && !d.types[ev.Type]) {
		return
	}
	for _, s := range d.sinks {
		select {
		case s.queue <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}

// Stats returns running totals.
func (d *Dispatcher) Stats() Stats {
	var st Stats
	if d == nil {
		return st
	}
	for _, s := range d.sinks {
		st.Queued += len(s.queue)
		st.Delivered += s.delivered.Load()
		st.Dropped += s.dropped.Load()
		st.Failures += s.failures.Load()
	}
	return st
}

// Close stops the senders; events still queued are dropped (webhooks are
// notifications, not the record: the messages are in storage).
func (d *Dispatcher) Close() {
	if d == nil {
		return
	}
	d.closed.Do(func() { close(d.stop) })
	d.wg.Wait()
}

func (d *Dispatcher) run(s *sink) {
	defer d.wg.Done()
	batch := make([]chat.Event, 0, d.cfg.MaxBatch)
	for {
		select {
		case ev := <-s.queue:
			batch = append(batch[:0], ev)
		case <-d.stop:
			return
		}
	fill:
		for len(batch) < d.cfg.MaxBatch {
			select {
			case ev := <-s.queue:
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		body := encodeBatch(batch)
		if !d.sendWithRetry(s, body) {
			s.dropped.Add(uint64(len(batch)))
			d.cfg.Logger.Warn("webhook: batch dropped after retries", "url", s.addr.Load().logURL, "events", len(batch))
			continue
		}
		s.delivered.Add(uint64(len(batch)))
	}
}

// redactURL is raw fit for a log: its userinfo and query string (either
// may carry the receiver's credentials) replaced by "REDACTED", its fragment
// dropped; scheme, host and path stay, so the operator can tell which URL
// it is.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)" // url.Parse's error would quote it
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		r.User = url.User("REDACTED")
	}
	if u.RawQuery != "" || u.ForceQuery {
		r.RawQuery = "REDACTED"
	}
	return r.String()
}

func encodeBatch(events []chat.Event) []byte {
	list := make([]eventJSON, len(events))
	for i, ev := range events {
		list[i] = toJSON(ev)
	}
	b, _ := json.Marshal(struct {
		Events []eventJSON `json:"events"`
	}{list}) // only strings, numbers and protojson output: cannot fail
	return b
}

// sendWithRetry posts body until a 2xx, retries run out, or Close.
func (d *Dispatcher) sendWithRetry(s *sink, body []byte) bool {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if d.post(s.addr.Load().url, body) {
			return true
		}
		s.failures.Add(1)
		if attempt >= d.cfg.MaxRetries {
			return false
		}
		select {
		case <-time.After(backoff):
		case <-d.stop:
			return false
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (d *Dispatcher) post(url string, body []byte) bool {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "parley-webhook/1")
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", "v1="+Sign(d.cfg.Secret, ts, body))
	resp, err := d.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// Sign is the hex HMAC-SHA256 of timestamp + "." + body under secret (what
// X-Parley-Signature carries after "v1="). It is signature.Sign, kept here
// for the callers and receivers that know it by this name.
func Sign(secret, timestamp string, body []byte) string {
	return signature.Sign(secret, timestamp, body)
}

// Verify checks a request's signature header against its timestamp and
// body, in constant time. Receivers written in Go can use it.
func Verify(secret, timestamp, signatureHeader string, body []byte) bool {
	return signature.Verify(secret, timestamp, signatureHeader, body)
}

// eventJSON is an event's wire form.
type eventJSON struct {
	Type string `json:"type"`
	// Time is unix milliseconds.
	Time       int64           `json:"time"`
	Message    json.RawMessage `json:"message,omitempty"`
	UserID     string          `json:"user_id,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
	DeviceID   string          `json:"device_id,omitempty"`
	DeviceType string          `json:"device_type,omitempty"`
	Sessions   *int            `json:"sessions,omitempty"`
	// message.offline
	ConversationID string          `json:"conversation_id,omitempty"`
	FirstSeq       string          `json:"first_seq,omitempty"`
	LastSeq        string          `json:"last_seq,omitempty"`
	Recipients     []recipientJSON `json:"recipients,omitempty"`
}

type recipientJSON struct {
	UserID    string   `json:"user_id"`
	DeviceIDs []string `json:"device_ids"`
}

func toJSON(ev chat.Event) eventJSON {
	j := eventJSON{Type: string(ev.Type), Time: ev.Time.UnixMilli()}
	switch {
	case ev.Type == chat.EventMessageOffline:
		j.ConversationID = ev.ConversationID
		j.FirstSeq, j.LastSeq = strconv.FormatUint(ev.FirstSeq, 10), strconv.FormatUint(ev.LastSeq, 10)
		j.Recipients = make([]recipientJSON, len(ev.Recipients))
		for i, r := range ev.Recipients {
			j.Recipients[i] = recipientJSON{UserID: r.UserID, DeviceIDs: r.DeviceIDs}
			if r.DeviceIDs == nil {
				j.Recipients[i].DeviceIDs = []string{}
			}
		}
	case ev.Message != nil:
		j.Message = messageJSON(ev.Message)
	default:
		n := ev.Sessions
		j.UserID, j.SessionID, j.DeviceID, j.DeviceType, j.Sessions = ev.UserID, ev.SessionID, ev.DeviceID, ev.DeviceType, &n
	}
	return j
}

func messageJSON(m *pb.Message) json.RawMessage {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
