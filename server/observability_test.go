package server_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parleyim/parley/internal/webhook"
	"github.com/parleyim/parley/server"
)

func scrape(t *testing.T, ts *testServer, key string) (int, string) {
	t.Helper()
	var hdr map[string]string
	if key != "" {
		hdr = bearer(key)
	}
	code, b := httpDo(t, http.MethodGet, ts.httpBase+"/metrics", hdr, nil)
	return code, string(b)
}

func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("series %s not in /metrics", series)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// /metrics needs the API key and reports what happened: connections by
// transport, messages, deliveries, ACK and commit latency histograms.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	if code, _ := scrape(t, ts, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a key: HTTP %d", code)
	}
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	_, recB := ts.connect(t, "bob", "b1", "phone", transports[2])
	ctx := ctx10(t)
	for i := 0; i < 3; i++ {
		if _, err := alice.SendText(ctx, "bob", "hi"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "bob receives", func() bool { return recB.count() == 3 })
	code, text := scrape(t, ts, testAPIKey)
	if code != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	checks := map[string]float64{
		`parley_connections{transport="ws"}`:  1,
		`parley_connections{transport="tcp"}`: 1,
		`parley_sessions`:                     2,
		`parley_messages_stored_total`:        3,
		`parley_ack_latency_seconds_count`:    3,
	}
	for series, want := range checks {
		if got := metricValue(t, text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if metricValue(t, text, "parley_deliveries_total") < 3 || metricValue(t, text, "parley_commit_latency_seconds_count") < 1 {
		t.Errorf("deliveries or commits not counted:\n%s", text)
	}
	for _, family := range []string{"parley_slow_consumer_disconnects_total", "parley_rate_limited_total", "parley_searches_total", "parley_searches_refused_total", "parley_searches_queued_total", "parley_webhook_queue", "go_goroutines", "go_memstats_heap_alloc_bytes", `parley_ack_latency_seconds_bucket{le="+Inf"}`} {
		if !strings.Contains(text, family) {
			t.Errorf("/metrics lacks %s", family)
		}
	}
}

// The admin page is served without data; its figures come from
// /v1/admin/stats, which needs the key.
func TestAdminPageAndStats(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	resp, err := http.Get(ts.httpBase + "/admin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `data-metric="connections"`) || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/admin: HTTP %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ts.dialOnly(t, "alice", "a1", "phone")
	code, st := adminDo(t, http.MethodGet, ts.httpBase+"/v1/admin/stats", testAPIKey, nil)
	if code != 200 || st["connections"].(float64) != 1 || st["sessions"].(float64) != 1 || st["ack_latency"] == nil {
		t.Fatalf("stats: %d %v", code, st)
	}
	code, online := adminDo(t, http.MethodGet, ts.httpBase+"/v1/admin/online", testAPIKey, nil)
	if code != 200 || online["total"].(float64) != 1 {
		t.Fatalf("online: %d %v", code, online)
	}
}

// Webhooks: a configured receiver gets user.online, message.stored,
// group.changed and user.offline, signed with the webhook secret.
func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	const secret = "hook-secret-0123456789"
	var mu sync.Mutex
	var got []map[string]any
	bad := 0
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !webhook.Verify(secret, r.Header.Get("X-Parley-Timestamp"), r.Header.Get("X-Parley-Signature"), body) {
			bad++
			w.WriteHeader(401)
			return
		}
		var b struct {
			Events []map[string]any `json:"events"`
		}
		json.Unmarshal(body, &b)
		got = append(got, b.Events...)
	})}
	go hs.Serve(ln)
	defer hs.Close()
	ts := startServer(t, func(c *server.Config) {
		c.WebhookURLs = []string{"http://" + ln.Addr().String() + "/parley"}
		c.WebhookSecret = secret
	})
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	ctx := ctx10(t)
	if _, err := alice.SendText(ctx, "bob", "hello"); err != nil {
		t.Fatal(err)
	}
	adm := adminClient(ts)
	if _, err := adm.CreateGroup(ctx, groupSpec("alice", "bob")); err != nil {
		t.Fatal(err)
	}
	alice.Close()
	has := func(typ string, match func(map[string]any) bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range got {
			if e["type"] == typ && match(e) {
				return true
			}
		}
		return false
	}
	eventually(t, "user.online", func() bool {
		return has("user.online", func(e map[string]any) bool { return e["user_id"] == "alice" && e["device_id"] == "a1" })
	})
	eventually(t, "message.stored", func() bool {
		return has("message.stored", func(e map[string]any) bool {
			m, _ := e["message"].(map[string]any)
			return m["from"] == "alice" && m["to"] == "bob" && m["payload"] == "aGVsbG8="
		})
	})
	eventually(t, "group.changed", func() bool {
		return has("group.changed", func(e map[string]any) bool {
			m, _ := e["message"].(map[string]any)
			return m["kind"] == "MESSAGE_KIND_GROUP_CREATED"
		})
	})
	eventually(t, "user.offline", func() bool {
		return has("user.offline", func(e map[string]any) bool { return e["user_id"] == "alice" && e["sessions"] == float64(0) })
	})
	mu.Lock()
	defer mu.Unlock()
	if bad != 0 {
		t.Fatalf("%d webhook requests failed signature checks", bad)
	}
}
