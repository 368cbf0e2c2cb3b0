package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/auth"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// logBuffer collects log output written from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secretSet names every secret value a test handled.
type secretSet map[string]string

func (s secretSet) add(name, v string) {
	if v == "" {
		return
	}
	s[name] = v
	// A JWT's signature is what makes it a credential: check it on its own
	// too, so that a log of the signature alone (or of a token cut after
	// its header) is caught.
	if parts := strings.Split(v, "."); len(parts) == 3 && len(parts[2]) >= 16 {
		s[name+" (signature)"] = parts[2]
	}
}

// leakWindow is the length of the pieces of each secret looked for in the
// logs: a log line holding any 16 consecutive characters of a secret (a
// prefix, a suffix, the middle of a token) counts as a leak.
const leakWindow = 16

// leaks lists the secrets any piece of which appears in logs.
func (s secretSet) leaks(logs string) []string {
	var out []string
	for name, v := range s {
		w := min(leakWindow, len(v))
		for i := 0; i+w <= len(v); i++ {
			if at := strings.Index(logs, v[i:i+w]); at >= 0 {
				line := logs[strings.LastIndexByte(logs[:at], '\n')+1:]
				if end := strings.IndexByte(line, '\n'); end >= 0 {
					line = line[:end]
				}
				out = append(out, fmt.Sprintf("%s: %q in log line %q", name, v[i:i+w], line))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// BRIEF case 12: tokens, passwords and keys never appear in the logs. A real
// server logging at Debug goes through registration, logins (good and bad),
// socket authentication on every transport (good, forged, truncated and
// revoked tokens), the admin API (right and wrong keys), token minting,
// password changes and logout; then every secret it saw is looked for in
// everything it logged. Run once with configured secrets and once with the
// ones a server generates at first start, and in both log formats: text
// through a Logger handed in, JSON through log_format.
func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		generated bool
		format    string
	}{{false, "text"}, {true, "text"}, {false, "json"}, {true, "json"}} {
		generated := tc.generated
		name := "configured secrets"
		if generated {
			name = "generated secrets"
		}
		t.Run(name+" "+tc.format, func(t *testing.T) {
			logs := &logBuffer{}
			secrets := secretSet{}
			var nextMu sync.Mutex
			var next func(*server.Config)
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
			}))
			defer hook.Close()
			ts := startServer(t, func(c *server.Config) {
				if tc.format == "json" {
					c.Logger, c.LogOutput, c.LogFormat, c.LogLevel = nil, logs, "json", "debug"
				} else {
					c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				}
				c.WebhookURLs = []string{hook.URL}
				// Reloads (below) read this configuration again, with
				// next's changes.
				c.ConfigSource = func() (server.Config, error) {
					nextMu.Lock()
					defer nextMu.Unlock()
					n := *c
					if next != nil {
						next(&n)
					}
					return n, nil
				}
				if generated {
					c.AdminAPIKeys, c.AppSecret = nil, ""
					return
				}
				c.AdminAPIKeys = []string{randomSecret(t, "adminkey-")}
				c.AppSecret = randomSecret(t, "appsecret-")
				c.TokenKey = randomSecret(t, "tokenkey-")
				c.WebhookSecret = randomSecret(t, "hooksecret-")
			})
			// What the server actually uses: configured values, else the generated file.
			var saved auth.Secrets
			b, err := os.ReadFile(filepath.Join(ts.cfg.DataDir, auth.SecretsFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			adminKey, appSecret := saved.AdminAPIKeys[0], saved.AppSecret
			if !generated {
				adminKey, appSecret = ts.cfg.AdminAPIKeys[0], ts.cfg.AppSecret
				secrets.add("token key", ts.cfg.TokenKey)
				secrets.add("webhook secret", ts.cfg.WebhookSecret)
			}
			secrets.add("admin API key", adminKey)
			secrets.add("app secret", appSecret)
			secrets.add("generated token key", saved.TokenKey)
			secrets.add("generated app secret", saved.AppSecret)
			secrets.add("generated webhook secret", saved.WebhookSecret)
			for i, k := range saved.AdminAPIKeys {
				secrets.add(fmt.Sprint("generated admin API key ", i), k)
			}

			exerciseSecrets(t, ts, adminKey, appSecret, secrets)

			// Reloads: one refused for changing secrets (its message names
			// the keys, never their values), one applied; each logged with
			// the admin request's id.
			newKey, newHookSecret := randomSecret(t, "tokenkey2-"), randomSecret(t, "hooksecret2-")
			secrets.add("token key in a reload", newKey)
			secrets.add("webhook secret in a reload", newHookSecret)
			nextMu.Lock()
			next = func(c *server.Config) { c.TokenKey, c.WebhookSecret, c.UserSendRate = newKey, newHookSecret, 7 }
			nextMu.Unlock()
			hdr := map[string]string{"X-Api-Key": adminKey, "X-Request-Id": "reload-refused-1"}
			code, body := httpDo(t, http.MethodPost, ts.httpBase+"/v1/admin/reload", hdr, nil)
			if code != http.StatusConflict || !strings.Contains(string(body), "token_key") || !strings.Contains(string(body), "webhook_secret") {
				t.Fatalf("a reload changing secrets: %d %s", code, body)
			}
			nextMu.Lock()
			next = func(c *server.Config) { c.UserSendRate, c.LogLevel = 7, "debug" }
			nextMu.Unlock()
			hdr["X-Request-Id"] = "reload-applied-1"
			req, _ := http.NewRequest(http.MethodPost, ts.httpBase+"/v1/admin/reload", nil)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") != "reload-applied-1" {
				t.Fatalf("reload: %d, request id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
			}

			// Everything is logged once the server has stopped.
			shutdown(t, ts)
			out := logs.String()
			if !strings.Contains(out, "level=DEBUG") && !strings.Contains(out, `"level":"DEBUG"`) {
				t.Fatalf("the server logged nothing at Debug: the logger is not wired, so no leak could be seen: %q", out)
			}
			if leaked := secrets.leaks(out); len(leaked) > 0 {
				t.Fatalf("secrets in the logs:\n%s", strings.Join(leaked, "\n"))
			}
			reloaded := false
			for _, l := range strings.Split(out, "\n") {
				reloaded = reloaded || strings.Contains(l, "configuration reloaded") && strings.Contains(l, "reload-applied-1")
			}
			if !reloaded {
				t.Fatalf("no reload line with the request's id in the log:\n%s", out)
			}
			t.Logf("%d secrets checked against %d bytes (%d lines) of Debug logs", len(secrets), len(out), strings.Count(out, "\n"))

			// The matcher finds a secret when one is logged, whole or in
			// part, through the same kind of handler.
			t.Run("planted leaks are found", func(t *testing.T) {
				for name, v := range secrets {
					for _, form := range []string{v, v[:len(v)/2+1], v[len(v)/2:]} {
						var buf bytes.Buffer
						l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
						l.Debug("auth failed", "err", fmt.Errorf("token %q rejected", form))
						found := false
						for _, l := range secrets.leaks(out + buf.String()) {
							found = found || strings.HasPrefix(l, name+": ")
						}
						if !found {
							t.Fatalf("%s logged as %q: the matcher missed it", name, form)
						}
					}
				}
			})
		})
	}
}

// exerciseSecrets drives every path that handles a secret and records each
// secret it sees in secrets.
func exerciseSecrets(t *testing.T, ts *testServer, adminKey, appSecret string, secrets secretSet) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pw1, pw2, wrongPW := randomSecret(t, "pw-first-"), randomSecret(t, "pw-second-"), randomSecret(t, "pw-wrong-")
	davePW, davePW2 := randomSecret(t, "pw-dave-"), randomSecret(t, "pw-dave2-")
	wrongKey := randomSecret(t, "wrongkey-")
	for name, v := range map[string]string{"password": pw1, "new password": pw2, "wrong password": wrongPW,
		"admin-set password": davePW, "admin-reset password": davePW2, "wrong admin key": wrongKey} {
		secrets.add(name, v)
	}
	expectHTTP := func(what string, err error, status int) {
		t.Helper()
		if got, _ := httpCode(err); got != status {
			t.Fatalf("%s: %v, want HTTP %d", what, err, status)
		}
	}
	dial := func(what, addr string, codec wire.Codec, token string) *client.Client {
		t.Helper()
		c, err := client.Dial(ctx, client.Options{Addr: addr, Token: token, DeviceID: what, DeviceType: what, Codec: codec})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func(what, addr string, codec wire.Codec, token string) {
		t.Helper()
		c, err := client.Dial(ctx, client.Options{Addr: addr, Token: token, DeviceID: "refused", DeviceType: "refused", Codec: codec})
		if err == nil {
			c.Close()
			t.Fatalf("%s: authenticated", what)
		}
		if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
			t.Fatalf("%s: %v, want UNAUTHENTICATED", what, err)
		}
	}
	bearer := func(method, path, token string, body string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, ts.httpBase+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	tcp := "tcp://" + ts.tcpAddr

	// Accounts: register, log in, a wrong password, an unknown user.
	reg, err := client.Register(ctx, ts.httpBase, "alice", pw1)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("register token", reg.Token)
	login, err := client.Login(ctx, ts.httpBase, "alice", pw1)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("login token", login.Token)
	_, err = client.Login(ctx, ts.httpBase, "alice", wrongPW)
	expectHTTP("wrong password", err, http.StatusUnauthorized)
	_, err = client.Login(ctx, ts.httpBase, "nobody", wrongPW)
	expectHTTP("unknown user", err, http.StatusUnauthorized)

	// An app-minted token (signed with the app secret).
	now := time.Now()
	appTok := sign(t, jwt.SigningMethodHS256, []byte(appSecret), jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "carol", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
	secrets.add("app-minted token", appTok)

	// Sockets: every transport, with good tokens.
	alice := dial("ws-proto", ts.wsURL, wire.Proto, login.Token)
	dial("ws-json", ts.wsURL, wire.JSON, reg.Token)
	carol := dial("tcp", tcp, wire.Proto, appTok)
	if _, err := alice.SendText(ctx, "carol", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendText(ctx, "alice", "hi"); err != nil {
		t.Fatal(err)
	}

	// Bad tokens: forged, truncated (a valid prefix), garbage, wrong alg.
	forged := sign(t, jwt.SigningMethodHS256, []byte(randomSecret(t, "not-the-key-")), jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "carol", "exp": now.Add(time.Hour).Unix()})
	secrets.add("forged token", forged)
	truncated := login.Token[:len(login.Token)-3]
	wrongAlg := sign(t, jwt.SigningMethodHS512, []byte(appSecret), jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "carol", "exp": now.Add(time.Hour).Unix()})
	secrets.add("HS512 token", wrongAlg)
	garbage := randomSecret(t, "garbage-token-")
	secrets.add("garbage token", garbage)
	for _, bad := range []string{forged, truncated, wrongAlg, garbage} {
		refused("bad token over ws-json", ts.wsURL, wire.JSON, bad)
		refused("bad token over tcp", tcp, wire.Proto, bad)
		if code := bearer(http.MethodGet, "/v1/conversations", bad, ""); code != http.StatusUnauthorized {
			t.Fatalf("bearer with a bad token: HTTP %d", code)
		}
	}
	// A raw Auth frame with a bad token, and a good one over HTTP RPC.
	rc := dialRawTCP(t, ts.tcpAddr)
	if f := rc.auth(forged, "raw", "raw"); f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED {
		t.Fatalf("raw auth with a forged token: %v", f)
	}
	if code := bearer(http.MethodPost, "/v1/rpc", login.Token, `{"send":{"clientMsgId":"h1","to":"carol","payload":"eA=="}}`); code != http.StatusOK {
		t.Fatalf("rpc over HTTP: %d", code)
	}

	// The admin API with its key (header and bearer) and with a wrong one.
	admin := client.NewAdmin(ts.httpBase, adminKey)
	if _, err := admin.CreateUser(ctx, "dave", davePW); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetPassword(ctx, "dave", davePW2); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Login(ctx, ts.httpBase, "dave", davePW2); err != nil {
		t.Fatal(err)
	}
	minted, err := admin.MintToken(ctx, "erin", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("admin-minted token", minted.Token)
	minted2, err := client.MintToken(ctx, ts.httpBase, adminKey, "frank", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("admin-minted token 2", minted2.Token)
	dial("minted", tcp, wire.Proto, minted.Token)
	dial("minted2", ts.wsURL, wire.Proto, minted2.Token)
	if _, err := admin.Sessions(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if code := bearer(http.MethodGet, "/metrics", adminKey, ""); code != http.StatusOK {
		t.Fatalf("/metrics with the key as bearer: %d", code)
	}
	if code := bearer(http.MethodGet, "/metrics", wrongKey, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong key: %d", code)
	}
	_, err = client.NewAdmin(ts.httpBase, wrongKey).CreateUser(ctx, "eve", davePW)
	expectHTTP("admin API with a wrong key", err, http.StatusUnauthorized)
	_, err = client.MintToken(ctx, ts.httpBase, wrongKey, "eve", time.Hour)
	expectHTTP("mint with a wrong key", err, http.StatusUnauthorized)
	_, err = client.NewAdmin(ts.httpBase, adminKey).CreateUser(ctx, "bad:id", davePW)
	expectHTTP("admin create with a bad id", err, http.StatusBadRequest)

	// Password change: earlier tokens are revoked; the old password fails.
	fresh, err := client.ChangePassword(ctx, ts.httpBase, reg.Token, pw1, pw2)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("token after password change", fresh.Token)
	_, err = client.ChangePassword(ctx, ts.httpBase, fresh.Token, wrongPW, pw1)
	expectHTTP("password change with a wrong old password", err, http.StatusUnauthorized)
	refused("revoked by password change", ts.wsURL, wire.JSON, login.Token)
	_, err = client.Login(ctx, ts.httpBase, "alice", pw1)
	expectHTTP("old password", err, http.StatusUnauthorized)
	again, err := client.Login(ctx, ts.httpBase, "alice", pw2)
	if err != nil {
		t.Fatal(err)
	}
	secrets.add("login token after password change", again.Token)
	dial("after-change", tcp, wire.Proto, again.Token)

	// Logout revokes; the revoked token is refused everywhere.
	if err := client.Logout(ctx, ts.httpBase, again.Token); err != nil {
		t.Fatal(err)
	}
	refused("logged out (tcp)", tcp, wire.Proto, again.Token)
	if code := bearer(http.MethodGet, "/v1/conversations", again.Token, ""); code != http.StatusUnauthorized {
		t.Fatalf("bearer after logout: HTTP %d", code)
	}
	if n, err := admin.RevokeTokens(ctx, "alice"); err != nil {
		t.Fatalf("revoke alice's tokens: %d %v", n, err)
	}
	refused("token revoked through the admin API", ts.wsURL, wire.Proto, fresh.Token)
}

// A stop ends with one line that says so and what it closed, so an
// operator waiting on a drain knows it is over.
func TestShutdownSaysItIsDone(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	ts := startServer(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	alice, _ := ts.connect(t, "alice", "a1", "cli", transports[0])
	if _, err := alice.SendText(ctx10(t), "bob", "hi"); err != nil {
		t.Fatal(err)
	}
	shutdown(t, ts)
	out := logs.String()
	for _, want := range []string{`msg="shutdown complete"`, "connections_closed=1", "store_closed=true"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log lacks %s:\n%s", want, out)
		}
	}
}
