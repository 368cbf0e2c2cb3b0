package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/server"
)

// startSearchServer is startServer with the data directory known (the
// search scenario measures it) and search on or off.
func startSearchServer(t *testing.T, search string) Config {
	t.Helper()
	dir := t.TempDir()
	srv, err := server.New(server.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testKey}, Search: search,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	cfg := DefaultConfig("search")
	cfg.HTTPBase, cfg.WSAddr, cfg.TCPAddr, err = Addrs(srv.HTTPAddr(), srv.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIKey, cfg.DataDir = testKey, dir
	cfg.Timeout, cfg.Drain = time.Minute, 30*time.Second
	cfg.Count, cfg.Concurrency, cfg.Convs, cfg.Pipeline, cfg.Searchers = 3000, 4, 40, 4, []int{1, 12}
	cfg.QueryDuration = time.Second
	return cfg
}

func TestSearch(t *testing.T) {
	t.Parallel()
	cfg := startSearchServer(t, "on")
	rep := run(t, cfg, Options{})
	x := rep.Search
	if x == nil || x.SearchOff {
		t.Fatalf("search report %+v", x)
	}
	if rep.Requests != 3000 || rep.OK != 3000 || x.Messages != 3000 || x.SendsPerSec <= 0 {
		t.Errorf("requests %d ok %d messages %d sends/s %.1f", rep.Requests, rep.OK, x.Messages, x.SendsPerSec)
	}
	if !x.CaughtUp || x.IndexedTotal < 3000 || len(x.Series) == 0 {
		t.Errorf("index: caught up %v, indexed %d, series %d", x.CaughtUp, x.IndexedTotal, len(x.Series))
	}
	v := x.Verify
	// 4 senders × every rare word; about one message in 100 holds one.
	if v.Searches != uint64(4*len(searchRares)) || v.Expected == 0 || v.Hits != v.Expected || v.Mismatched != 0 || v.Unreadable != 0 || len(v.Samples) == 0 {
		t.Errorf("verify %+v", v)
	}
	if len(x.Steps) != 2 || x.Steps[0].Searchers != 1 || x.Steps[1].Searchers != 12 {
		t.Fatalf("query steps %+v", x.Steps)
	}
	for _, st := range x.Steps {
		for _, k := range searchKinds {
			q := st.Kinds[k]
			if q == nil || q.Answered == 0 || q.Errors != 0 || q.Unreadable != 0 || q.Latency.Count() != q.Answered || len(q.LatencySummary.Percentiles) == 0 {
				t.Errorf("%d searchers, %s queries: %+v", st.Searchers, k, q)
			}
		}
		if st.Kinds["word"].Hits == 0 || st.Kinds["cjk"].Hits == 0 || st.QueriesPerSec <= 0 {
			t.Errorf("%d searchers: common words and CJK pairs found nothing", st.Searchers)
		}
	}
	if x.SearchBytes == 0 || x.StoreBytes == 0 || x.SearchPerMillion <= 0 {
		t.Errorf("sizes: search %d store %d", x.SearchBytes, x.StoreBytes)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, s := range []string{"Search: load (4 senders, 40 conversations", "Search: index", "Caught up:\t", "Search: verification",
		"Search: queries (1 searchers", "Search: queries (12 searchers", "  rare\t", "  cjk\t", "DATA/search:\t", "per million messages", "Reliability: PASS"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, text.String())
		}
	}
	b, _ := json.Marshal(rep)
	var m map[string]any
	json.Unmarshal(b, &m)
	s, _ := m["search"].(map[string]any)
	for _, k := range []string{"sends_per_sec", "indexed_per_sec_load", "indexed_per_sec_after", "lag_peak", "catch_up_seconds",
		"index_series", "verify", "query_steps", "search_bytes_per_million", "store_bytes_per_million", "server_cpu_load_percent"} {
		if _, ok := s[k]; !ok {
			t.Errorf("JSON search lacks %q", k)
		}
	}
}

// Against a server without an index only the load runs, and passes.
func TestSearchOff(t *testing.T) {
	t.Parallel()
	cfg := startSearchServer(t, "off")
	cfg.Count = 500
	rep := run(t, cfg, Options{})
	x := rep.Search
	if x == nil || !x.SearchOff || x.Messages != 500 || x.Verify.Searches != 0 || len(x.Steps) != 0 {
		t.Fatalf("search report %+v", x)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "off on this server") {
		t.Errorf("text report:\n%s", text.String())
	}
}

// The generator: the same seed gives the same text; rare words cannot be
// found where they were not put.
func TestSearchWords(t *testing.T) {
	var sb strings.Builder
	a, ra := searchText(7, 3, 99, &sb)
	b, rb := searchText(7, 3, 99, &sb)
	if a != b || ra != rb {
		t.Errorf("not deterministic: %q %q", a, b)
	}
	rares := 0
	for m := range uint64(20000) {
		if _, r := searchText(1, 0, m, &sb); r >= 0 {
			rares++
		}
	}
	if rares < 100 || rares > 300 {
		t.Errorf("%d rare messages in 20,000, want about 200", rares)
	}
	common := map[rune]bool{}
	words := map[string]bool{}
	for _, lg := range searchLangs {
		for _, w := range lg.common {
			for _, c := range w {
				common[c] = true
			}
			words[strings.ToLower(w)] = true
		}
	}
	for _, ref := range searchRares {
		lg, rw := searchLangs[ref.lang], ref.word()
		if words[strings.ToLower(rw.word)] || words[rw.query] {
			t.Errorf("rare word %q is a common word", rw.word)
		}
		if lg.joined || lg.name == "ko" {
			for _, c := range rw.word {
				if common[c] {
					t.Errorf("rare word %q: %q is in a common word", rw.word, c)
				}
			}
		}
	}
}
