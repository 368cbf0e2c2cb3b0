// Package fcm sends notifications through Firebase Cloud Messaging's HTTP
// v1 API: POST {endpoint}/v1/projects/{project}/messages:send with an OAuth
// 2 access token got for the service account (JWT bearer grant).
//
// One Send is one messages:send request; the answer is reported in a
// provider.Result and never retried here (the dispatcher does that). The
// access token is cached and reused until a minute before it expires; a
// 401 answer drops it (the next Send gets a new one) and asks for a retry.
//
// When an answer means the target is gone (Result.Invalid):
//   - errorCode UNREGISTERED (in an error.details[] entry of @type
//     type.googleapis.com/google.firebase.fcm.v1.FcmError), whatever the
//     status;
//   - 404 with Google's error JSON (a 404 without it, say from a wrong
//     endpoint, is an ordinary failure: removing every target over a
//     misconfiguration would be worse than a failed send);
//   - INVALID_ARGUMENT (400) that names the registration token: a
//     google.rpc.BadRequest field violation on "message.token", or an
//     error message that mentions "message.token" or "registration token"
//     (FCM's is "The registration token is not a valid FCM registration
//     token"). Any other INVALID_ARGUMENT is about the message Parley
//     built: not retried, the target kept.
//
// 429 (QUOTA_EXCEEDED) and 5xx (INTERNAL, UNAVAILABLE) ask for a retry,
// with Retry-After when FCM gave one; 403 (SENDER_ID_MISMATCH,
// THIRD_PARTY_AUTH_ERROR, PERMISSION_DENIED) and other answers are
// failures not worth retrying.
package fcm

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"

	"github.com/parleyim/parley/internal/notify/internal/pushhttp"
	"github.com/parleyim/parley/internal/notify/provider"
)

// DefaultEndpoint is FCM's.
const DefaultEndpoint = "https://fcm.googleapis.com"

// Scope is the OAuth 2 scope for sending.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// MaxMessage bounds the request body (FCM's limit on a notification
// message's payload is 4096 bytes; the whole request is kept within it).
const MaxMessage = 4096

// maxTTL is FCM's longest android ttl (28 days).
const maxTTL = 28 * 24 * time.Hour

// earlyExpiry: a cached access token is replaced this long before it
// expires.
const earlyExpiry = time.Minute

// Config configures a Client.
type Config struct {
	// CredentialsJSON is the service account's JSON key (type
	// "service_account", project_id, private_key, client_email,
	// token_uri).
	CredentialsJSON []byte
	// Endpoint is FCM's origin; default DefaultEndpoint.
	Endpoint string
	// Client makes the requests, the token exchange included (tests: one
	// that trusts the stand-in). Nil: a client with timeouts.
	Client *http.Client
	// RootCAs, when set, are the certificate authorities the default client
	// trusts instead of the system's (a TLS-inspecting egress proxy, a
	// local stand-in). Ignored with Client.
	RootCAs *x509.CertPool
}

// Client is an FCM sender. Safe for concurrent use.
type Client struct {
	project string
	sendURL string
	hc      *http.Client
	conf    *jwt.Config
	tokCtx  context.Context // carries the token exchange's HTTP client
	now     func() time.Time

	mu   sync.Mutex
	ts   oauth2.TokenSource
	last atomic.Pointer[oauth2.Token] // the token ts last gave
}

type serviceAccount struct {
	Type        string `json:"type"`
	ProjectID   string `json:"project_id"`
	PrivateKey  string `json:"private_key"`
	ClientEmail string `json:"client_email"`
	TokenURI    string `json:"token_uri"`
}

// New checks cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	var sa serviceAccount
	if err := json.Unmarshal(cfg.CredentialsJSON, &sa); err != nil {
		return nil, fmt.Errorf("fcm: credentials are not a JSON key: %w", err)
	}
	if sa.Type != "service_account" {
		return nil, fmt.Errorf("fcm: credentials of type %q, want \"service_account\"", sa.Type)
	}
	if !validProject(sa.ProjectID) {
		return nil, fmt.Errorf("fcm: bad project_id %q", sa.ProjectID)
	}
	if sa.ClientEmail == "" {
		return nil, errors.New("fcm: credentials lack client_email")
	}
	if err := checkKey(sa.PrivateKey); err != nil {
		return nil, err
	}
	if sa.TokenURI != "" {
		u, err := url.Parse(sa.TokenURI)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("fcm: token_uri %q is not an https URL", sa.TokenURI)
		}
	}
	conf, err := google.JWTConfigFromJSON(cfg.CredentialsJSON, Scope)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	endpoint := strings.TrimSuffix(cfg.Endpoint, "/")
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	if u, err := url.Parse(endpoint); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("fcm: endpoint %q is not an https URL", cfg.Endpoint)
	}
	hc := cfg.Client
	if hc == nil {
		hc = defaultClient(cfg.RootCAs)
	}
	// The token exchange runs apart from any one Send (others wait on
	// it), so it gets a time limit of its own.
	th := *hc
	if th.Timeout == 0 || th.Timeout > 30*time.Second {
		th.Timeout = 30 * time.Second
	}
	c := &Client{
		project: sa.ProjectID,
		sendURL: endpoint + "/v1/projects/" + sa.ProjectID + "/messages:send",
		hc:      hc,
		conf:    conf,
		tokCtx:  context.WithValue(context.Background(), oauth2.HTTPClient, &th),
		now:     time.Now,
	}
	c.ts = c.newSource()
	return c, nil
}

func validProject(p string) bool {
	if p == "" || len(p) > 100 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

func checkKey(p string) error {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return errors.New("fcm: private_key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k1, err1 := x509.ParsePKCS1PrivateKey(block.Bytes); err1 == nil {
			k, err = k1, nil
		}
	}
	if err != nil {
		return fmt.Errorf("fcm: private_key: %w", err)
	}
	if _, ok := k.(*rsa.PrivateKey); !ok {
		return errors.New("fcm: private_key is not an RSA key")
	}
	return nil
}

func defaultClient(roots *x509.CertPool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	t.ForceAttemptHTTP2 = true
	t.MaxIdleConnsPerHost = 100
	t.ResponseHeaderTimeout = 30 * time.Second
	t.MaxResponseHeaderBytes = pushhttp.MaxHeaderBytes
	return &http.Client{Transport: t, Timeout: 60 * time.Second}
}

// fetcher gets a new access token on every call (the caching is
// ReuseTokenSourceWithExpiry's, around it).
type fetcher struct {
	conf *jwt.Config
	ctx  context.Context
}

func (f fetcher) Token() (*oauth2.Token, error) { return f.conf.TokenSource(f.ctx).Token() }

func (c *Client) newSource() oauth2.TokenSource {
	return oauth2.ReuseTokenSourceWithExpiry(nil, fetcher{c.conf, c.tokCtx}, earlyExpiry)
}

// Kind is provider.FCM.
func (c *Client) Kind() string { return provider.FCM }

// token returns the access token to use: the cached one while it is good,
// else a new one (one exchange at a time; waiting ends with ctx).
func (c *Client) token(ctx context.Context) (*oauth2.Token, error) {
	if t := c.last.Load(); t != nil && t.Expiry.After(c.now().Add(earlyExpiry)) {
		return t, nil
	}
	c.mu.Lock()
	ts := c.ts
	c.mu.Unlock()
	type got struct {
		t   *oauth2.Token
		err error
	}
	ch := make(chan got, 1)
	go func() {
		t, err := ts.Token()
		ch <- got{t, err}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			return nil, g.err
		}
		c.mu.Lock()
		if c.ts == ts {
			c.last.Store(g.t)
		}
		c.mu.Unlock()
		return g.t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drop forgets the access token access (FCM refused it), unless it has
// been replaced already.
func (c *Client) drop(access string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.last.Load(); t == nil || t.AccessToken == access {
		c.last.Store(nil)
		c.ts = c.newSource()
	}
}

func checkTarget(t *provider.Target) error {
	if t.Kind != "" && t.Kind != provider.FCM {
		return fmt.Errorf("fcm: target of kind %q", t.Kind)
	}
	if !pushhttp.Printable(t.Token, 4096) {
		return errors.New("fcm: registration token empty, over 4096 bytes, or with a space, control or non-ASCII character")
	}
	return nil
}

type request struct {
	Message message `json:"message"`
}

type message struct {
	Token        string       `json:"token"`
	Notification notification `json:"notification"`
	Data         data         `json:"data"`
	Android      android      `json:"android"`
	APNS         apnsConfig   `json:"apns"`
	Webpush      webpush      `json:"webpush"`
}

type notification struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

type data struct {
	ConversationID string `json:"conversation_id"`
	Seq            string `json:"seq"`
	Count          string `json:"count"`
}

type android struct {
	Priority     string               `json:"priority"`
	TTL          string               `json:"ttl"`
	CollapseKey  string               `json:"collapse_key,omitempty"`
	Notification *androidNotification `json:"notification,omitempty"`
}

type androidNotification struct {
	Tag               string `json:"tag,omitempty"`
	NotificationCount *int   `json:"notification_count,omitempty"`
}

type apnsConfig struct {
	Headers apnsHeaders  `json:"headers"`
	Payload *apnsPayload `json:"payload,omitempty"`
}

type apnsHeaders struct {
	Priority   string `json:"apns-priority"`
	Expiration string `json:"apns-expiration"`
	CollapseID string `json:"apns-collapse-id,omitempty"`
}

type apnsPayload struct {
	Aps aps `json:"aps"`
}

type aps struct {
	Badge    *int   `json:"badge,omitempty"`
	ThreadID string `json:"thread-id,omitempty"`
}

type webpush struct {
	Headers webpushHeaders `json:"headers"`
}

type webpushHeaders struct {
	TTL     string `json:"TTL"`
	Urgency string `json:"Urgency"`
	Topic   string `json:"Topic,omitempty"`
}

func (c *Client) encoder(token string) func(n *provider.Notification) ([]byte, error) {
	return func(n *provider.Notification) ([]byte, error) {
		ttl := min(n.TTL, maxTTL)
		secs := int64(ttl / time.Second)
		m := message{
			Token:        token,
			Notification: notification{Title: n.Title, Body: n.Body},
			Data: data{
				ConversationID: n.ConversationID,
				Seq:            strconv.FormatUint(n.Seq, 10),
				Count:          strconv.Itoa(n.Count),
			},
			Android: android{Priority: "NORMAL", TTL: strconv.FormatInt(secs, 10) + "s", CollapseKey: n.CollapseID},
			APNS:    apnsConfig{Headers: apnsHeaders{Priority: "5", Expiration: "0", CollapseID: n.CollapseID}},
			Webpush: webpush{Headers: webpushHeaders{TTL: strconv.FormatInt(secs, 10), Urgency: "normal", Topic: n.CollapseID}},
		}
		if n.High {
			m.Android.Priority, m.APNS.Headers.Priority, m.Webpush.Headers.Urgency = "HIGH", "10", "high"
		}
		if secs > 0 {
			m.APNS.Headers.Expiration = strconv.FormatInt(c.now().Add(ttl).Unix(), 10)
		}
		var badge *int
		if n.Badge >= 0 {
			b := n.Badge
			badge = &b
		}
		if n.ThreadID != "" || badge != nil {
			m.Android.Notification = &androidNotification{Tag: n.ThreadID, NotificationCount: badge}
			m.APNS.Payload = &apnsPayload{Aps: aps{Badge: badge, ThreadID: n.ThreadID}}
		}
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		if err := e.Encode(request{Message: m}); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	}
}

// Send makes one messages:send request for n to t and reports FCM's
// answer.
func (c *Client) Send(ctx context.Context, t provider.Target, n *provider.Notification) provider.Result {
	if err := checkTarget(&t); err != nil {
		return pushhttp.BadTarget(err)
	}
	if err := pushhttp.CheckNotification(n); err != nil {
		return pushhttp.BadNotification(err)
	}
	body, err := pushhttp.Fit(n, MaxMessage, c.encoder(t.Token))
	if err != nil {
		return pushhttp.BadNotification(err)
	}
	tok, err := c.token(ctx)
	if err != nil {
		return tokenFailure(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.sendURL, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Reason: "bad endpoint", Err: err}
	}
	req.Header["Authorization"] = []string{"Bearer " + tok.AccessToken}
	req.Header["Content-Type"] = []string{"application/json; charset=utf-8"}
	resp, err := c.hc.Do(req)
	if err != nil {
		return pushhttp.NoAnswer(err)
	}
	return c.result(resp, tok.AccessToken)
}

// tokenFailure is the result when no access token could be had: retried
// unless the token endpoint refused the service account (a 4xx other than
// 429: the credentials are wrong, and retrying will not mend them).
func tokenFailure(err error) provider.Result {
	r := provider.Result{Reason: "access token", Retry: true, Err: fmt.Errorf("fcm: access token: %w", err)}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		if s := re.Response.StatusCode; s >= 400 && s < 500 && s != http.StatusTooManyRequests {
			r.Retry = false
		}
	}
	return r
}

// googleError is Google's error JSON.
type googleError struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type            string `json:"@type"`
			ErrorCode       string `json:"errorCode"`
			FieldViolations []struct {
				Field       string `json:"field"`
				Description string `json:"description"`
			} `json:"fieldViolations"`
		} `json:"details"`
	} `json:"error"`
}

const (
	fcmErrorType   = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
	badRequestType = "type.googleapis.com/google.rpc.BadRequest"
)

func (c *Client) result(resp *http.Response, access string) provider.Result {
	b := pushhttp.ReadBody(resp)
	r := provider.Result{Status: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return r
	}
	var g googleError
	_ = json.Unmarshal(b, &g)
	var code, status, msg string
	tokenNamed := false
	if e := g.Error; e != nil {
		status, msg = e.Status, e.Message
		for _, d := range e.Details {
			switch d.Type {
			case fcmErrorType:
				if code == "" {
					code = d.ErrorCode
				}
			case badRequestType:
				for _, v := range d.FieldViolations {
					if v.Field == "message.token" {
						tokenNamed = true
					}
				}
			}
		}
		l := strings.ToLower(msg)
		if strings.Contains(l, "message.token") || strings.Contains(l, "registration token") {
			tokenNamed = true
		}
	}
	r.Reason = code
	if r.Reason == "" {
		r.Reason = status
	}
	if r.Reason == "" {
		r.Reason = http.StatusText(resp.StatusCode)
	}
	if msg != "" {
		r.Err = fmt.Errorf("fcm: %d %s: %s", resp.StatusCode, r.Reason, msg)
	} else {
		r.Err = fmt.Errorf("fcm: %d %s", resp.StatusCode, r.Reason)
	}
	switch {
	case code == "UNREGISTERED":
		r.Invalid = true
	case resp.StatusCode == http.StatusNotFound:
		r.Invalid = g.Error != nil
	case resp.StatusCode == http.StatusBadRequest && (code == "INVALID_ARGUMENT" || status == "INVALID_ARGUMENT"):
		r.Invalid = tokenNamed
	case resp.StatusCode == http.StatusUnauthorized:
		c.drop(access)
		r.Retry = true
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		r.Retry = true
		r.RetryAfter = pushhttp.RetryAfter(resp.Header, c.now())
	}
	return r
}
