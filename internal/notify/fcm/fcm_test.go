package fcm

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/notify/standin"
)

const (
	project = "parley-test"
	token   = "fGx3ZcR1TkeY0b9:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_4kN1cLqGs-XnC0"
)

func setup(t *testing.T) (*standin.FCM, *Client) { return setupWith(t, true) }

// setupWith: checkViolations false for a test that makes some on purpose
// (and checks them itself).
func setupWith(t *testing.T, checkViolations bool) (*standin.FCM, *Client) {
	t.Helper()
	s, err := standin.NewFCM(project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if !checkViolations {
			return
		}
		for _, v := range s.Violations() {
			t.Errorf("stand-in violation: %s", v)
		}
	})
	c, err := New(Config{CredentialsJSON: s.CredentialsJSON(), Endpoint: s.URL(), Client: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func target() provider.Target { return provider.Target{Kind: provider.FCM, Token: token} }

func note() *provider.Notification {
	return &provider.Notification{
		Title: "Alice", Body: "Lunch at <noon> & then?", Badge: 3,
		ConversationID: "c-42", Seq: 18446744073709551615, Count: 2,
		CollapseID: "c-42", ThreadID: "c-42", TTL: time.Hour, High: true,
	}
}

func TestSendOK(t *testing.T) {
	s, c := setup(t)
	before := time.Now()
	r := c.Send(context.Background(), target(), note())
	if !r.OK() || r.Status != 200 || r.Reason != "" || r.Invalid || r.Retry {
		t.Fatalf("result %+v", r)
	}
	var send []standin.Request
	for _, q := range s.Requests() {
		if q.Path != "/token" {
			send = append(send, q)
		}
	}
	if len(send) != 1 || s.TokenRequests() != 1 {
		t.Fatalf("%d sends, %d token requests", len(send), s.TokenRequests())
	}
	q := send[0]
	if q.Method != "POST" || q.Path != "/v1/projects/parley-test/messages:send" {
		t.Errorf("request line %s %s", q.Method, q.Path)
	}
	if a := q.Header.Get("Authorization"); !strings.HasPrefix(a, "Bearer ya29.") {
		t.Errorf("Authorization %q", a)
	}
	if ct := q.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(q.Body, &got); err != nil {
		t.Fatal(err)
	}
	exp := got["message"].(map[string]any)["apns"].(map[string]any)["headers"].(map[string]any)["apns-expiration"].(string)
	if e, _ := strconv.ParseInt(exp, 10, 64); e < before.Add(time.Hour).Unix() || e > time.Now().Add(time.Hour).Unix() {
		t.Errorf("apns-expiration %s, want now+1h", exp)
	}
	want := `{"message":{"android":{"collapse_key":"c-42","notification":{"notification_count":3,"tag":"c-42"},"priority":"HIGH","ttl":"3600s"},` +
		`"apns":{"headers":{"apns-collapse-id":"c-42","apns-expiration":"` + exp + `","apns-priority":"10"},"payload":{"aps":{"badge":3,"thread-id":"c-42"}}},` +
		`"data":{"conversation_id":"c-42","count":"2","seq":"18446744073709551615"},` +
		`"notification":{"body":"Lunch at <noon> & then?","title":"Alice"},"token":"` + token + `",` +
		`"webpush":{"headers":{"TTL":"3600","Topic":"c-42","Urgency":"high"}}}}`
	if g := canon(got); g != want {
		t.Errorf("body\n got %s\nwant %s", g, want)
	}
	ns := s.Notifications()
	if len(ns) != 1 || ns[0].Token != token || ns[0].Notification.Title != "Alice" || s.Count() != 1 {
		t.Errorf("recorded %+v, count %d", ns, s.Count())
	}
}

// canon is v as JSON with sorted keys and no HTML escaping.
func canon(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return strings.TrimSpace(b.String())
}

func TestSendNormalNoTTLNoBadge(t *testing.T) {
	s, c := setup(t)
	n := note()
	n.High, n.TTL, n.Badge, n.CollapseID, n.ThreadID = false, 0, -1, "", ""
	if r := c.Send(context.Background(), target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	var got map[string]any
	_ = json.Unmarshal(s.Requests()[1].Body, &got)
	want := `{"message":{"android":{"priority":"NORMAL","ttl":"0s"},"apns":{"headers":{"apns-expiration":"0","apns-priority":"5"}},` +
		`"data":{"conversation_id":"c-42","count":"2","seq":"18446744073709551615"},` +
		`"notification":{"body":"Lunch at <noon> & then?","title":"Alice"},"token":"` + token + `",` +
		`"webpush":{"headers":{"TTL":"0","Urgency":"normal"}}}}`
	if g := canon(got); g != want {
		t.Errorf("body\n got %s\nwant %s", g, want)
	}
}

func TestAnswers(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		status           int
		cue, after       string
		reason           string
		invalid, retry   bool
		minAfter, maxAft time.Duration
	}{
		{404, "UNREGISTERED", "", "UNREGISTERED", true, false, 0, 0},
		{400, "UNREGISTERED", "", "UNREGISTERED", true, false, 0, 0},
		{404, "", "", "NOT_FOUND", true, false, 0, 0},
		{400, "INVALID_ARGUMENT:message.token", "", "INVALID_ARGUMENT", true, false, 0, 0},
		{400, "INVALID_ARGUMENT:message.android.ttl", "", "INVALID_ARGUMENT", false, false, 0, 0},
		{400, "INVALID_ARGUMENT", "", "INVALID_ARGUMENT", false, false, 0, 0},
		{403, "SENDER_ID_MISMATCH", "", "SENDER_ID_MISMATCH", false, false, 0, 0},
		{401, "THIRD_PARTY_AUTH_ERROR", "", "THIRD_PARTY_AUTH_ERROR", false, true, 0, 0},
		{429, "QUOTA_EXCEEDED", "30", "QUOTA_EXCEEDED", false, true, 30 * time.Second, 30 * time.Second},
		{500, "INTERNAL", "", "INTERNAL", false, true, 0, 0},
		{503, "UNAVAILABLE", date, "UNAVAILABLE", false, true, 60 * time.Second, 91 * time.Second}, // less what the run took since date was made
	} {
		t.Run(strconv.Itoa(tc.status)+tc.cue, func(t *testing.T) {
			s, c := setup(t)
			s.Answer(token, tc.status, tc.cue, tc.after)
			r := c.Send(context.Background(), target(), note())
			if r.Status != tc.status || r.Reason != tc.reason || r.Invalid != tc.invalid || r.Retry != tc.retry || r.Err == nil || r.OK() {
				t.Errorf("result %+v", r)
			}
			if r.RetryAfter < tc.minAfter || r.RetryAfter > tc.maxAft {
				t.Errorf("RetryAfter %v, want %v..%v", r.RetryAfter, tc.minAfter, tc.maxAft)
			}
			if r := c.Send(context.Background(), target(), note()); !r.OK() {
				t.Errorf("after the cue: %+v", r)
			}
		})
	}
}

func TestNotFoundWithoutGoogleErrorKeepsTarget(t *testing.T) {
	s, _ := setupWith(t, false)
	// An endpoint where no FCM is (a wrong path): 404 without Google's JSON.
	c, err := New(Config{CredentialsJSON: s.CredentialsJSON(), Endpoint: s.URL() + "/nowhere", Client: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Send(context.Background(), target(), note())
	if r.Status != 404 || r.Invalid || r.Retry || r.Err == nil {
		t.Errorf("result %+v", r)
	}
	// (The stand-in counts the wrong path as a violation; that is the point.)
	if v := s.Violations(); len(v) != 1 {
		t.Fatalf("violations %v", v)
	}
}

func TestOneTokenExchange(t *testing.T) {
	s, c := setup(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if r := c.Send(context.Background(), target(), note()); !r.OK() {
					t.Errorf("result %+v", r)
				}
			}
		})
	}
	wg.Wait()
	if s.Count() != 200 || s.TokenRequests() != 1 {
		t.Errorf("%d sent with %d token exchanges; want 200 with 1", s.Count(), s.TokenRequests())
	}
}

func TestTokenRenewedNearExpiry(t *testing.T) {
	s, c := setup(t)
	c.Send(context.Background(), target(), note())
	c.now = func() time.Time { return time.Now().Add(58*time.Minute + 30*time.Second) }
	c.Send(context.Background(), target(), note())
	if s.TokenRequests() != 1 {
		t.Fatalf("%d exchanges before the last minute", s.TokenRequests())
	}
	// The cached token's Expiry is judged by oauth2 against the real clock,
	// so make it look near expiry there.
	c.last.Load().Expiry = time.Now().Add(30 * time.Second)
	c.now = time.Now
	if r := c.Send(context.Background(), target(), note()); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if s.TokenRequests() != 2 {
		t.Errorf("%d exchanges, want 2", s.TokenRequests())
	}
}

func TestUnauthorizedDropsToken(t *testing.T) {
	s, c := setup(t)
	c.Send(context.Background(), target(), note())
	s.RevokeTokens()
	r := c.Send(context.Background(), target(), note())
	if r.Status != 401 || !r.Retry || r.Invalid {
		t.Fatalf("result %+v", r)
	}
	if r := c.Send(context.Background(), target(), note()); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if s.TokenRequests() != 2 {
		t.Errorf("%d exchanges, want 2", s.TokenRequests())
	}
}

func TestContextCancel(t *testing.T) {
	s, c := setup(t)
	c.Send(context.Background(), target(), note())
	s.Stall(token, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := c.Send(ctx, target(), note())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v after its context ended", d)
	}
	if r.Err == nil || !r.Retry || r.Status != 0 || s.Count() != 1 {
		t.Errorf("result %+v, count %d", r, s.Count())
	}
}

func TestContextCancelDuringTokenExchange(t *testing.T) {
	s, c := setup(t)
	s.StallTokens(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := c.Send(ctx, target(), note())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v after its context ended", d)
	}
	if r.Err == nil || !r.Retry || r.Reason != "access token" {
		t.Errorf("result %+v", r)
	}
	s.StallTokens(0)
}

func TestTokenRefused(t *testing.T) {
	s, _ := setupWith(t, false)
	// A service account whose key the token endpoint does not know.
	other, err := standin.NewFCM(project)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var sa map[string]string
	_ = json.Unmarshal(other.CredentialsJSON(), &sa)
	sa["token_uri"] = s.TokenURL()
	b, _ := json.Marshal(sa)
	c, err := New(Config{CredentialsJSON: b, Endpoint: s.URL(), Client: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Send(context.Background(), target(), note())
	if r.Err == nil || r.Retry || r.Invalid || r.Reason != "access token" || s.Count() != 0 {
		t.Errorf("result %+v", r)
	}
	if v := s.Violations(); len(v) != 1 || !strings.Contains(v[0], "assertion") {
		t.Fatalf("violations %v", v)
	}
}

func TestBadTarget(t *testing.T) {
	s, c := setup(t)
	for name, tg := range map[string]provider.Target{
		"empty":      {Kind: provider.FCM},
		"space":      {Kind: provider.FCM, Token: "a b"},
		"newline":    {Kind: provider.FCM, Token: "ab\n"},
		"non-ASCII":  {Kind: provider.FCM, Token: "abé"},
		"too long":   {Kind: provider.FCM, Token: strings.Repeat("a", 4097)},
		"wrong kind": {Kind: provider.APNs, Token: token},
	} {
		r := c.Send(context.Background(), tg, note())
		if !r.Invalid || r.Reason != "bad target" || r.Err == nil || r.Retry || r.Status != 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

func TestLongBodyFitted(t *testing.T) {
	s, c := setup(t)
	n := note()
	n.Body = strings.Repeat("é€", 2000)
	if r := c.Send(context.Background(), target(), n); !r.OK() {
		t.Fatalf("result %+v", r)
	}
	q := s.Requests()[1]
	if len(q.Body) > 4096 || len(q.Body) < 4000 || !strings.HasSuffix(s.Notifications()[0].Notification.Body, "…") {
		t.Errorf("body of %d bytes", len(q.Body))
	}
}

func TestNewRefusesBadCredentials(t *testing.T) {
	s, _ := setup(t)
	var sa map[string]string
	_ = json.Unmarshal(s.CredentialsJSON(), &sa)
	with := func(k, v string) []byte {
		m := map[string]string{}
		for a, b := range sa {
			m[a] = b
		}
		m[k] = v
		b, _ := json.Marshal(m)
		return b
	}
	for name, js := range map[string][]byte{
		"not JSON":      []byte("{"),
		"user creds":    with("type", "authorized_user"),
		"no project":    with("project_id", ""),
		"bad project":   with("project_id", "a/b"),
		"no email":      with("client_email", ""),
		"bad key":       with("private_key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
		"not PEM":       with("private_key", "xyz"),
		"http tokenuri": with("token_uri", "http://127.0.0.1/token"),
	} {
		if _, err := New(Config{CredentialsJSON: js}); err == nil || !strings.HasPrefix(err.Error(), "fcm: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(Config{CredentialsJSON: s.CredentialsJSON(), Endpoint: "http://x"}); err == nil {
		t.Error("http endpoint accepted")
	}
	c, err := New(Config{CredentialsJSON: s.CredentialsJSON()})
	if err != nil || c.sendURL != "https://fcm.googleapis.com/v1/projects/parley-test/messages:send" || c.Kind() != "fcm" {
		t.Errorf("defaults: %v %v", err, c)
	}
}
