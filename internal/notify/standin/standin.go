// Package standin has local stand-ins for the three push platforms (APNs,
// FCM, Web Push), for tests and load benchmarks. Each is an httptest TLS
// server speaking HTTP/2 that implements the platform's documented request
// and answer shapes.
//
// A stand-in checks every part of a request it relies on and records what
// is wrong as a violation (a test should fail on any: see Violations); it
// records the requests and the notifications it accepted (decoded), the
// last DefaultKeep of each, and counts the accepted ones. It can be cued to
// answer a given token with a given status, reason and Retry-After (Answer:
// a queue per token, then the normal success), or to stall (Stall).
package standin

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultKeep is how many requests, and how many notifications, a
// stand-in keeps (the latest).
const DefaultKeep = 10000

// maxViolations is how many violations a stand-in keeps (the first).
const maxViolations = 1000

// maxBody bounds a request body a stand-in reads.
const maxBody = 1 << 20

// Request is one request a stand-in received.
type Request struct {
	Method, Path string
	// Proto is "HTTP/2.0" or "HTTP/1.1".
	Proto  string
	Header http.Header
	Body   []byte
	// Status is what the stand-in answered.
	Status int
}

// Reply is one cued answer.
type Reply struct {
	// Status is the HTTP status; 0: the normal success.
	Status int
	// Reason is the platform's reason (APNs "reason", FCM errorCode, Web
	// Push: the body).
	Reason string
	// RetryAfter is the Retry-After header's value (seconds or an HTTP
	// date); "" for none.
	RetryAfter string
	// Delay holds the answer back this long (or until the request is
	// abandoned or the stand-in closed).
	Delay time.Duration
}

// ring keeps the last keep values added.
type ring[T any] struct {
	mu    sync.Mutex
	keep  int
	items []T
	next  int // where the next goes once full
}

func (r *ring[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.keep <= 0:
	case len(r.items) < r.keep:
		r.items = append(r.items, v)
	default:
		r.items[r.next] = v
		r.next = (r.next + 1) % r.keep
	}
}

func (r *ring[T]) snapshot() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, len(r.items))
	out = append(out, r.items[r.next:]...)
	return append(out, r.items[:r.next]...)
}

func (r *ring[T]) setKeep(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := make([]T, 0, len(r.items))
	old = append(old, r.items[r.next:]...)
	old = append(old, r.items[:r.next]...)
	if n < 0 {
		n = 0
	}
	if len(old) > n {
		old = old[len(old)-n:]
	}
	r.keep, r.items, r.next = n, old, 0
}

// base is what every stand-in has.
type base[N any] struct {
	srv   *httptest.Server
	done  chan struct{}
	close sync.Once

	count atomic.Int64
	keep  atomic.Int64 // mirrors the rings' keep, read without their locks
	reqs  ring[Request]
	notes ring[N]

	vmu        sync.Mutex
	violations []string
	vcount     int

	cmu   sync.Mutex
	ncued atomic.Int64
	cues  map[string][]Reply

	onAccept atomic.Pointer[func(N)]
}

// Listen says where a stand-in listens and with which certificate, for one
// that another process must reach (a benchmark's). The zero value: a
// loopback port of the kernel's choice and httptest's certificate.
type Listen struct {
	// Addr is host:port ("": 127.0.0.1:0).
	Addr string
	// Cert is the TLS certificate served (nil: httptest's, for 127.0.0.1
	// and example.com).
	Cert *tls.Certificate
}

func (b *base[N]) init(h http.Handler, l Listen) error {
	b.done = make(chan struct{})
	b.reqs.keep, b.notes.keep = DefaultKeep, DefaultKeep
	b.keep.Store(DefaultKeep)
	b.cues = make(map[string][]Reply)
	b.srv = httptest.NewUnstartedServer(b.pooled(h))
	if l.Addr != "" {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return err
		}
		b.srv.Listener.Close()
		b.srv.Listener = ln
	}
	if l.Cert != nil {
		b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*l.Cert}}
	}
	b.srv.EnableHTTP2 = true
	b.srv.Config.MaxHeaderBytes = 64 << 10
	b.srv.StartTLS()
	return nil
}

// handlers is how many long-lived goroutines serve requests. net/http
// serves each HTTP/2 request on a new goroutine, whose stack grows (and is
// copied) while the request is checked: at a benchmark's rate that was a
// fifth of the stand-in's CPU. A request that finds every one busy (a
// scripted delay holds one) is served on its own goroutine instead.
const handlers = 32

type pooledRequest struct {
	w    http.ResponseWriter
	r    *http.Request
	done chan struct{}
}

func (b *base[N]) pooled(h http.Handler) http.Handler {
	work := make(chan *pooledRequest)
	for range handlers {
		go func() {
			for {
				select {
				case <-b.done:
					return
				case p := <-work:
					h.ServeHTTP(p.w, p.r)
					close(p.done)
				}
			}
		}()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &pooledRequest{w: w, r: r, done: make(chan struct{})}
		select {
		case work <- p:
			<-p.done
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// OnAccept has f called with each notification accepted from now on, on
// the request's goroutine (a benchmark counting them; f must be quick).
func (b *base[N]) OnAccept(f func(N)) { b.onAccept.Store(&f) }

// accepted counts n, hands it to what wants it and returns the count.
func (b *base[N]) accepted(n N) int64 {
	c := b.count.Add(1)
	if f := b.onAccept.Load(); f != nil {
		(*f)(n)
	}
	if b.keep.Load() > 0 {
		b.notes.add(n)
	}
	return c
}

// URL is the stand-in's origin, https://127.0.0.1:port.
func (b *base[N]) URL() string { return b.srv.URL }

// Client returns an HTTP client (HTTP/2) that trusts the stand-in.
func (b *base[N]) Client() *http.Client { return b.srv.Client() }

// Count is how many notifications the stand-in accepted.
func (b *base[N]) Count() int64 { return b.count.Load() }

// Requests returns the requests received (the last kept), oldest first.
func (b *base[N]) Requests() []Request { return b.reqs.snapshot() }

// Notifications returns the notifications accepted (the last kept),
// oldest first.
func (b *base[N]) Notifications() []N { return b.notes.snapshot() }

// SetKeep sets how many requests and notifications are kept; 0: none (a
// benchmark).
func (b *base[N]) SetKeep(n int) {
	b.keep.Store(int64(n))
	b.reqs.setKeep(n)
	b.notes.setKeep(n)
}

// Violations returns what was wrong with the requests: the first 1000,
// and a last line with the number left out, if any.
func (b *base[N]) Violations() []string {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	out := append([]string(nil), b.violations...)
	if b.vcount > len(b.violations) {
		out = append(out, fmt.Sprintf("(and %d more)", b.vcount-len(b.violations)))
	}
	return out
}

func (b *base[N]) violation(r *http.Request, format string, args ...any) {
	msg := r.Method + " " + r.URL.Path + ": " + fmt.Sprintf(format, args...)
	b.vmu.Lock()
	defer b.vmu.Unlock()
	b.vcount++
	if len(b.violations) < maxViolations {
		b.violations = append(b.violations, msg)
	}
}

// Answer cues the stand-in to answer the next request for token with
// status, reason and, if not "", a Retry-After of retryAfter. Cues for a
// token queue up; after them it answers normally again.
func (b *base[N]) Answer(token string, status int, reason, retryAfter string) {
	b.cue(token, Reply{Status: status, Reason: reason, RetryAfter: retryAfter})
}

// Stall cues the stand-in to hold the next answer for token for d (or
// until the request is abandoned or the stand-in closed), then answer
// normally.
func (b *base[N]) Stall(token string, d time.Duration) {
	b.cue(token, Reply{Delay: d})
}

func (b *base[N]) cue(token string, r Reply) {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	b.cues[token] = append(b.cues[token], r)
	b.ncued.Add(1)
}

// next takes the next cued reply for token, if any.
func (b *base[N]) next(token string) (Reply, bool) {
	if b.ncued.Load() == 0 {
		return Reply{}, false
	}
	b.cmu.Lock()
	defer b.cmu.Unlock()
	q := b.cues[token]
	if len(q) == 0 {
		return Reply{}, false
	}
	r := q[0]
	if len(q) == 1 {
		delete(b.cues, token)
	} else {
		b.cues[token] = q[1:]
	}
	b.ncued.Add(-1)
	return r, true
}

// wait holds for d, or until r is abandoned or the stand-in closes.
func (b *base[N]) wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-b.done:
	}
}

func (b *base[N]) record(r *http.Request, body []byte, status int) {
	if b.keep.Load() <= 0 {
		return
	}
	b.reqs.add(Request{Method: r.Method, Path: r.URL.Path, Proto: r.Proto, Header: r.Header.Clone(), Body: body, Status: status})
}

// Close stops the stand-in (stalled answers end at once).
func (b *base[N]) Close() {
	b.close.Do(func() {
		close(b.done)
		b.srv.Close()
	})
}

// readBody reads r's body, at most maxBody bytes; ok false if it was more.
func readBody(r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	return b, err == nil && len(b) <= maxBody
}

// b64 decodes base64url with or without padding.
func b64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.URLEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// jwtParts splits and decodes a compact JWS: header and claims JSON
// (numbers kept as json.Number), the signing input and the signature.
func jwtParts(tok string) (header, claims map[string]any, input, sig []byte, err error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, nil, nil, nil, errors.New("not a JWS compact serialization (3 parts)")
	}
	hj, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, nil, nil, nil, errors.New("header is not base64url")
	}
	cj, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, nil, nil, nil, errors.New("claims are not base64url")
	}
	sig, err = base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, nil, nil, nil, errors.New("signature is not base64url")
	}
	if header, err = decodeObject(hj); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("header: %v", err)
	}
	if claims, err = decodeObject(cj); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("claims: %v", err)
	}
	return header, claims, []byte(parts[0] + "." + parts[1]), sig, nil
}

func decodeObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data")
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// verifyES256 checks a JWS ES256 signature (r||s, 32 bytes each).
func verifyES256(pub *ecdsa.PublicKey, input, sig []byte) bool {
	if pub == nil || pub.Curve != elliptic.P256() || len(sig) != 64 {
		return false
	}
	h := sha256.Sum256(input)
	r := new(big.Int).SetBytes(sig[:32])
	s := new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(pub, h[:], r, s)
}

// verifyRS256 checks a JWS RS256 signature.
func verifyRS256(pub *rsa.PublicKey, input, sig []byte) bool {
	h := sha256.Sum256(input)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, h[:], sig) == nil
}

// claimInt returns the integer claim name.
func claimInt(m map[string]any, name string) (int64, bool) {
	n, ok := m[name].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// claimString returns the string claim name.
func claimString(m map[string]any, name string) (string, bool) {
	s, ok := m[name].(string)
	return s, ok
}

// strictDecode decodes b into v refusing unknown fields and trailing data.
func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
