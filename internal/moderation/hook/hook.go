package hook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/parleyim/parley/internal/webhook/signature"
)

// Policy is what a hook's failure decides.
type Policy uint8

// The policies. The zero value is invalid: whether moderation may be
// skipped when the app is down is the operator's choice, not a default.
const (
	_ Policy = iota
	// FailOpen allows the event (and the chain goes on to the next hook).
	FailOpen
	// FailClosed rejects it with CodeUnavailable (a temporary error).
	FailClosed
)

func (p Policy) String() string {
	switch p {
	case FailOpen:
		return "fail_open"
	case FailClosed:
		return "fail_closed"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// HookConfig is one hook. Zero values take the stated defaults.
type HookConfig struct {
	// Name identifies the hook in logs and Stats; unique. Default: the
	// URL without its credentials (userinfo and query).
	Name string
	// URL receives the requests: http or https. Required.
	URL string
	// Events are the event types sent to this hook. Required.
	Events []EventType
	// Secret signs the requests (X-Parley-Signature). Required.
	Secret string
	// Policy decides when the hook does not. Required.
	Policy Policy
	// Timeout bounds a call, from its start (waiting for a slot included)
	// to the answer read. Default 500 ms.
	Timeout time.Duration
	// MaxInFlight is the most requests in flight to the hook at once (and
	// the idle connections kept to it). Default 256.
	MaxInFlight int
	// MaxBatch, above 1, lets one request carry up to this many events:
	// calls that arrive while every request slot is busy are sent together
	// when one frees (the batch form of the package doc), so a busy hook
	// gets fewer, larger requests and no call waits for a batch to fill.
	// Default 1: one event a request, the plain form.
	MaxBatch int
	// MaxAnswerBytes is the largest answer body accepted, in bytes; a
	// replaced payload must fit in it (as base64: 3/4 of it). Default 64 KiB.
	MaxAnswerBytes int64
	// FailureThreshold is how many consecutive failures open the circuit
	// breaker. Default 5.
	FailureThreshold int
	// BreakerCooldown is how long an open breaker stays open before one
	// probe request is let through. Default 5 s.
	BreakerCooldown time.Duration
}

// Config configures the hooks. Zero values take the stated defaults.
type Config struct {
	// Hooks in the order they run for an event type.
	Hooks []HookConfig
	// Client sends every hook's requests instead of the transports made
	// per hook (tests, or a proxy setup of the caller's). Its Timeout
	// should be zero (each call has its own), and its CheckRedirect should
	// refuse redirects as the hooks' own clients do (a redirect is then a
	// malformed answer).
	Client *http.Client
	// RootCAs are trusted for https hooks instead of the system's
	// certificate authorities (an app behind a private CA). Ignored with
	// Client.
	RootCAs *x509.CertPool
	// Logger default: slog.Default().
	Logger *slog.Logger
}

// ErrClosed is Decide's error after Close.
var ErrClosed = errors.New("hook: closed")

// Hooks asks the configured hooks. Create with New, release with Close.
// Safe for concurrent use.
type Hooks struct {
	log        *slog.Logger
	hooks      []*hook
	byType     map[EventType][]*hook // read-only after New
	transports []*http.Transport     // the ones New made, closed by Close

	mu     sync.Mutex // guards closed, and calls.Add so that Close's Wait sees every call
	closed bool
	calls  sync.WaitGroup
}

// New validates cfg and makes the hooks' clients.
func New(cfg Config) (*Hooks, error) {
	h := &Hooks{log: cfg.Logger, byType: make(map[EventType][]*hook)}
	if h.log == nil {
		h.log = slog.Default()
	}
	names := make(map[string]bool)
	for i, hc := range cfg.Hooks {
		k, err := newHook(hc, h.log)
		if err != nil {
			return nil, fmt.Errorf("hook %d: %w", i+1, err)
		}
		if names[k.name] {
			return nil, fmt.Errorf("hook %d: name %q is taken (set Name)", i+1, k.name)
		}
		names[k.name] = true
		seen := make(map[EventType]bool)
		for _, t := range hc.Events {
			if !t.valid() {
				return nil, fmt.Errorf("hook %q: unknown event type %q", k.name, t)
			}
			if seen[t] {
				return nil, fmt.Errorf("hook %q: event type %q twice", k.name, t)
			}
			seen[t] = true
			h.byType[t] = append(h.byType[t], k)
		}
		if len(seen) == 0 {
			return nil, fmt.Errorf("hook %q: no event types", k.name)
		}
		k.client = cfg.Client
		if k.client == nil {
			tr := newTransport(maxInFlight(hc), cfg.RootCAs)
			h.transports = append(h.transports, tr)
			k.client = &http.Client{
				Transport: tr,
				// A redirect is a malformed answer: the signed body goes
				// only where the operator said.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
		h.hooks = append(h.hooks, k)
	}
	return h, nil
}

// maxInFlight is hc.MaxInFlight with its default applied.
func maxInFlight(hc HookConfig) int {
	if hc.MaxInFlight <= 0 {
		return 256
	}
	return hc.MaxInFlight
}

// newTransport keeps as many idle connections as requests may be in flight,
// so a steady load never dials; https gets HTTP/2.
func newTransport(conns int, roots *x509.CertPool) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second, // the call's Timeout usually ends it first
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true, // a custom TLS config or dialer turns it off otherwise
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Wants reports whether any hook is registered for events of type t.
func (h *Hooks) Wants(t EventType) bool { return len(h.byType[t]) > 0 }

// Decide asks the hooks registered for ev.Type, in order, and returns
// their decision: Allow when none is registered. The error is non-nil only
// when ev is invalid (unknown type, Change not JSON), after Close, or when
// ctx ended first (its error): then there is no decision (the call goes on
// without the caller, or is dropped if its request has not been sent).
func (h *Hooks) Decide(ctx context.Context, ev Event) (Decision, error) {
	type result struct {
		d   Decision
		err error
	}
	ch := make(chan result, 1)
	var gaveUp atomic.Bool
	h.decide(ev, &gaveUp, func(d Decision, err error) { ch <- result{d, err} })
	select {
	case r := <-ch:
		return r.d, r.err
	case <-ctx.Done():
		gaveUp.Store(true)
		if chain := h.byType[ev.Type]; len(chain) > 0 {
			chain[0].c.canceled.Add(1)
		}
		return Decision{}, ctx.Err()
	}
}

// DecideAsync is Decide without a caller waiting: done gets the decision
// (or the error for an invalid event or after Close) exactly once, on this
// goroutine when it is known at once (no hook for the type, an open
// breaker) or else on one of the goroutines sending the hook's requests:
// done must not block for long. No goroutine waits per call: calls queue
// per hook and at most MaxInFlight goroutines per hook send them.
func (h *Hooks) DecideAsync(ev Event, done func(Decision, error)) { h.decide(ev, nil, done) }

// decide runs the chain for ev; gaveUp, when set, drops the calls not yet
// sent.
func (h *Hooks) decide(ev Event, gaveUp *atomic.Bool, done func(Decision, error)) {
	if !ev.Type.valid() {
		done(Decision{}, fmt.Errorf("hook: unknown event type %q", ev.Type))
		return
	}
	if ev.Change != nil && !json.Valid(ev.Change) {
		done(Decision{}, errors.New("hook: Change is not valid JSON"))
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		done(Decision{}, ErrClosed)
		return
	}
	chain := h.byType[ev.Type]
	if len(chain) == 0 {
		h.mu.Unlock()
		done(Decision{Action: Allow}, nil)
		return
	}
	h.calls.Add(1)
	h.mu.Unlock()
	c := &chainCall{h: h, chain: chain, ev: ev, gaveUp: gaveUp, out: Decision{Action: Allow}, done: done}
	c.next()
}

// chainCall is one Decide going through its hooks.
type chainCall struct {
	h      *Hooks
	chain  []*hook
	i      int
	ev     Event // the content as the hooks so far left it
	gaveUp *atomic.Bool
	out    Decision
	done   func(Decision, error)
}

// next asks the next hook, or ends the chain.
func (c *chainCall) next() {
	if c.i == len(c.chain) {
		c.finish(c.out, nil)
		return
	}
	k := c.chain[c.i]
	c.i++
	k.call(&c.ev, c.gaveUp, c.answered)
}

// answered takes one hook's decision.
func (c *chainCall) answered(d Decision, err error) {
	if err != nil {
		c.finish(Decision{}, err)
		return
	}
	switch d.Action {
	case Reject:
		c.finish(d, nil)
		return
	case Replace:
		// The next hook is asked about the new content.
		c.ev.ContentType, c.ev.Payload = d.ContentType, d.Payload
		c.out.Action, c.out.ContentType, c.out.Payload = Replace, d.ContentType, d.Payload
	}
	if d.Failure != "" && c.out.Failure == "" {
		c.out.Failure, c.out.Hook = d.Failure, d.Hook
	}
	c.next()
}

func (c *chainCall) finish(d Decision, err error) {
	c.done(d, err)
	c.h.calls.Done()
}

// Close waits for the calls in flight (each bounded by its hook's Timeout)
// and closes the idle connections. Decide then returns ErrClosed.
func (h *Hooks) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.calls.Wait()
	for _, tr := range h.transports {
		tr.CloseIdleConnections()
	}
}

// hook is one configured hook: its client, slots, breaker and counters.
type hook struct {
	name, url, secret string
	policy            Policy
	timeout           time.Duration
	maxAnswer         int64
	client            *http.Client
	log               *slog.Logger

	// q holds the calls waiting for a request; at most MaxInFlight
	// goroutines send them, each one request at a time.
	q       queue
	batched bool // MaxBatch > 1: requests in the batch form
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	c       counters
}

// callError is a failed call, as the breaker is told of it.
type callError struct {
	failure Failure
	detail  string
}

func (e *callError) Error() string { return string(e.failure) + ": " + e.detail }

func newHook(hc HookConfig, log *slog.Logger) (*hook, error) {
	u, err := url.Parse(hc.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("URL must be an http or https URL")
	}
	if hc.Secret == "" {
		return nil, errors.New("a secret is required")
	}
	if hc.Policy != FailOpen && hc.Policy != FailClosed {
		return nil, errors.New("Policy must be FailOpen or FailClosed")
	}
	k := &hook{
		name: hc.Name, url: hc.URL, secret: hc.Secret, policy: hc.Policy,
		timeout: hc.Timeout, maxAnswer: hc.MaxAnswerBytes, log: log,
		q: queue{max: 1, senders: maxInFlight(hc)},
	}
	if k.name == "" {
		k.name = redactURL(u)
	}
	if k.timeout <= 0 {
		k.timeout = 500 * time.Millisecond
	}
	if k.maxAnswer <= 0 {
		k.maxAnswer = 64 << 10
	}
	if hc.MaxBatch > 1 {
		k.q.max, k.batched = hc.MaxBatch, true
		k.maxAnswer *= int64(hc.MaxBatch) // MaxAnswerBytes is per decision
	}
	threshold := uint32(5)
	if hc.FailureThreshold > 0 {
		threshold = uint32(hc.FailureThreshold)
	}
	cooldown := hc.BreakerCooldown
	if cooldown <= 0 {
		cooldown = 5 * time.Second
	}
	k.c.init()
	k.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        k.name,
		MaxRequests: 1, // one probe when half-open
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		// Called under the breaker's lock, once per change.
		OnStateChange: func(name string, from, to gobreaker.State) {
			switch {
			case from == gobreaker.StateClosed && to == gobreaker.StateOpen:
				log.Warn("moderation hook: circuit breaker open, its policy decides",
					"hook", name, "policy", k.policy.String(), "cooldown", cooldown, "last_failure", k.c.lastFailure())
			case to == gobreaker.StateClosed:
				log.Info("moderation hook: circuit breaker closed, the hook answers again", "hook", name)
			default:
				log.Debug("moderation hook: circuit breaker", "hook", name, "from", from.String(), "to", to.String(), "last_failure", k.c.lastFailure())
			}
		},
	})
	return k, nil
}

// call asks k about ev: done gets the decision, or errGaveUp when the
// caller gave up before the request was sent.
func (k *hook) call(ev *Event, gaveUp *atomic.Bool, done func(Decision, error)) {
	// An open breaker answers at once, without queueing.
	if k.breaker.State() == gobreaker.StateOpen {
		done(k.fail(FailureBreakerOpen), nil)
		return
	}
	k.q.push(k, &waiter{ev: ev, deadline: time.Now().Add(k.timeout), gaveUp: gaveUp, done: done})
}

// fail counts f and returns the Policy's decision.
func (k *hook) fail(f Failure) Decision {
	k.c.failed(f)
	if k.policy == FailOpen {
		return Decision{Action: Allow, Failure: f, Hook: k.name}
	}
	return Decision{Action: Reject, Code: CodeUnavailable, Failure: f, Hook: k.name}
}

// post sends one request and reads the answer.
func (k *hook) post(ctx context.Context, ev *Event) (Decision, *callError) {
	body := appendRequest(make([]byte, 0, 300+len(ev.Payload)*4/3), ev)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.url, bytes.NewReader(body))
	if err != nil {
		return Decision{}, &callError{FailureError, "request: " + err.Error()}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "parley-hook/1")
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", "v1="+signature.Sign(k.secret, ts, body))
	if key := idempotencyKey(ev); key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return Decision{}, &callError{FailureError, redactErr(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Read what an answer may hold, so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, k.maxAnswer))
		return Decision{}, &callError{FailureMalformed, "status " + strconv.Itoa(resp.StatusCode)}
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, k.maxAnswer+1))
	if err != nil {
		return Decision{}, &callError{FailureError, "reading the answer: " + redactErr(err)}
	}
	if int64(len(answer)) > k.maxAnswer {
		return Decision{}, &callError{FailureMalformed, "answer longer than " + strconv.FormatInt(k.maxAnswer, 10) + " bytes"}
	}
	d, err := parseAnswer(answer, ev)
	if err != nil {
		return Decision{}, &callError{FailureMalformed, err.Error()}
	}
	return d, nil
}

// redactErr is err's text without the URL a *url.Error carries (its
// userinfo or query may hold the app's credentials).
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// redactURL is u fit for a log and a metric label: userinfo and query
// (either may carry the app's credentials) replaced by "REDACTED", fragment
// dropped. (The same rule as the webhooks' logs.)
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		r.User = url.User("REDACTED")
	}
	if u.RawQuery != "" || u.ForceQuery {
		r.RawQuery = "REDACTED"
	}
	return r.String()
}
