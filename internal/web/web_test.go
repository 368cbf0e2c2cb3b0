package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// The page at / loads, and every file it and its modules refer to is embedded
// and served with a type a browser accepts for it.
func TestClientFilesServed(t *testing.T) {
	h := Handler()
	res, html := get(t, h, "/")
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(html, -1)
	if len(refs) < 2 {
		t.Fatalf("index.html refers to %d files; want the script and the stylesheet", len(refs))
	}
	want := map[string]string{".js": "javascript", ".css": "text/css"}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range refs {
		queue = append(queue, "/"+strings.TrimPrefix(r[1], "/"))
	}
	imports := regexp.MustCompile(`(?m)^\s*import\s[^'"]*['"]\./([^'"]+)['"]`)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		res, body := get(t, h, p)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", p, res.StatusCode)
			continue
		}
		for ext, typ := range want {
			if strings.HasSuffix(p, ext) && !strings.Contains(res.Header.Get("Content-Type"), typ) {
				t.Errorf("GET %s: Content-Type %q, want %s", p, res.Header.Get("Content-Type"), typ)
			}
		}
		if strings.HasSuffix(p, ".js") {
			for _, m := range imports.FindAllStringSubmatch(body, -1) {
				queue = append(queue, "/"+m[1])
			}
		}
	}
	if !seen["/parley-sdk.js"] {
		t.Errorf("the app does not import the SDK bundle; served: %v", seen)
	}
}

// The service worker the app registers is served from the root (so its
// scope can be "/"), with a JavaScript type (browsers refuse any other),
// revalidated on each update check, and handles push and notification
// clicks.
func TestServiceWorkerServed(t *testing.T) {
	h := Handler()
	_, app := get(t, h, "/app.js")
	m := regexp.MustCompile(`serviceWorker\.register\(\s*'([^']+)'\s*,\s*\{\s*scope:\s*'([^']+)'`).FindStringSubmatch(app)
	if m == nil {
		t.Fatal("app.js does not register a service worker with an explicit scope")
	}
	if m[1] != "/sw.js" || m[2] != "/" {
		t.Fatalf("app.js registers %q with scope %q; want /sw.js with scope /", m[1], m[2])
	}
	res, body := get(t, h, m[1])
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", m[1], res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q, want text/javascript; charset=utf-8", m[1], ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("GET %s: Cache-Control %q, want no-cache", m[1], cc)
	}
	for _, ev := range []string{"'push'", "'notificationclick'"} {
		if !strings.Contains(body, "addEventListener("+ev) {
			t.Errorf("sw.js has no %s listener", ev)
		}
	}
	// Only the worker gets these headers.
	res, _ = get(t, h, "/app.js")
	if res.Header.Get("Cache-Control") != "" {
		t.Errorf("GET /app.js: Cache-Control %q, want none", res.Header.Get("Cache-Control"))
	}
}

// The page names its icon, so browsers do not ask for /favicon.ico (a 404 on
// every load); the icon is served as SVG.
func TestFaviconServed(t *testing.T) {
	h := Handler()
	_, html := get(t, h, "/")
	m := regexp.MustCompile(`<link rel="icon" href="([^"]+)" type="image/svg\+xml">`).FindStringSubmatch(html)
	if m == nil {
		t.Fatal("index.html links no SVG icon")
	}
	res, body := get(t, h, "/"+m[1])
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), "image/svg+xml") || !strings.Contains(body, "<svg") {
		t.Fatalf("GET /%s = %d %q", m[1], res.StatusCode, res.Header.Get("Content-Type"))
	}
}
