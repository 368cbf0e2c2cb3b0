// Package webpush sends notifications by Web Push: RFC 8030 delivery to
// the subscription's endpoint, the payload encrypted per RFC 8291
// (aes128gcm), the application server identified per RFC 8292 (VAPID).
//
// One Send is one POST to the endpoint; the answer is reported in a
// provider.Result and never retried here (the dispatcher does that).
//
// The endpoint URL comes from a user's browser, so a Client will not be
// made a tool to reach what only the server can: it requires https, at
// most 2048 bytes, follows no redirect, uses no proxy, and (unless
// Config.AllowPrivateEndpoints) refuses to connect to loopback, private,
// link-local, unspecified, multicast and other special-purpose addresses,
// checking the address actually dialled (net.Dialer.Control), not only the
// host name. Such a target is reported Invalid.
package webpush

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"github.com/parleyim/parley/internal/notify/internal/pushhttp"
	"github.com/parleyim/parley/internal/notify/provider"
)

// MaxEndpoint is the longest subscription endpoint accepted, in bytes.
const MaxEndpoint = 2048

// MaxPayload is the longest plaintext sent: 4096 (the body every push
// service must accept) less the aes128gcm header (86), the AEAD tag (16)
// and the padding delimiter (1).
const MaxPayload = 4096 - 86 - 16 - 1

// padTo: the plaintext (with its delimiter) is padded to a multiple of
// this, so the size of a message tells little about its text.
const padTo = 128

// Config configures a Client.
type Config struct {
	// VAPIDPublicKey and VAPIDPrivateKey are the application server's
	// P-256 key pair, base64url as GenerateVAPIDKeys returns them (the
	// 65-byte uncompressed point and the 32-byte scalar).
	VAPIDPublicKey, VAPIDPrivateKey string
	// Subject is the contact a push service may use: a mailto: or https:
	// URI. Required.
	Subject string
	// Client makes the requests (tests: one that trusts the stand-in). Its
	// Transport must be an *http.Transport (or nil) unless
	// AllowPrivateEndpoints: the guard is put on a clone of it. Nil: a
	// client with timeouts.
	Client *http.Client
	// AllowPrivateEndpoints turns the address guard off (tests, whose
	// stand-ins are on 127.0.0.1).
	AllowPrivateEndpoints bool
	// RootCAs, when set, are the certificate authorities the default client
	// trusts instead of the system's (a TLS-inspecting egress proxy, a
	// local stand-in). Ignored with Client.
	RootCAs *x509.CertPool
}

// Client is a Web Push sender. Safe for concurrent use.
type Client struct {
	pub, priv  string // base64url, unpadded
	subscriber string // Subject as webpush-go wants it
	hc         *http.Client
	guard      bool
}

// GenerateVAPIDKeys makes a VAPID key pair: the public key (the 65-byte
// uncompressed P-256 point, which browsers take as applicationServerKey)
// and the private key (the 32-byte scalar), both base64url without
// padding.
func GenerateVAPIDKeys() (public, private string, err error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes()), nil
}

// b64 decodes base64url with or without padding.
func b64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.URLEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// New checks cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	privb, err := b64(cfg.VAPIDPrivateKey)
	if err != nil || len(privb) != 32 {
		return nil, errors.New("webpush: the VAPID private key is not 32 bytes of base64url")
	}
	priv, err := ecdh.P256().NewPrivateKey(privb)
	if err != nil {
		return nil, fmt.Errorf("webpush: the VAPID private key: %w", err)
	}
	pubb, err := b64(cfg.VAPIDPublicKey)
	if err != nil || !bytes.Equal(pubb, priv.PublicKey().Bytes()) {
		return nil, errors.New("webpush: the VAPID public key is not the private key's (base64url of the 65-byte point)")
	}
	subscriber, err := subject(cfg.Subject)
	if err != nil {
		return nil, err
	}
	hc, err := httpClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{
		pub:        base64.RawURLEncoding.EncodeToString(pubb),
		priv:       base64.RawURLEncoding.EncodeToString(privb),
		subscriber: subscriber,
		hc:         hc,
		guard:      !cfg.AllowPrivateEndpoints,
	}, nil
}

// subject checks the VAPID subject and returns it as webpush-go wants it:
// webpush-go prefixes "mailto:" to anything not starting "https:", so a
// mailto: subject goes without it.
func subject(s string) (string, error) {
	if addr, ok := strings.CutPrefix(s, "mailto:"); ok {
		a, err := mail.ParseAddress(addr)
		if err != nil || a.Name != "" || a.Address != addr {
			return "", fmt.Errorf("webpush: subject %q is not mailto:<address>", s)
		}
		return addr, nil
	}
	if u, err := url.Parse(s); err == nil && u.Scheme == "https" && u.Host != "" && strings.HasPrefix(s, "https:") {
		return s, nil
	}
	return "", errors.New("webpush: the subject must be a mailto: or https: URI")
}

// Kind is provider.WebPush.
func (c *Client) Kind() string { return provider.WebPush }

var errNoRedirect = errors.New("webpush: push service answered with a redirect")

func httpClient(cfg Config) (*http.Client, error) {
	var t *http.Transport
	switch {
	case cfg.Client == nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
		t.ForceAttemptHTTP2 = true
		t.MaxIdleConnsPerHost = 32
		t.ResponseHeaderTimeout = 30 * time.Second
		t.MaxResponseHeaderBytes = pushhttp.MaxHeaderBytes
		t.Proxy = nil
		if cfg.RootCAs != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs}
		}
		cfg.Client = &http.Client{Timeout: 60 * time.Second}
	case cfg.AllowPrivateEndpoints:
	case cfg.Client.Transport == nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	default:
		ht, ok := cfg.Client.Transport.(*http.Transport)
		if !ok {
			return nil, errors.New("webpush: Config.Client's Transport is not an *http.Transport (needed for the address guard)")
		}
		t = ht.Clone()
	}
	hc := *cfg.Client
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return errNoRedirect }
	if t != nil {
		if !cfg.AllowPrivateEndpoints {
			t.Proxy = nil // the guard must see the push service's address, not a proxy's
			t.DialTLSContext = nil
			t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: dialControl}).DialContext
		}
		hc.Transport = t
	}
	return &hc, nil
}

// ErrForbiddenAddress: the endpoint is, or its name resolves to, an
// address a push service cannot be at (loopback, private, ...).
var ErrForbiddenAddress = errors.New("webpush: endpoint address is loopback, private or otherwise not public")

// dialControl refuses a connection to a forbidden address; it runs after
// name resolution, on the address about to be dialled.
func dialControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return ErrForbiddenAddress
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || forbidden(ip) {
		return ErrForbiddenAddress
	}
	return nil
}

// special are address ranges no push service is in, beyond what netip's
// predicates name: this network, shared (CGNAT), IETF protocol
// assignments, benchmarking, reserved, documentation, and the IPv6
// prefixes that embed an IPv4 address (NAT64, 6to4, Teredo) or are
// deprecated site-local or discard.
var special = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
		"64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "2001:db8::/32", "2002::/16", "fec0::/10",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// forbidden reports whether ip is not a public unicast address.
func forbidden(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.Zone() != "" {
		return true
	}
	for _, p := range special {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// parseEndpoint checks a subscription endpoint: an https URL of at most
// MaxEndpoint bytes, with a host, no user info and no fragment.
func parseEndpoint(endpoint string) (*url.URL, error) {
	if len(endpoint) > MaxEndpoint {
		return nil, fmt.Errorf("webpush: endpoint over %d bytes", MaxEndpoint)
	}
	for _, r := range endpoint {
		if r <= ' ' || r == 0x7f || !unicode.IsPrint(r) {
			return nil, errors.New("webpush: endpoint has a space or control character")
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, errors.New("webpush: endpoint is not a URL")
	}
	switch {
	case u.Scheme != "https":
		return nil, errors.New("webpush: endpoint is not https")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("webpush: endpoint has no host")
	case u.User != nil:
		return nil, errors.New("webpush: endpoint has user info")
	case u.Fragment != "" || strings.Contains(endpoint, "#"):
		return nil, errors.New("webpush: endpoint has a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("webpush: endpoint has a bad port")
		}
	}
	return u, nil
}

// ValidateSubscription checks a browser's push subscription as it is
// registered: endpoint an https URL of at most 2048 bytes; p256dh the
// base64url (padded or not) of an uncompressed P-256 point on the curve
// (65 bytes); auth the base64url of 16 bytes. It does not look at the
// endpoint's address (a stand-in's is 127.0.0.1): Send does.
func ValidateSubscription(endpoint, p256dh, auth string) error {
	if _, err := parseEndpoint(endpoint); err != nil {
		return err
	}
	k, err := b64(p256dh)
	if err != nil || len(k) != 65 || k[0] != 4 {
		return errors.New("webpush: p256dh is not base64url of a 65-byte uncompressed P-256 point")
	}
	if _, err := ecdh.P256().NewPublicKey(k); err != nil {
		return errors.New("webpush: p256dh is not a point on P-256")
	}
	a, err := b64(auth)
	if err != nil || len(a) != 16 {
		return errors.New("webpush: auth is not base64url of 16 bytes")
	}
	return nil
}

type payload struct {
	Title          string `json:"title"`
	Body           string `json:"body"`
	ConversationID string `json:"conversationId"`
	Seq            string `json:"seq"`
	Count          int    `json:"count"`
	Badge          *int   `json:"badge,omitempty"`
}

func encode(n *provider.Notification) ([]byte, error) {
	p := payload{Title: n.Title, Body: n.Body, ConversationID: n.ConversationID, Seq: strconv.FormatUint(n.Seq, 10), Count: n.Count}
	if n.Badge >= 0 {
		b := n.Badge
		p.Badge = &b
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(&p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Payload is the plaintext a browser's service worker gets for n (nil for
// a nil n): the JSON object
//
//	{"title":..,"body":..,"conversationId":..,"seq":"<decimal>","count":N,"badge":N}
//
// with "badge" left out when n.Badge is negative, the body (then the
// title) shortened, ending in "…", to keep it within MaxPayload bytes.
func Payload(n *provider.Notification) []byte {
	if n == nil {
		return nil
	}
	b, _ := pushhttp.Fit(n, MaxPayload, encode)
	return b
}

func checkTarget(t *provider.Target) (*url.URL, error) {
	if t.Kind != "" && t.Kind != provider.WebPush {
		return nil, fmt.Errorf("webpush: target of kind %q", t.Kind)
	}
	if err := ValidateSubscription(t.Token, t.P256dh, t.Auth); err != nil {
		return nil, err
	}
	return parseEndpoint(t.Token)
}

// Send makes one request for n to the subscription t and reports the push
// service's answer.
func (c *Client) Send(ctx context.Context, t provider.Target, n *provider.Notification) provider.Result {
	u, err := checkTarget(&t)
	if err != nil {
		return pushhttp.BadTarget(err)
	}
	if c.guard {
		if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && forbidden(ip) {
			return provider.Result{Reason: "forbidden address", Invalid: true, Err: ErrForbiddenAddress}
		}
	}
	if err := pushhttp.CheckNotification(n); err != nil {
		return pushhttp.BadNotification(err)
	}
	plain, err := pushhttp.Fit(n, MaxPayload, encode)
	if err != nil {
		return pushhttp.BadNotification(err)
	}
	// webpush-go pads the plaintext (with its delimiter) to RecordSize-102
	// bytes and puts RecordSize in the header as rs.
	padded := min((len(plain)+1+padTo-1)/padTo*padTo, MaxPayload+1)
	ttl := int64(n.TTL / time.Second)
	urgency := webpushgo.UrgencyNormal
	if n.High {
		urgency = webpushgo.UrgencyHigh
	}
	resp, err := webpushgo.SendNotificationWithContext(ctx, plain, &webpushgo.Subscription{
		Endpoint: canonical(u),
		Keys:     webpushgo.Keys{Auth: t.Auth, P256dh: t.P256dh},
	}, &webpushgo.Options{
		HTTPClient:      c.hc,
		RecordSize:      uint32(padded + 102),
		Subscriber:      c.subscriber,
		Topic:           n.CollapseID,
		TTL:             int(min(ttl, 1<<31-1)),
		Urgency:         urgency,
		VAPIDPublicKey:  c.pub,
		VAPIDPrivateKey: c.priv,
	})
	if err != nil {
		return sendFailure(err)
	}
	return result(resp)
}

// canonical is u with the host in lower case and no :443, so that
// webpush-go's VAPID audience (scheme://host of the URL) is the origin.
func canonical(u *url.URL) string {
	v := *u
	host := strings.ToLower(v.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := v.Port(); p != "" && p != "443" {
		host += ":" + p
	}
	v.Host = host
	return v.String()
}

func sendFailure(err error) provider.Result {
	if errors.Is(err, ErrForbiddenAddress) {
		return provider.Result{Reason: "forbidden address", Invalid: true, Err: err}
	}
	if errors.Is(err, errNoRedirect) {
		return provider.Result{Reason: "redirect", Err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return pushhttp.NoAnswer(err)
	}
	// Before any request: encrypting or signing failed.
	return provider.Result{Reason: "encryption", Err: fmt.Errorf("webpush: %w", err)}
}

func result(resp *http.Response) provider.Result {
	b := pushhttp.ReadBody(resp)
	s := resp.StatusCode
	r := provider.Result{Status: s}
	switch s {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		return r
	}
	r.Reason = reason(b)
	if r.Reason == "" {
		r.Reason = http.StatusText(s)
	}
	r.Err = fmt.Errorf("webpush: %d %s", s, r.Reason)
	switch {
	case s == http.StatusNotFound || s == http.StatusGone:
		r.Invalid = true
	case s == http.StatusTooManyRequests || s >= 500:
		r.Retry = true
		r.RetryAfter = pushhttp.RetryAfter(resp.Header, time.Now())
	}
	return r
}

// reason is the first 200 bytes of an answer's body as one line of
// printable text.
func reason(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	s := strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, string(b))
	return strings.Join(strings.Fields(s), " ")
}
