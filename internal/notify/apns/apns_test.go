package apns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/notify/standin"
)

const (
	keyID  = "ABC123DEFG"
	teamID = "DEF123GHIJ"
	topic  = "im.parley.app"
	token  = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"
)

type fixture struct {
	prod, sandbox *standin.APNs
	c             *Client
}

func setup(t *testing.T) *fixture {
	t.Helper()
	p8, pub, err := standin.NewP8()
	if err != nil {
		t.Fatal(err)
	}
	cfg := standin.APNsConfig{KeyID: keyID, TeamID: teamID, PublicKey: pub, Topic: topic}
	f := &fixture{prod: standin.NewAPNs(cfg), sandbox: standin.NewAPNs(cfg)}
	t.Cleanup(func() {
		f.prod.Close()
		f.sandbox.Close()
		for _, s := range []*standin.APNs{f.prod, f.sandbox} {
			for _, v := range s.Violations() {
				t.Errorf("stand-in violation: %s", v)
			}
		}
	})
	f.c, err = New(Config{KeyPEM: p8, KeyID: keyID, TeamID: teamID, Endpoint: f.prod.URL(), SandboxEndpoint: f.sandbox.URL(), Client: f.prod.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func target() provider.Target {
	return provider.Target{Kind: provider.APNs, Token: token, Topic: topic}
}

func note() *provider.Notification {
	return &provider.Notification{
		Title: "Alice", Body: "Lunch at <noon> & then?", Badge: 3,
		ConversationID: "c-42", Seq: 18446744073709551615, Count: 2,
		CollapseID: "c-42", ThreadID: "c-42", TTL: time.Hour, High: true,
	}
}

func TestSendOK(t *testing.T) {
	f := setup(t)
	before := time.Now()
	r := f.c.Send(context.Background(), target(), note())
	if !r.OK() || r.Status != 200 || r.Invalid || r.Retry || r.Reason != "" {
		t.Fatalf("result %+v", r)
	}
	reqs := f.prod.Requests()
	if len(reqs) != 1 || len(f.sandbox.Requests()) != 0 {
		t.Fatalf("%d requests to production, %d to the sandbox", len(reqs), len(f.sandbox.Requests()))
	}
	q := reqs[0]
	if q.Method != "POST" || q.Path != "/3/device/"+token || q.Proto != "HTTP/2.0" {
		t.Errorf("request line %s %s %s", q.Method, q.Path, q.Proto)
	}
	h := q.Header
	for name, want := range map[string]string{
		"apns-topic": topic, "apns-push-type": "alert", "apns-priority": "10", "apns-collapse-id": "c-42",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	exp, err := strconv.ParseInt(h.Get("apns-expiration"), 10, 64)
	if err != nil || exp < before.Add(time.Hour).Unix() || exp > time.Now().Add(time.Hour).Unix() {
		t.Errorf("apns-expiration %q, want now+1h", h.Get("apns-expiration"))
	}
	// The JWT: header and claims as Apple documents them.
	auth := h.Get("authorization")
	jwt, ok := strings.CutPrefix(auth, "bearer ")
	if !ok {
		t.Fatalf("authorization %q", auth)
	}
	parts := strings.Split(jwt, ".")
	var hdr, claims map[string]any
	for i, v := range []*map[string]any{&hdr, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, v) != nil {
			t.Fatalf("JWT part %d: %s", i, b)
		}
	}
	if hdr["alg"] != "ES256" || hdr["kid"] != keyID || claims["iss"] != teamID || len(claims) != 2 {
		t.Errorf("JWT header %v claims %v", hdr, claims)
	}
	if iat, _ := claims["iat"].(float64); int64(iat) < before.Unix()-1 || int64(iat) > time.Now().Unix() {
		t.Errorf("iat %v", claims["iat"])
	}
	// The payload, exactly.
	var raw map[string]any
	if err := json.Unmarshal(q.Body, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"aps": map[string]any{
			"alert": map[string]any{"title": "Alice", "body": "Lunch at <noon> & then?"},
			"badge": 3.0, "sound": "default", "thread-id": "c-42", "mutable-content": 1.0,
		},
		"conversation_id": "c-42", "seq": "18446744073709551615", "count": 2.0,
	}
	if g, w := mustJSON(raw), mustJSON(want); g != w {
		t.Errorf("payload\n got %s\nwant %s", g, w)
	}
	ns := f.prod.Notifications()
	if len(ns) != 1 || ns[0].Token != token || ns[0].Priority != 10 || ns[0].Payload.Aps.Alert.Title != "Alice" || f.prod.Count() != 1 {
		t.Errorf("recorded %+v, count %d", ns, f.prod.Count())
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSendLowPriorityNoTTLNoBadge(t *testing.T) {
	f := setup(t)
	n := note()
	n.High, n.TTL, n.Badge, n.CollapseID, n.ThreadID = false, 0, -1, "", ""
	if r := f.c.Send(context.Background(), target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	q := f.prod.Requests()[0]
	if q.Header.Get("apns-priority") != "5" || q.Header.Get("apns-expiration") != "0" || q.Header.Values("apns-collapse-id") != nil {
		t.Errorf("headers %v", q.Header)
	}
	var p map[string]map[string]any
	_ = json.Unmarshal(q.Body, &p)
	if _, ok := p["aps"]["badge"]; ok {
		t.Errorf("badge sent for Badge -1: %s", q.Body)
	}
	if _, ok := p["aps"]["thread-id"]; ok {
		t.Errorf("empty thread-id sent: %s", q.Body)
	}
}

func TestSandbox(t *testing.T) {
	f := setup(t)
	tg := target()
	tg.Sandbox = true
	if r := f.c.Send(context.Background(), tg, note()); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if f.sandbox.Count() != 1 || f.prod.Count() != 0 {
		t.Errorf("sandbox %d, production %d", f.sandbox.Count(), f.prod.Count())
	}
}

func TestDefaults(t *testing.T) {
	p8, _, _ := standin.NewP8()
	c, err := New(Config{KeyPEM: p8, KeyID: keyID, TeamID: teamID})
	if err != nil {
		t.Fatal(err)
	}
	if c.endpoint != "https://api.push.apple.com" || c.sandboxURL != "https://api.sandbox.push.apple.com" || c.Kind() != "apns" {
		t.Errorf("defaults %q %q %q", c.endpoint, c.sandboxURL, c.Kind())
	}
	tr := c.hc.Transport.(*http.Transport)
	if !tr.Protocols.HTTP2() || tr.Protocols.HTTP1() {
		t.Errorf("default client protocols %v, want HTTP/2 only", tr.Protocols)
	}
}

func TestAnswers(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		status            int
		reason, after     string
		invalid, retry    bool
		minAfter, maxAfte time.Duration
	}{
		{410, "Unregistered", "", true, false, 0, 0},
		{410, "ExpiredToken", "", true, false, 0, 0},
		{400, "BadDeviceToken", "", true, false, 0, 0},
		{400, "DeviceTokenNotForTopic", "", true, false, 0, 0},
		{400, "BadTopic", "", false, false, 0, 0},
		{400, "TopicDisallowed", "", false, false, 0, 0},
		{403, "InvalidProviderToken", "", false, false, 0, 0},
		{413, "PayloadTooLarge", "", false, false, 0, 0},
		{429, "TooManyRequests", "7", false, true, 7 * time.Second, 7 * time.Second},
		{500, "InternalServerError", "", false, true, 0, 0},
		{503, "ServiceUnavailable", date, false, true, 85 * time.Second, 91 * time.Second},
	} {
		t.Run(strconv.Itoa(tc.status)+tc.reason, func(t *testing.T) {
			f := setup(t)
			f.prod.Answer(token, tc.status, tc.reason, tc.after)
			r := f.c.Send(context.Background(), target(), note())
			if r.Status != tc.status || r.Reason != tc.reason || r.Invalid != tc.invalid || r.Retry != tc.retry || r.Err == nil || r.OK() {
				t.Errorf("result %+v", r)
			}
			if r.RetryAfter < tc.minAfter || r.RetryAfter > tc.maxAfte {
				t.Errorf("RetryAfter %v, want %v..%v", r.RetryAfter, tc.minAfter, tc.maxAfte)
			}
			// The cue is used up: the next one goes through.
			if r := f.c.Send(context.Background(), target(), note()); !r.OK() {
				t.Errorf("after the cue: %+v", r)
			}
		})
	}
}

func TestJWTReused(t *testing.T) {
	f := setup(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if r := f.c.Send(context.Background(), target(), note()); !r.OK() {
					t.Errorf("result %+v", r)
				}
			}
		})
	}
	wg.Wait()
	if f.prod.Count() != 200 || f.prod.JWTs() != 1 {
		t.Errorf("%d accepted with %d provider tokens; want 200 with 1", f.prod.Count(), f.prod.JWTs())
	}
}

func TestJWTRefreshedWhenOld(t *testing.T) {
	f := setup(t)
	start := time.Now().Add(-55 * time.Minute)
	f.c.now = func() time.Time { return start }
	f.c.Send(context.Background(), target(), note())
	f.c.now = func() time.Time { return start.Add(49 * time.Minute) }
	f.c.Send(context.Background(), target(), note())
	if f.prod.JWTs() != 1 {
		t.Fatalf("%d provider tokens at 49 min, want 1", f.prod.JWTs())
	}
	f.c.now = time.Now
	if r := f.c.Send(context.Background(), target(), note()); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if f.prod.JWTs() != 2 {
		t.Errorf("%d provider tokens at 55 min, want 2", f.prod.JWTs())
	}
}

func TestExpiredProviderToken(t *testing.T) {
	f := setup(t)
	// A token made 2 minutes ago that APNs calls expired is replaced.
	f.c.now = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	f.c.Send(context.Background(), target(), note())
	f.c.now = time.Now
	f.prod.Answer(token, 403, "ExpiredProviderToken", "")
	r := f.c.Send(context.Background(), target(), note())
	if !r.Retry || r.Invalid || r.Status != 403 || r.Reason != "ExpiredProviderToken" {
		t.Fatalf("result %+v", r)
	}
	if r := f.c.Send(context.Background(), target(), note()); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if f.prod.JWTs() != 2 {
		t.Errorf("%d provider tokens, want 2 (refreshed)", f.prod.JWTs())
	}
	// A token under a minute old is kept (a clock far off must not make a
	// token per request).
	f.prod.Answer(token, 403, "ExpiredProviderToken", "")
	f.c.Send(context.Background(), target(), note())
	f.c.Send(context.Background(), target(), note())
	if f.prod.JWTs() != 2 {
		t.Errorf("%d provider tokens, want still 2", f.prod.JWTs())
	}
}

func TestContextCancel(t *testing.T) {
	f := setup(t)
	f.prod.Stall(token, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := f.c.Send(ctx, target(), note())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v after its context ended", d)
	}
	if r.Err == nil || !r.Retry || r.Status != 0 || f.prod.Count() != 0 {
		t.Errorf("result %+v, count %d", r, f.prod.Count())
	}
}

func TestBadTarget(t *testing.T) {
	f := setup(t)
	for name, tg := range map[string]provider.Target{
		"empty token":   {Kind: provider.APNs, Topic: topic},
		"not hex":       {Kind: provider.APNs, Token: strings.Repeat("zz", 32), Topic: topic},
		"odd length":    {Kind: provider.APNs, Token: token[:63], Topic: topic},
		"path":          {Kind: provider.APNs, Token: "../../x/" + token, Topic: topic},
		"too long":      {Kind: provider.APNs, Token: strings.Repeat("ab", 101), Topic: topic},
		"no topic":      {Kind: provider.APNs, Token: token},
		"topic space":   {Kind: provider.APNs, Token: token, Topic: "a b"},
		"topic newline": {Kind: provider.APNs, Token: token, Topic: "a\nb"},
		"wrong kind":    {Kind: provider.FCM, Token: token, Topic: topic},
	} {
		r := f.c.Send(context.Background(), tg, note())
		if !r.Invalid || r.Reason != "bad target" || r.Err == nil || r.Retry || r.Status != 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if n := len(f.prod.Requests()); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

func TestBadNotification(t *testing.T) {
	f := setup(t)
	n := note()
	n.CollapseID = strings.Repeat("x", 33)
	for _, n := range []*provider.Notification{nil, n} {
		r := f.c.Send(context.Background(), target(), n)
		if r.Invalid || r.Retry || r.Err == nil || r.Reason != "bad notification" {
			t.Errorf("%+v", r)
		}
	}
	if n := len(f.prod.Requests()); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

func TestLongBodyFitted(t *testing.T) {
	f := setup(t)
	n := note()
	n.Body = strings.Repeat("é€", 2000) // 10,000 bytes
	if r := f.c.Send(context.Background(), target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	q := f.prod.Requests()[0]
	body := f.prod.Notifications()[0].Payload.Aps.Alert.Body
	if len(q.Body) > 4096 || len(q.Body) < 4000 || !strings.HasSuffix(body, "…") || !utf8.ValidString(body) {
		t.Errorf("payload of %d bytes, body ends %q", len(q.Body), body[len(body)-10:])
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	p8, _, _ := standin.NewP8()
	rk, _ := rsa.GenerateKey(rand.Reader, 1024)
	rder, _ := x509.MarshalPKCS8PrivateKey(rk)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKCS8PrivateKey(p384)
	for name, cfg := range map[string]Config{
		"no key":     {KeyID: keyID, TeamID: teamID},
		"not PEM":    {KeyPEM: []byte("MIGTAgEAMBMGByqGSM49"), KeyID: keyID, TeamID: teamID},
		"RSA":        {KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rder}), KeyID: keyID, TeamID: teamID},
		"P-384":      {KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der384}), KeyID: keyID, TeamID: teamID},
		"garbage":    {KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), KeyID: keyID, TeamID: teamID},
		"no key id":  {KeyPEM: p8, TeamID: teamID},
		"no team id": {KeyPEM: p8, KeyID: keyID},
		"bad key id": {KeyPEM: p8, KeyID: "a\"b", TeamID: teamID},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "apns: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
