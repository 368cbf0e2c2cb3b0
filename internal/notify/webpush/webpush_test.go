package webpush

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/notify/standin"
)

const subj = "mailto:ops@parley.im"

type fixture struct {
	s   *standin.WebPush
	c   *Client
	sub standin.Subscription
	pub string
	cfg Config
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pub, priv, err := GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	s, err := standin.NewWebPush(pub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		for _, v := range s.Violations() {
			t.Errorf("stand-in violation: %s", v)
		}
	})
	f := &fixture{s: s, pub: pub}
	f.cfg = Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: subj, Client: s.Client(), AllowPrivateEndpoints: true}
	if f.c, err = New(f.cfg); err != nil {
		t.Fatal(err)
	}
	if f.sub, err = s.NewSubscription(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) target() provider.Target {
	return provider.Target{Kind: provider.WebPush, Token: f.sub.Endpoint, P256dh: f.sub.P256dh, Auth: f.sub.Auth}
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
	r := f.c.Send(context.Background(), f.target(), note())
	if !r.OK() || r.Status != 201 || r.Reason != "" || r.Invalid || r.Retry {
		t.Fatalf("result %+v", r)
	}
	reqs := f.s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	q := reqs[0]
	if q.Method != "POST" || f.s.URL()+q.Path != f.sub.Endpoint {
		t.Errorf("request line %s %s", q.Method, q.Path)
	}
	for name, want := range map[string]string{"Content-Encoding": "aes128gcm", "TTL": "3600", "Urgency": "high", "Topic": "c-42"} {
		if got := q.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// VAPID: t is an ES256 JWT for the push service's origin, k our key.
	auth := q.Header.Get("Authorization")
	tPart, kPart, ok := strings.Cut(strings.TrimPrefix(auth, "vapid "), ",")
	if !strings.HasPrefix(auth, "vapid t=") || !ok || strings.TrimSpace(kPart) != "k="+f.pub {
		t.Fatalf("Authorization %q", auth)
	}
	parts := strings.Split(strings.TrimPrefix(tPart, "t="), ".")
	var hdr, claims map[string]any
	for i, v := range []*map[string]any{&hdr, &claims} {
		b, _ := base64.RawURLEncoding.DecodeString(parts[i])
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("JWT part %d: %s", i, b)
		}
	}
	exp, _ := claims["exp"].(float64)
	if hdr["alg"] != "ES256" || claims["aud"] != f.s.URL() || claims["sub"] != subj ||
		int64(exp) <= before.Unix() || int64(exp) > time.Now().Add(24*time.Hour).Unix() {
		t.Errorf("JWT header %v claims %v", hdr, claims)
	}
	// The body: decrypted by the stand-in, padded to a multiple of 128.
	ms := f.s.Notifications()
	if len(ms) != 1 || ms[0].TTL != 3600 || ms[0].Urgency != "high" || ms[0].Topic != "c-42" || f.s.Count() != 1 {
		t.Fatalf("recorded %+v", ms)
	}
	want := `{"title":"Alice","body":"Lunch at <noon> & then?","conversationId":"c-42","seq":"18446744073709551615","count":2,"badge":3}`
	if string(ms[0].Plaintext) != want || string(Payload(note())) != want {
		t.Errorf("plaintext\n got %s\nwant %s", ms[0].Plaintext, want)
	}
	if l := len(q.Body) - 86 - 16; l%128 != 0 || l < len(want)+1 {
		t.Errorf("body of %d bytes: plaintext padded to %d", len(q.Body), l)
	}
}

func TestSendNormalNoTTLNoBadge(t *testing.T) {
	f := setup(t)
	n := note()
	n.High, n.TTL, n.Badge, n.CollapseID = false, 0, -1, ""
	if r := f.c.Send(context.Background(), f.target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	q := f.s.Requests()[0]
	if q.Header.Get("TTL") != "0" || q.Header.Get("Urgency") != "normal" || q.Header.Values("Topic") != nil {
		t.Errorf("headers %v", q.Header)
	}
	if p := string(f.s.Notifications()[0].Plaintext); strings.Contains(p, "badge") {
		t.Errorf("badge sent for Badge -1: %s", p)
	}
}

func TestAnswers(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		status           int
		body, after      string
		reason           string
		invalid, retry   bool
		minAfter, maxAft time.Duration
	}{
		{404, "", "", "Not Found", true, false, 0, 0},
		{410, "push subscription has unsubscribed or expired.", "", "push subscription has unsubscribed or expired.", true, false, 0, 0},
		{413, "", "", "Request Entity Too Large", false, false, 0, 0},
		{400, "bad\x00 \xff request\n\n" + strings.Repeat("x", 300), "", "bad request " + strings.Repeat("x", 184), false, false, 0, 0},
		{401, "VAPID\tunauthorized", "", "VAPID unauthorized", false, false, 0, 0},
		{403, "forbidden", "", "forbidden", false, false, 0, 0},
		{429, "slow down", "12", "slow down", false, true, 12 * time.Second, 12 * time.Second},
		{500, "oops", "", "oops", false, true, 0, 0},
		{503, "later", date, "later", false, true, 85 * time.Second, 91 * time.Second},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			f := setup(t)
			f.s.Answer(f.sub.Endpoint, tc.status, tc.body, tc.after)
			r := f.c.Send(context.Background(), f.target(), note())
			if r.Status != tc.status || r.Reason != tc.reason || r.Invalid != tc.invalid || r.Retry != tc.retry || r.Err == nil || r.OK() {
				t.Errorf("result %+v", r)
			}
			if r.RetryAfter < tc.minAfter || r.RetryAfter > tc.maxAft {
				t.Errorf("RetryAfter %v, want %v..%v", r.RetryAfter, tc.minAfter, tc.maxAft)
			}
			if r := f.c.Send(context.Background(), f.target(), note()); !r.OK() {
				t.Errorf("after the cue: %+v", r)
			}
		})
	}
}

func TestUnsubscribed(t *testing.T) {
	f := setup(t)
	f.s.Unsubscribe(f.sub.Endpoint)
	if r := f.c.Send(context.Background(), f.target(), note()); r.Status != 410 || !r.Invalid {
		t.Errorf("result %+v", r)
	}
}

func TestContextCancel(t *testing.T) {
	f := setup(t)
	f.s.Stall(f.sub.Endpoint, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := f.c.Send(ctx, f.target(), note())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v after its context ended", d)
	}
	if r.Err == nil || !r.Retry || r.Status != 0 || f.s.Count() != 0 {
		t.Errorf("result %+v", r)
	}
}

func TestBadTarget(t *testing.T) {
	f := setup(t)
	good := f.target()
	with := func(change func(*provider.Target)) provider.Target {
		t := good
		change(&t)
		return t
	}
	for name, tg := range map[string]provider.Target{
		"http":          with(func(t *provider.Target) { t.Token = strings.Replace(t.Token, "https:", "http:", 1) }),
		"not a URL":     with(func(t *provider.Target) { t.Token = "push" }),
		"too long":      with(func(t *provider.Target) { t.Token += "/" + strings.Repeat("a", 2048) }),
		"user info":     with(func(t *provider.Target) { t.Token = strings.Replace(t.Token, "https://", "https://u:p@", 1) }),
		"space":         with(func(t *provider.Target) { t.Token += " x" }),
		"p256dh short":  with(func(t *provider.Target) { t.P256dh = t.P256dh[:40] }),
		"p256dh junk":   with(func(t *provider.Target) { t.P256dh = "!!" + t.P256dh[2:] }),
		"off the curve": with(func(t *provider.Target) { t.P256dh = offCurve() }),
		"auth short":    with(func(t *provider.Target) { t.Auth = t.Auth[:10] }),
		"no auth":       with(func(t *provider.Target) { t.Auth = "" }),
		"wrong kind":    with(func(t *provider.Target) { t.Kind = provider.APNs }),
	} {
		r := f.c.Send(context.Background(), tg, note())
		if !r.Invalid || r.Reason != "bad target" || r.Err == nil || r.Retry || r.Status != 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if n := len(f.s.Requests()); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

// offCurve is a 65-byte uncompressed "point" not on P-256.
func offCurve() string {
	b := make([]byte, 65)
	b[0] = 4
	b[64] = 1
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestValidateSubscription(t *testing.T) {
	f := setup(t)
	s := f.sub
	pad := func(v string) string { return v + strings.Repeat("=", (4-len(v)%4)%4) }
	if err := ValidateSubscription(s.Endpoint, s.P256dh, s.Auth); err != nil {
		t.Errorf("unpadded: %v", err)
	}
	if err := ValidateSubscription(s.Endpoint, pad(s.P256dh), pad(s.Auth)); err != nil {
		t.Errorf("padded: %v", err)
	}
	for name, args := range map[string][3]string{
		"http":        {"http://push.example/x", s.P256dh, s.Auth},
		"no host":     {"https:///x", s.P256dh, s.Auth},
		"fragment":    {s.Endpoint + "#f", s.P256dh, s.Auth},
		"2049 bytes":  {"https://push.example/" + strings.Repeat("a", 2049-21), s.P256dh, s.Auth},
		"std base64":  {s.Endpoint, strings.NewReplacer("-", "+", "_", "/").Replace(s.P256dh) + "+/", s.Auth},
		"compressed":  {s.Endpoint, base64.RawURLEncoding.EncodeToString(append([]byte{2}, make([]byte, 32)...)), s.Auth},
		"off curve":   {s.Endpoint, offCurve(), s.Auth},
		"auth 17":     {s.Endpoint, s.P256dh, base64.RawURLEncoding.EncodeToString(make([]byte, 17))},
		"empty":       {"", "", ""},
		"control":     {"https://push.example/\x7f", s.P256dh, s.Auth},
		"bad port":    {"https://push.example:99999/x", s.P256dh, s.Auth},
		"auth padded": {s.Endpoint, s.P256dh, s.Auth + "==="},
	} {
		if err := ValidateSubscription(args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := ValidateSubscription("https://push.example/"+strings.Repeat("a", 2048-21), s.P256dh, s.Auth); err != nil {
		t.Errorf("2048 bytes: %v", err)
	}
}

func TestGuardRefusesLocalAndPrivate(t *testing.T) {
	f := setup(t)
	f.cfg.AllowPrivateEndpoints = false
	c, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	port := f.s.URL()[strings.LastIndex(f.s.URL(), ":"):]
	path := f.sub.Endpoint[len(f.s.URL()):]
	for _, endpoint := range []string{
		f.sub.Endpoint,                               // https://127.0.0.1:port
		"https://localhost" + port + path,            // a name: refused at dial time
		"https://[::ffff:127.0.0.1]" + port + path,   // IPv4-mapped
		"https://10.1.2.3/push/x",                    // private
		"https://192.168.0.1/push/x",                 // private
		"https://169.254.169.254/latest/meta-data/x", // link-local (cloud metadata)
		"https://[::1]" + port + path,
		"https://0.0.0.0" + port + path,
		"https://[fd00::1]/push/x",
		"https://224.0.0.1/push/x",
	} {
		tg := f.target()
		tg.Token = endpoint
		r := c.Send(context.Background(), tg, note())
		if !r.Invalid || r.Reason != "forbidden address" || !errors.Is(r.Err, ErrForbiddenAddress) || r.Status != 0 {
			t.Errorf("%s: %+v", endpoint, r)
		}
	}
	if n := len(f.s.Requests()); n != 0 {
		t.Errorf("the stand-in got %d requests", n)
	}
	// The same client with the guard off reaches the stand-in.
	if r := f.c.Send(context.Background(), f.target(), note()); !r.OK() {
		t.Errorf("guard off: %+v", r)
	}
}

func TestForbidden(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "10.0.0.1": true, "172.16.5.4": true, "192.168.1.1": true,
		"169.254.169.254": true, "0.0.0.0": true, "0.1.2.3": true, "100.64.0.1": true, "224.0.0.251": true,
		"255.255.255.255": true, "198.18.0.1": true, "::1": true, "::": true, "fe80::1": true, "fd12::1": true,
		"ff02::1": true, "::ffff:10.0.0.1": true, "64:ff9b::a00:1": true, "2002:7f00:1::": true, "fec0::1": true,
		"8.8.8.8": false, "142.250.74.42": false, "2a00:1450:4001:82b::200a": false, "::ffff:8.8.8.8": false,
	} {
		if got := forbidden(netip.MustParseAddr(s)); got != want {
			t.Errorf("%s: forbidden %v", s, got)
		}
	}
}

func TestNoRedirect(t *testing.T) {
	f := setup(t)
	hits := 0
	red := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Redirect(w, r, f.sub.Endpoint, http.StatusTemporaryRedirect)
	}))
	defer red.Close()
	c, err := New(Config{VAPIDPublicKey: f.cfg.VAPIDPublicKey, VAPIDPrivateKey: f.cfg.VAPIDPrivateKey, Subject: subj, Client: red.Client(), AllowPrivateEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	tg := f.target()
	tg.Token = red.URL + "/push/x"
	r := c.Send(context.Background(), tg, note())
	if r.OK() || r.Err == nil || r.Invalid || r.Retry || hits != 1 || len(f.s.Requests()) != 0 {
		t.Errorf("result %+v, %d hits, %d requests at the target", r, hits, len(f.s.Requests()))
	}
}

func TestNewChecks(t *testing.T) {
	pub, priv, _ := GenerateVAPIDKeys()
	pub2, _, _ := GenerateVAPIDKeys()
	pad := func(v string) string { return v + strings.Repeat("=", (4-len(v)%4)%4) }
	for name, cfg := range map[string]Config{
		"ok":          {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "mailto:ops@parley.im"},
		"https sub":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "https://parley.im/contact"},
		"padded keys": {VAPIDPublicKey: pad(pub), VAPIDPrivateKey: pad(priv), Subject: subj},
	} {
		if _, err := New(cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, cfg := range map[string]Config{
		"no keys":        {Subject: subj},
		"swapped":        {VAPIDPublicKey: priv, VAPIDPrivateKey: pub, Subject: subj},
		"other public":   {VAPIDPublicKey: pub2, VAPIDPrivateKey: priv, Subject: subj},
		"zero private":   {VAPIDPublicKey: pub, VAPIDPrivateKey: base64.RawURLEncoding.EncodeToString(make([]byte, 32)), Subject: subj},
		"no subject":     {VAPIDPublicKey: pub, VAPIDPrivateKey: priv},
		"bare address":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "ops@parley.im"},
		"http subject":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "http://parley.im"},
		"empty mailto":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "mailto:"},
		"named mailto":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: "mailto:Ops <ops@parley.im>"},
		"odd transport":  {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: subj, Client: &http.Client{Transport: roundTripper{}}},
		"private in pub": {VAPIDPublicKey: "", VAPIDPrivateKey: priv, Subject: subj},
	} {
		if _, err := New(cfg); err == nil || !strings.HasPrefix(err.Error(), "webpush: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	c, _ := New(Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: subj})
	if c.Kind() != "webpush" || !c.guard {
		t.Errorf("defaults: kind %q guard %v", c.Kind(), c.guard)
	}
}

type roundTripper struct{}

func (roundTripper) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("no") }

func TestPayload(t *testing.T) {
	if Payload(nil) != nil {
		t.Error("Payload(nil) not nil")
	}
	n := note()
	n.Body = strings.Repeat("€", 3000)
	p := Payload(n)
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil || len(p) > MaxPayload || len(p) < MaxPayload-8 || !strings.HasSuffix(m["body"].(string), "…") {
		t.Errorf("%d bytes, %v", len(p), err)
	}
	f := setup(t)
	if r := f.c.Send(context.Background(), f.target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if got := f.s.Notifications()[0].Plaintext; string(got) != string(p) {
		t.Errorf("sent plaintext differs from Payload")
	}
	if l := len(f.s.Requests()[0].Body); l > 4096 {
		t.Errorf("body of %d bytes", l)
	}
}
