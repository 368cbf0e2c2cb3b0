package standin

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// RFC 8291 Appendix A: the example message, and the user agent's keys.
func TestDecryptRFC8291Example(t *testing.T) {
	d := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	body := d("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
	ua, err := ecdh.P256().NewPrivateKey(d("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()); got != "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4" {
		t.Fatalf("ua_public %s", got)
	}
	auth := d("BTBZMqHH6r4Tts7J_aSIgg")
	pt, err := Decrypt(body, ua, auth)
	if err != nil {
		t.Fatal(err)
	}
	if string(pt) != "When I grow up, I want to be a watermelon" {
		t.Errorf("plaintext %q", pt)
	}
	// Any changed byte, or another secret, fails.
	for _, i := range []int{0, 20, 30, 90, len(body) - 1} { // salt, idlen, key, ciphertext, tag (rs is not authenticated)
		b := append([]byte(nil), body...)
		b[i] ^= 1
		if _, err := Decrypt(b, ua, auth); err == nil {
			t.Errorf("byte %d changed: decrypted", i)
		}
	}
	if _, err := Decrypt(body, ua, make([]byte, 16)); err == nil {
		t.Error("decrypted with another auth secret")
	}
	for _, n := range []int{0, 20, 21, 86, 87} {
		if _, err := Decrypt(body[:n], ua, auth); err == nil {
			t.Errorf("decrypted %d bytes", n)
		}
	}
}

// raw sends one request to a stand-in.
func raw(t *testing.T, c *http.Client, method, u string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func es256(t *testing.T, k *ecdsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	hj, _ := json.Marshal(header)
	cj, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(hj) + "." + base64.RawURLEncoding.EncodeToString(cj)
	h := sha256.Sum256([]byte(in))
	r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

const apnsToken = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"

func TestAPNsViolationsAndAnswers(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s := NewAPNs(APNsConfig{KeyID: "K", TeamID: "T", PublicKey: &k.PublicKey, Topic: "im.parley"})
	defer s.Close()
	c := s.Client()
	jwt := es256(t, k, map[string]any{"alg": "ES256", "kid": "K"}, map[string]any{"iss": "T", "iat": time.Now().Unix()})
	good := map[string]string{
		"authorization": "bearer " + jwt, "apns-topic": "im.parley", "apns-push-type": "alert",
		"apns-priority": "10", "apns-expiration": "0",
	}
	payload := `{"aps":{"alert":{"title":"t","body":"b"},"sound":"default","mutable-content":1},"conversation_id":"c","seq":"1","count":1}`
	u := s.URL() + "/3/device/" + apnsToken
	if r := raw(t, c, "POST", u, good, payload); r.StatusCode != 200 || r.Header.Get("apns-id") == "" || r.ProtoMajor != 2 {
		t.Fatalf("good request: %d %v", r.StatusCode, s.Violations())
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, tc := range map[string]struct {
		h       map[string]string
		body    string
		status  int
		reason  string
		path    string
		wantVio string
	}{
		"no auth":      {with("authorization", ""), payload, 403, "MissingProviderToken", "", "authorization"},
		"other key":    {with("authorization", "bearer "+es256(t, other, map[string]any{"alg": "ES256", "kid": "K"}, map[string]any{"iss": "T", "iat": time.Now().Unix()})), payload, 403, "InvalidProviderToken", "", "signature"},
		"old token":    {with("authorization", "bearer "+es256(t, k, map[string]any{"alg": "ES256", "kid": "K"}, map[string]any{"iss": "T", "iat": time.Now().Add(-2 * time.Hour).Unix()})), payload, 403, "ExpiredProviderToken", "", "hour"},
		"wrong kid":    {with("authorization", "bearer "+es256(t, k, map[string]any{"alg": "ES256", "kid": "X"}, map[string]any{"iss": "T", "iat": time.Now().Unix()})), payload, 403, "InvalidProviderToken", "", "kid"},
		"topic":        {with("apns-topic", "other"), payload, 400, "TopicDisallowed", "", "apns-topic"},
		"no topic":     {with("apns-topic", ""), payload, 400, "MissingTopic", "", "apns-topic"},
		"push type":    {with("apns-push-type", "background"), payload, 400, "InvalidPushType", "", "push-type"},
		"priority":     {with("apns-priority", "7"), payload, 400, "BadPriority", "", "priority"},
		"expiration":   {with("apns-expiration", "soon"), payload, 400, "BadExpirationDate", "", "expiration"},
		"collapse":     {with("apns-collapse-id", strings.Repeat("c", 65)), payload, 400, "BadCollapseId", "", "collapse"},
		"empty":        {good, "", 400, "PayloadEmpty", "", "empty"},
		"too large":    {good, `{"x":"` + strings.Repeat("a", 4100) + `"}`, 413, "PayloadTooLarge", "", "4096"},
		"extra field":  {good, strings.Replace(payload, `"count":1`, `"count":1,"x":2`, 1), 400, "BadPayload", "", "unknown field"},
		"seq number":   {good, strings.Replace(payload, `"seq":"1"`, `"seq":1`, 1), 400, "BadPayload", "", "seq"},
		"no sound":     {good, strings.Replace(payload, `"sound":"default",`, ``, 1), 400, "BadPayload", "", "sound"},
		"bad token":    {good, payload, 400, "BadDeviceToken", "/3/device/xyz", "device token"},
		"bad path":     {good, payload, 404, "BadPath", "/2/device/" + apnsToken, "path"},
		"badge < 0":    {good, strings.Replace(payload, `"sound"`, `"badge":-1,"sound"`, 1), 400, "BadPayload", "", "badge"},
		"not JSON":     {good, "{", 400, "BadPayload", "", "payload"},
		"mutable == 0": {good, strings.Replace(payload, `"mutable-content":1`, `"mutable-content":0`, 1), 400, "BadPayload", "", "mutable"},
	} {
		before := len(s.Violations())
		uu := u
		if tc.path != "" {
			uu = s.URL() + tc.path
		}
		req, _ := http.NewRequest("POST", uu, strings.NewReader(tc.body))
		for k, v := range tc.h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Reason string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		v := s.Violations()
		if resp.StatusCode != tc.status || e.Reason != tc.reason {
			t.Errorf("%s: answered %d %q, want %d %s", name, resp.StatusCode, e.Reason, tc.status, tc.reason)
		}
		if len(v) <= before || !strings.Contains(strings.Join(v[before:], "\n"), tc.wantVio) {
			t.Errorf("%s: violations %q", name, v[before:])
		}
	}
	// Two provider tokens verified: the good one and the old one.
	if s.Count() != 1 || len(s.Notifications()) != 1 || s.JWTs() != 2 {
		t.Errorf("count %d, notifications %d, JWTs %d", s.Count(), len(s.Notifications()), s.JWTs())
	}

	// Cues: a queue per token, then success; 410 carries a timestamp.
	s.Answer(apnsToken, 410, "Unregistered", "")
	s.Answer(apnsToken, 429, "TooManyRequests", "30")
	req, _ := http.NewRequest("POST", u, strings.NewReader(payload))
	for k, v := range good {
		req.Header.Set(k, v)
	}
	for i, want := range []int{410, 429, 200} {
		req.Body = io.NopCloser(strings.NewReader(payload))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("answer %d: %d, want %d", i, resp.StatusCode, want)
		}
		if want == 410 && (e["reason"] != "Unregistered" || e["timestamp"] == nil) {
			t.Errorf("410 body %v", e)
		}
		if want == 429 && resp.Header.Get("Retry-After") != "30" {
			t.Errorf("429 Retry-After %q", resp.Header.Get("Retry-After"))
		}
	}
}

func TestKeepBounded(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s := NewAPNs(APNsConfig{KeyID: "K", TeamID: "T", PublicKey: &k.PublicKey})
	defer s.Close()
	s.SetKeep(3)
	jwt := es256(t, k, map[string]any{"alg": "ES256", "kid": "K"}, map[string]any{"iss": "T", "iat": time.Now().Unix()})
	h := map[string]string{"authorization": "bearer " + jwt, "apns-topic": "x", "apns-push-type": "alert", "apns-priority": "5", "apns-expiration": "0"}
	for i := range 5 {
		body := fmt.Sprintf(`{"aps":{"alert":{"title":"%d","body":""},"sound":"default","mutable-content":1},"conversation_id":"c","seq":"%d","count":1}`, i, i+1)
		if r := raw(t, s.Client(), "POST", s.URL()+"/3/device/"+apnsToken, h, body); r.StatusCode != 200 {
			t.Fatalf("%d: %v", r.StatusCode, s.Violations())
		}
	}
	ns, rs := s.Notifications(), s.Requests()
	if s.Count() != 5 || len(ns) != 3 || len(rs) != 3 || ns[0].Payload.Seq != "3" || ns[2].Payload.Seq != "5" {
		t.Errorf("count %d, kept %d notifications %+v, %d requests", s.Count(), len(ns), ns, len(rs))
	}
	s.SetKeep(0)
	raw(t, s.Client(), "POST", s.URL()+"/3/device/"+apnsToken, h, `{"aps":{"alert":{"title":"","body":""},"sound":"default","mutable-content":1},"conversation_id":"c","seq":"9","count":1}`)
	if s.Count() != 6 || len(s.Notifications()) != 0 || len(s.Requests()) != 0 {
		t.Errorf("keep 0: count %d, %d kept", s.Count(), len(s.Notifications()))
	}
}

func TestFCMViolations(t *testing.T) {
	s, err := NewFCM("p")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Client()
	// A token request that is not a JWT bearer grant.
	r := raw(t, c, "POST", s.TokenURL(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		url.Values{"grant_type": {"client_credentials"}}.Encode())
	if r.StatusCode != 400 || len(s.Violations()) != 1 || s.TokenRequests() != 0 {
		t.Errorf("grant: %d %v", r.StatusCode, s.Violations())
	}
	// A send with a token not issued here.
	r = raw(t, c, "POST", s.URL()+"/v1/projects/p/messages:send", map[string]string{"Authorization": "Bearer nope", "Content-Type": "application/json"}, `{}`)
	if r.StatusCode != 401 || len(s.Violations()) != 2 {
		t.Errorf("token: %d %v", r.StatusCode, s.Violations())
	}
	// The wrong project.
	r = raw(t, c, "POST", s.URL()+"/v1/projects/q/messages:send", nil, `{}`)
	if r.StatusCode != 404 || len(s.Violations()) != 3 {
		t.Errorf("project: %d %v", r.StatusCode, s.Violations())
	}
}

func TestWebPushViolations(t *testing.T) {
	k, _ := ecdh.P256().GenerateKey(rand.Reader)
	s, err := NewWebPush(base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub, _ := s.NewSubscription()
	// No VAPID, nothing encrypted: refused, with violations.
	r := raw(t, s.Client(), "POST", sub.Endpoint, map[string]string{"Content-Encoding": "aes128gcm", "TTL": "60"}, "x")
	if r.StatusCode != 401 || len(s.Violations()) != 1 || !strings.Contains(s.Violations()[0], "VAPID") {
		t.Errorf("%d %v", r.StatusCode, s.Violations())
	}
	r = raw(t, s.Client(), "POST", sub.Endpoint, map[string]string{"Content-Encoding": "aesgcm", "TTL": "60"}, "x")
	if r.StatusCode != 400 || len(s.Violations()) != 2 {
		t.Errorf("%d %v", r.StatusCode, s.Violations())
	}
	r = raw(t, s.Client(), "POST", sub.Endpoint, map[string]string{"Content-Encoding": "aes128gcm"}, "x")
	if r.StatusCode != 400 || len(s.Violations()) != 3 || !strings.Contains(s.Violations()[2], "TTL") {
		t.Errorf("%d %v", r.StatusCode, s.Violations())
	}
	// An unknown subscription is the push service's 404, not a violation.
	r = raw(t, s.Client(), "POST", s.URL()+"/push/unknown", nil, "x")
	if r.StatusCode != 404 || len(s.Violations()) != 3 {
		t.Errorf("%d %v", r.StatusCode, s.Violations())
	}
}

func TestNewWebPushRefusesBadKey(t *testing.T) {
	for _, k := range []string{"", "!!", base64.RawURLEncoding.EncodeToString(make([]byte, 65))} {
		if s, err := NewWebPush(k); err == nil {
			s.Close()
			t.Errorf("%q accepted", k)
		}
	}
}
