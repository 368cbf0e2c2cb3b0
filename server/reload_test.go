package server_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/notify/standin"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// configFile stands in for the file `parley serve --config` reads again: a
// test edits it, then reloads.
type configFile struct {
	mu  sync.Mutex
	cfg server.Config
}

func (f *configFile) read() (server.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, nil
}

func (f *configFile) edit(change func(*server.Config)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.cfg)
}

// startReloadable starts a server whose ConfigSource is a configFile
// holding the configuration it started with.
func startReloadable(t *testing.T, mod func(*server.Config)) (*testServer, *configFile) {
	t.Helper()
	f := &configFile{}
	ts := startServer(t, func(c *server.Config) {
		if mod != nil {
			mod(c)
		}
		c.ConfigSource = f.read
		f.cfg = *c
	})
	return ts, f
}

// reload posts to the admin endpoint and returns the status and body.
func reload(t *testing.T, ts *testServer) (int, map[string]any) {
	t.Helper()
	return adminDo(t, http.MethodPost, ts.httpBase+"/v1/admin/reload", testAPIKey, nil)
}

// A rate limit changed under load: connections opened before the reload,
// sending all along, stay open and are held to the new limit at once; a
// second reload lifts it again. The load is sends on every connection
// while the reloads happen; no connection may be closed, and every send
// is answered (stored or TOO_MANY_REQUESTS).
func TestReloadRateLimitUnderLoad(t *testing.T) {
	ts, file := startReloadable(t, func(c *server.Config) { c.UserSendRate = -1 })
	const conns = 6
	var clients []*client.Client
	for i := range conns {
		clients = append(clients, ts.dialOnly(t, "load"+string(rune('a'+i)), "d", "phone"))
	}
	ctx := ctx10(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, limited atomic.Int64
	errs := make(chan error, conns)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := "load" + string(rune('a'+(i+1)%conns))
			for n := 0; n < 100_000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.Send(ctx, &pb.Send{ClientMsgId: c.NewClientMsgID(), To: to, Payload: []byte("load")})
				switch {
				case err == nil:
					sent.Add(1)
				case client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS):
					limited.Add(1)
				default:
					errs <- err
					return
				}
			}
		}()
	}
	eventually(t, "load running", func() bool { return sent.Load() >= 50 })

	file.edit(func(c *server.Config) { c.UserSendRate = 2 }) // burst 4
	code, body := reload(t, ts)
	if code != http.StatusOK || !strings.Contains(body["changed"].([]any)[0].(string), "user_send_rate") {
		t.Fatalf("reload: %d %v", code, body)
	}
	// Every connection, still sending, is now refused past the burst.
	eventually(t, "the new limit refusing sends", func() bool { return limited.Load() >= conns })
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a send under load failed otherwise than by the limit: %v", err)
	default:
	}
	for i, c := range clients {
		select {
		case <-c.Done():
			t.Fatalf("connection %d closed by the reload: %v", i, c.Err())
		default:
		}
		// Each connection is held to the new limit: 20 sends in a row
		// (far faster than 2/s) are not all stored.
		ok := 0
		for range 20 {
			if _, err := c.SendText(ctx, "loada", "x"); err == nil {
				ok++
			} else if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS) {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
		if ok == 20 {
			t.Fatalf("connection %d stored all 20 sends after the limit went to 2/s", i)
		}
	}
	if n := ts.Stats().Connections; n != conns {
		t.Fatalf("%d connections after the reload, want the %d opened before", n, conns)
	}

	// Lifted again: the same connections send freely.
	file.edit(func(c *server.Config) { c.UserSendRate = -1 })
	if code, body := reload(t, ts); code != http.StatusOK {
		t.Fatalf("reload: %d %v", code, body)
	}
	for i, c := range clients {
		for n := range 30 {
			if _, err := c.SendText(ctx, "loada", "free"); err != nil {
				t.Fatalf("connection %d, send %d after the limit was lifted: %v", i, n, err)
			}
		}
	}
	t.Logf("under load: %d sends stored, %d refused by the new limit", sent.Load(), limited.Load())
}

// A reload that changes a key only a restart applies is refused with a
// message naming the key, and applies nothing, not even its reloadable
// changes.
func TestReloadRefusesRestartOnlyKeys(t *testing.T) {
	ts, file := startReloadable(t, func(c *server.Config) { c.UserSendRate = -1 })
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	file.edit(func(c *server.Config) {
		c.MaxFrameBytes = 128 << 10
		c.TCPAddr = "off"
		c.UserSendRate = 1
	})
	code, body := reload(t, ts)
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if code != http.StatusConflict || !strings.Contains(msg, "max_frame_bytes") || !strings.Contains(msg, "tcp_addr") ||
		strings.Contains(msg, "user_send_rate") {
		t.Fatalf("reload of restart-only keys: %d %v, want 409 naming max_frame_bytes and tcp_addr only", code, body)
	}
	ctx := ctx10(t)
	for n := range 10 {
		if _, err := alice.SendText(ctx, "bob", "x"); err != nil {
			t.Fatalf("send %d: the refused reload's rate limit was applied: %v", n, err)
		}
	}
	// Reload through Go: the same refusal, as a typed error.
	next, _ := file.read()
	_, err := ts.Reload(next)
	var restart *server.RestartRequiredError
	if !errors.As(err, &restart) || strings.Join(restart.Keys, ",") != "max_frame_bytes,tcp_addr" {
		t.Fatalf("Reload: %v", err)
	}
	// An invalid file is refused too.
	file.edit(func(c *server.Config) { *c = ts.cfg; c.ConfigSource = file.read; c.UserSendRate = -7 })
	if code, body := reload(t, ts); code != http.StatusBadRequest {
		t.Fatalf("invalid config: %d %v, want 400", code, body)
	}
}

// A server started without a configuration file answers a reload 409.
func TestReloadWithoutConfigFile(t *testing.T) {
	ts := startServer(t, nil)
	if code, body := reload(t, ts); code != http.StatusConflict {
		t.Fatalf("reload without a file: %d %v", code, body)
	}
	code, _ := adminDo(t, http.MethodPost, ts.httpBase+"/v1/admin/reload", "", nil)
	if code != http.StatusUnauthorized {
		t.Fatalf("reload without an admin key: %d", code)
	}
}

// A certificate replaced in place is served to new handshakes after a
// reload; a connection made before keeps working.
func TestReloadTLSCertificate(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	ts, _ := startReloadable(t, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	served := func() []byte {
		t.Helper()
		c, err := tls.Dial("tcp", ts.HTTPAddr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	before := served()
	ctx := ctx10(t)
	hc := client.HTTPClient{BaseURL: "https://" + ts.HTTPAddr(), Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	cred, err := hc.MintToken(ctx, testAPIKey, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := client.Dial(ctx, client.Options{Addr: "tls://" + ts.TCPAddr(), Token: cred.Token, DeviceID: "a", DeviceType: "t", TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()

	newCert, newKey, newPool := selfSigned(t)
	for _, p := range [][2]string{{newCert, certFile}, {newKey, keyFile}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(served(), before) {
		t.Fatal("the new certificate was served before the reload")
	}
	hc.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+ts.HTTPAddr()+"/v1/admin/reload", nil)
	req.Header.Set("X-Api-Key", testAPIKey)
	resp, err := hc.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The file names did not change ("changed" is empty); the files were
	// read again all the same.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"changed":[]`) {
		t.Fatalf("reload: %d %s", resp.StatusCode, b)
	}
	if bytes.Equal(served(), before) {
		t.Fatal("a handshake after the reload still got the old certificate")
	}
	// The new certificate verifies with its own pool only.
	c, err := tls.Dial("tcp", ts.TCPAddr(), &tls.Config{RootCAs: newPool})
	if err != nil {
		t.Fatalf("a new handshake does not verify against the new certificate: %v", err)
	}
	c.Close()
	if _, err := alice.SendText(ctx, "bob", "still here"); err != nil {
		t.Fatalf("a connection made before the reload: %v", err)
	}
}

// Webhook URLs, the word lists and the log level reload; the log says what
// changed.
func TestReloadWebhooksWordsAndLogLevel(t *testing.T) {
	got := make(chan string, 100)
	hook := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			got <- name
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := hook("a"), hook("b")
	logs := &logBuffer{}
	ts, file := startReloadable(t, func(c *server.Config) {
		c.Logger = nil
		c.LogOutput, c.LogFormat, c.LogLevel = logs, "json", "warn"
		c.WebhookURLs = []string{a.URL}
		c.WebhookEvents = []string{"message.stored"}
		c.WordFilterLists = []server.WordFilterList{{Name: "l", Action: "reject", Words: []string{"apple"}}}
	})
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	ctx := ctx10(t)
	if _, err := alice.SendText(ctx, "bob", "banana"); err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != "a" {
		t.Fatalf("event went to %s", w)
	}
	if _, err := alice.SendText(ctx, "bob", "apple"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_REJECTED) {
		t.Fatalf("a word of the list: %v, want REJECTED", err)
	}

	file.edit(func(c *server.Config) {
		c.WebhookURLs = []string{b.URL}
		c.WordFilterLists[0].Words = []string{"banana"}
		c.LogLevel = "info"
	})
	code, body := reload(t, ts)
	if code != http.StatusOK {
		t.Fatalf("reload: %d %v", code, body)
	}
	if _, err := alice.SendText(ctx, "bob", "apple"); err != nil {
		t.Fatalf("a word no longer listed: %v", err)
	}
	if w := <-got; w != "b" {
		t.Fatalf("event after the reload went to %s, want the new URL", w)
	}
	if _, err := alice.SendText(ctx, "bob", "banana"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_REJECTED) {
		t.Fatalf("a newly listed word: %v, want REJECTED", err)
	}
	// Logged at info, which the reload turned on: the line is there, in JSON.
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "configuration reloaded") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
		}
	}
	if line == nil || !strings.Contains(line["changed"].(string), "webhook_urls") || !strings.Contains(line["changed"].(string), "log_level") {
		t.Fatalf("no reload line naming the changed keys in %q", logs.String())
	}
	// Adding a URL needs a restart (each URL has its queue and sender).
	file.edit(func(c *server.Config) { c.WebhookURLs = append(c.WebhookURLs, a.URL) })
	if code, body := reload(t, ts); code != http.StatusConflict || !strings.Contains(body["error"].(map[string]any)["message"].(string), "webhook_urls") {
		t.Fatalf("a webhook URL added: %d %v", code, body)
	}
}

// Push credentials replaced in place apply after a reload: with the wrong
// APNs key Apple (a local stand-in) refuses every notification; the right
// key written over the file and a reload, and the next one is delivered.
func TestReloadPushCredentials(t *testing.T) {
	goodP8, pub, err := standin.NewP8()
	if err != nil {
		t.Fatal(err)
	}
	wrongP8, _, err := standin.NewP8()
	if err != nil {
		t.Fatal(err)
	}
	apns := standin.NewAPNs(standin.APNsConfig{KeyID: "KEY1234567", TeamID: "TEAM123456", PublicKey: pub, Topic: pushTopic})
	t.Cleanup(apns.Close)
	keyFile := filepath.Join(t.TempDir(), "AuthKey.p8")
	if err := os.WriteFile(keyFile, wrongP8, 0o600); err != nil {
		t.Fatal(err)
	}
	ts, _ := startReloadable(t, func(c *server.Config) {
		c.APNsKeyFile, c.APNsKeyID, c.APNsTeamID = keyFile, "KEY1234567", "TEAM123456"
		c.APNsEndpoint, c.APNsSandboxEndpoint = apns.URL(), apns.URL()
		server.SetPushClientForTest(c, "apns", apns.Client())
		c.PushDelay, c.PushCoalesce = 100*time.Millisecond, 100*time.Millisecond
	})
	ctx := ctx10(t)
	bob, _, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: ts.mint(t, "bob"), DeviceID: "phone", DeviceType: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.RegisterAPNs(ctx, apnsToken(1), pushTopic, false); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	alice := ts.dialOnly(t, "alice", "a1", "web")
	if _, err := alice.SendText(ctx, "bob", "with the wrong key"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "APNs refusing the wrong key", func() bool { return len(apns.Violations()) > 0 })
	if n := len(apns.Notifications()); n != 0 {
		t.Fatalf("%d notifications delivered with the wrong key", n)
	}

	if err := os.WriteFile(keyFile, goodP8, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := reload(t, ts); code != http.StatusOK {
		t.Fatalf("reload: %d %v", code, body)
	}
	refused := len(apns.Violations())
	if _, err := alice.SendText(ctx, "bob", "with the right key"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a notification with the new key", func() bool { return len(apns.Notifications()) > 0 })
	if got := apns.Notifications()[0].Payload.Aps.Alert.Body; !strings.Contains(got, "right key") {
		t.Fatalf("delivered %q", got)
	}
	if v := apns.Violations(); len(v) != refused {
		t.Fatalf("APNs refused requests after the reload: %q", v[refused:])
	}
}

// Before-send hooks reload: none at first, then a hook added by a reload
// decides the next send (a rejection the sender sees), then removed again.
func TestReloadModerationHooks(t *testing.T) {
	h := newAppHook(t)
	ts, file := startReloadable(t, nil)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	ctx := ctx10(t)
	if _, err := sendTo(ctx, alice, "bob", "bad but no hook yet"); err != nil {
		t.Fatal(err)
	}
	file.edit(withHook(h.srv.URL+"/hook", "fail_closed", 2*time.Second, "message.direct"))
	if code, body := reload(t, ts); code != http.StatusOK || !strings.Contains(body["changed"].([]any)[0].(string), "moderation_hooks") {
		t.Fatalf("reload: %d %v", code, body)
	}
	if _, err := sendTo(ctx, alice, "bob", "bad, now hooked"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_REJECTED) {
		t.Fatalf("a send the new hook rejects: %v", err)
	}
	file.edit(func(c *server.Config) { c.ModerationHooks = nil })
	if code, body := reload(t, ts); code != http.StatusOK {
		t.Fatalf("reload: %d %v", code, body)
	}
	if _, err := sendTo(ctx, alice, "bob", "bad, hook gone"); err != nil {
		t.Fatalf("after the hook was removed: %v", err)
	}
	if n := len(h.events()); n != 1 {
		t.Fatalf("the hook saw %d events, want the 1 sent while it was configured", n)
	}
}
