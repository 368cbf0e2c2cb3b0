// Package apns sends notifications through the Apple Push Notification
// service: HTTP/2 with token-based (JWT) provider authentication.
//
// One Send is one POST /3/device/{token}; the answer is reported in a
// provider.Result and never retried here (the dispatcher does that).
//
// The provider token (an ES256 JWT signed with the .p8 key, kid = key id,
// iss = team id, iat) is made once and reused until it is 50 minutes old:
// Apple refuses tokens older than an hour and answers
// TooManyProviderTokenUpdates to a provider that makes new ones more often
// than every 20 minutes. An ExpiredProviderToken answer drops the token in
// use (so the next Send makes a new one) unless it is under a minute old
// (a clock far off would otherwise make a token per request).
package apns

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyim/parley/internal/notify/internal/pushhttp"
	"github.com/parleyim/parley/internal/notify/provider"
)

// Apple's hosts.
const (
	ProductionEndpoint = "https://api.push.apple.com"
	SandboxEndpoint    = "https://api.sandbox.push.apple.com"
)

// MaxPayload is APNs' limit on a notification's payload, in bytes.
const MaxPayload = 4096

const (
	// tokenRefresh is the age at which the provider token is replaced.
	tokenRefresh = 50 * time.Minute
	// expiredFloor: an ExpiredProviderToken answer does not replace a
	// token younger than this.
	expiredFloor = time.Minute
)

// Config configures a Client.
type Config struct {
	// KeyPEM is the .p8 file: a PKCS#8 PEM ECDSA P-256 private key.
	KeyPEM []byte
	// KeyID is the key's id (the JWT's kid), TeamID the developer team
	// (the JWT's iss).
	KeyID, TeamID string
	// Endpoint and SandboxEndpoint are the hosts (scheme and authority);
	// the defaults are Apple's. Target.Sandbox picks the second.
	Endpoint, SandboxEndpoint string
	// Client makes the requests (tests: one that trusts the stand-in).
	// Nil: an HTTP/2-only client with timeouts.
	Client *http.Client
	// RootCAs, when set, are the certificate authorities the default client
	// trusts instead of the system's (a TLS-inspecting egress proxy, a
	// local stand-in). Ignored with Client.
	RootCAs *x509.CertPool
}

// Client is an APNs provider. Safe for concurrent use.
type Client struct {
	key                  *ecdsa.PrivateKey
	keyID, teamID        string
	endpoint, sandboxURL string
	hc                   *http.Client

	mu     sync.Mutex
	bearer string    // the provider token in use; "" none yet
	iat    time.Time // when it was made
	now    func() time.Time
}

// New checks cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	key, err := parseKey(cfg.KeyPEM)
	if err != nil {
		return nil, err
	}
	if !validID(cfg.KeyID) {
		return nil, errors.New("apns: key id must be 1 to 64 letters and digits")
	}
	if !validID(cfg.TeamID) {
		return nil, errors.New("apns: team id must be 1 to 64 letters and digits")
	}
	c := &Client{
		key:        key,
		keyID:      cfg.KeyID,
		teamID:     cfg.TeamID,
		endpoint:   cfg.Endpoint,
		sandboxURL: cfg.SandboxEndpoint,
		hc:         cfg.Client,
		now:        time.Now,
	}
	if c.endpoint == "" {
		c.endpoint = ProductionEndpoint
	}
	if c.sandboxURL == "" {
		c.sandboxURL = SandboxEndpoint
	}
	if c.hc == nil {
		c.hc = defaultClient(cfg.RootCAs)
	}
	// Sign once now, so a key that cannot sign fails here, not per send.
	if _, err := c.sign(c.now()); err != nil {
		return nil, fmt.Errorf("apns: signing with the key: %w", err)
	}
	return c, nil
}

func parseKey(p8 []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(p8)
	if block == nil {
		return nil, errors.New("apns: the key is not PEM (want the .p8 file's contents)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("apns: the key is not a PKCS#8 private key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("apns: the key is not an ECDSA P-256 key")
	}
	return ek, nil
}

func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func defaultClient(roots *x509.CertPool) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP2(true) // APNs speaks HTTP/2 only
	t := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		IdleConnTimeout:        10 * time.Minute,
		MaxResponseHeaderBytes: pushhttp.MaxHeaderBytes,
		ForceAttemptHTTP2:      true,
		Protocols:              p,
		HTTP2:                  &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 15 * time.Second},
	}
	return &http.Client{Transport: t, Timeout: 60 * time.Second}
}

// Kind is provider.APNs.
func (c *Client) Kind() string { return provider.APNs }

// token returns the provider token to use, making one if there is none or
// it is due for replacement.
func (c *Client) token() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.bearer != "" && now.Sub(c.iat) < tokenRefresh && !now.Before(c.iat) {
		return c.bearer, nil
	}
	b, err := c.sign(now)
	if err != nil {
		return "", err
	}
	c.bearer, c.iat = b, now
	return b, nil
}

func (c *Client) sign(now time.Time) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": c.teamID, "iat": now.Unix()})
	t.Header["kid"] = c.keyID
	return t.SignedString(c.key)
}

// expired handles an ExpiredProviderToken answer to a request that
// carried bearer.
func (c *Client) expired(bearer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bearer == bearer && c.now().Sub(c.iat) >= expiredFloor {
		c.bearer = ""
	}
}

// checkTarget reports what is wrong with t, if anything.
func checkTarget(t *provider.Target) error {
	if t.Kind != "" && t.Kind != provider.APNs {
		return fmt.Errorf("apns: target of kind %q", t.Kind)
	}
	if n := len(t.Token); n < 16 || n > 200 || n%2 != 0 {
		return errors.New("apns: device token is not 16 to 200 hex digits")
	}
	if _, err := hex.DecodeString(t.Token); err != nil {
		return errors.New("apns: device token is not hex")
	}
	if !pushhttp.Printable(t.Topic, 255) {
		return errors.New("apns: topic (bundle id) missing, too long, or with a space, control or non-ASCII character")
	}
	return nil
}

type alert struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

type aps struct {
	Alert          alert  `json:"alert"`
	Badge          *int   `json:"badge,omitempty"`
	Sound          string `json:"sound"`
	ThreadID       string `json:"thread-id,omitempty"`
	MutableContent int    `json:"mutable-content"`
}

type payload struct {
	Aps            aps    `json:"aps"`
	ConversationID string `json:"conversation_id"`
	Seq            string `json:"seq"`
	Count          int    `json:"count"`
}

func encode(n *provider.Notification) ([]byte, error) {
	p := payload{
		Aps: aps{
			Alert:          alert{Title: n.Title, Body: n.Body},
			Sound:          "default",
			ThreadID:       n.ThreadID,
			MutableContent: 1,
		},
		ConversationID: n.ConversationID,
		Seq:            strconv.FormatUint(n.Seq, 10),
		Count:          n.Count,
	}
	if n.Badge >= 0 {
		b := n.Badge
		p.Aps.Badge = &b
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(&p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Send makes one request for n to t and reports APNs' answer.
func (c *Client) Send(ctx context.Context, t provider.Target, n *provider.Notification) provider.Result {
	if err := checkTarget(&t); err != nil {
		return pushhttp.BadTarget(err)
	}
	if err := pushhttp.CheckNotification(n); err != nil {
		return pushhttp.BadNotification(err)
	}
	body, err := pushhttp.Fit(n, MaxPayload, encode)
	if err != nil {
		return pushhttp.BadNotification(err)
	}
	bearer, err := c.token()
	if err != nil {
		return provider.Result{Reason: "provider token", Err: err}
	}
	host := c.endpoint
	if t.Sandbox {
		host = c.sandboxURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, host+"/3/device/"+t.Token, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Reason: "bad endpoint", Err: err}
	}
	h := req.Header
	h["Authorization"] = []string{"bearer " + bearer}
	h["Content-Type"] = []string{"application/json"}
	h["Apns-Topic"] = []string{t.Topic}
	h["Apns-Push-Type"] = []string{"alert"}
	if n.High {
		h["Apns-Priority"] = []string{"10"}
	} else {
		h["Apns-Priority"] = []string{"5"}
	}
	exp := "0"
	if n.TTL > 0 {
		exp = strconv.FormatInt(c.now().Add(n.TTL).Unix(), 10)
	}
	h["Apns-Expiration"] = []string{exp}
	if n.CollapseID != "" {
		h["Apns-Collapse-Id"] = []string{n.CollapseID}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return pushhttp.NoAnswer(err)
	}
	return c.result(resp, bearer)
}

// result reads resp and says what it means.
func (c *Client) result(resp *http.Response, bearer string) provider.Result {
	b := pushhttp.ReadBody(resp)
	r := provider.Result{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		return r
	}
	var e struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &e)
	r.Reason = e.Reason
	if r.Reason == "" {
		r.Reason = http.StatusText(resp.StatusCode)
	}
	r.Err = fmt.Errorf("apns: %d %s", resp.StatusCode, r.Reason)
	switch {
	case resp.StatusCode == http.StatusGone:
		r.Invalid = true
	case resp.StatusCode == http.StatusBadRequest && (e.Reason == "BadDeviceToken" || e.Reason == "DeviceTokenNotForTopic"):
		r.Invalid = true
	case resp.StatusCode == http.StatusForbidden && e.Reason == "ExpiredProviderToken":
		c.expired(bearer)
		r.Retry = true
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		r.Retry = true
		r.RetryAfter = pushhttp.RetryAfter(resp.Header, c.now())
	}
	return r
}
