package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	gproto "google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// bigPayload is a message that nearly fills a default 64 KiB frame.
const bigPayload = 63 << 10

// fillConversation stores n messages of size bytes from c into its
// conversation with `to` (or into conversation conv when to is ""), eight
// sends in flight, and returns the conversation id.
func fillConversation(t *testing.T, c *client.Client, to, conv string, n, size int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Value
		errs  = make(chan error, 8)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := bytes.Repeat([]byte{'x'}, size)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ack, err := c.Send(ctx, &pb.Send{To: to, ConversationId: conv, ClientMsgId: fmt.Sprint("fill-", i), ContentType: "bin", Payload: payload})
				if err != nil {
					errs <- fmt.Errorf("send %d: %w", i, err)
					return
				}
				first.CompareAndSwap(nil, ack.ConversationId)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return first.Load().(string)
}

// checkSeqs fails unless msgs are exactly seqs 1..n in order.
func checkSeqs(t *testing.T, what string, msgs []*pb.Message, n int) {
	t.Helper()
	if len(msgs) != n {
		t.Fatalf("%s: got %d messages, want %d", what, len(msgs), n)
	}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) {
			t.Fatalf("%s: message %d has seq %d (gap or duplicate)", what, i, m.Seq)
		}
	}
}

// pageAll pages through a conversation forward (get(after)) until has_more
// is false, checking every page is non-empty while more remains.
func pageAll(t *testing.T, what string, get func(after uint64) (*pb.MessagePage, error)) []*pb.Message {
	t.Helper()
	var all []*pb.Message
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("%s: no end after %d pages", what, pages)
		}
		p, err := get(after)
		if err != nil {
			t.Fatalf("%s: page after %d: %v", what, after, err)
		}
		all = append(all, p.Messages...)
		if !p.HasMore {
			return all
		}
		if len(p.Messages) == 0 {
			t.Fatalf("%s: empty page with has_more after %d", what, after)
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
}

// pageBack pages backward from the newest message until has_more is false
// and returns the messages ascending.
func pageBack(t *testing.T, what string, get func(before uint64) (*pb.MessagePage, error)) []*pb.Message {
	t.Helper()
	var chunks [][]*pb.Message
	before := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("%s: no end after %d pages", what, pages)
		}
		p, err := get(before)
		if err != nil {
			t.Fatalf("%s: page before %d: %v", what, before, err)
		}
		chunks = append(chunks, p.Messages)
		if !p.HasMore {
			break
		}
		if len(p.Messages) == 0 {
			t.Fatalf("%s: empty page with has_more before %d", what, before)
		}
		before = p.Messages[0].Seq
	}
	var all []*pb.Message
	for i := len(chunks) - 1; i >= 0; i-- {
		all = append(all, chunks[i]...)
	}
	return all
}

// httpGet fetches a JSON page with a bearer token (or the admin key when
// token is "") and decodes it into out; it returns the HTTP status.
func httpGet(ctx context.Context, u, token string, out gproto.Message) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else {
		req.Header.Set("X-Api-Key", testAPIKey)
	}
	return doJSON(req, out)
}

func doJSON(req *http.Request, out gproto.Message) (int, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, protojson.Unmarshal(b, out)
}

// rpcPage asks /v1/rpc for one page (a syncMessages or history frame).
func rpcPage(ctx context.Context, base, token string, frame string) (*pb.MessagePage, int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/rpc", bytes.NewReader([]byte(frame)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	var f pb.ServerFrame
	code, err := doJSON(req, &f)
	if err != nil {
		return nil, code, err
	}
	if f.GetMessages() == nil {
		return nil, code, fmt.Errorf("rpc answered %v", &f)
	}
	return f.GetMessages(), code, nil
}

// Any page stops at a byte budget below the per-connection queue cap: a
// conversation of messages that nearly fill a frame, several times larger
// than send_queue_bytes, is synced whole by a client with default settings
// and default page limits — forward and backward, on every transport, over
// HTTP, /v1/rpc and the admin API — without being closed as slow, and with
// no gap.
func TestLargeMessagesSyncWithDefaultLimits(t *testing.T) {
	t.Parallel()
	// 320 × 63 KiB ≈ 20 MB, five times the default 4 MiB queue cap.
	testLargeMessagesSync(t, 320, func(c *server.Config) { c.NoSync = true })
}

// The same on PostgreSQL (fewer messages: still over twice the cap).
func TestPGLargeMessagesSyncWithDefaultLimits(t *testing.T) {
	t.Parallel()
	testLargeMessagesSync(t, 160, pgConfig(t))
}

func testLargeMessagesSync(t *testing.T, n int, mod func(*server.Config)) {
	ts := startServer(t, mod)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	conv := fillConversation(t, alice, "bob", "", n, bigPayload)
	// 20 MB read a dozen times over. Each part has its own deadline,
	// generous for -race on a busy machine (one shared deadline for all
	// the parts ran out on a loaded CI machine, with nothing wrong).
	phase := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := phase(t)
			bob, _ := ts.connect(t, "bob", "b-"+tc.name, "phone-"+tc.name, tc)
			fwd := pageAll(t, "sync", func(after uint64) (*pb.MessagePage, error) {
				return bob.SyncMessages(ctx, conv, after, 0)
			})
			checkSeqs(t, "sync", fwd, n)
			back := pageBack(t, "history", func(before uint64) (*pb.MessagePage, error) {
				return bob.History(ctx, conv, before, 0)
			})
			checkSeqs(t, "history", back, n)
			select {
			case <-bob.Done():
				t.Fatalf("connection closed: %v", bob.Err())
			default:
			}
		})
	}

	// The SDK's session, on its defaults, catches up on everything.
	ctx := phase(t)
	var got atomic.Int64
	sess, err := client.NewSession(client.SessionOptions{Options: client.Options{
		Addr: ts.addr(transports[2]), Token: ts.mint(t, "bob"), DeviceID: "b-sess", DeviceType: "tablet",
		OnMessage: func(m *pb.Message) {
			if m.ConversationId == conv {
				got.Add(1)
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for got.Load() != int64(n) {
		select {
		case <-ctx.Done():
			t.Fatalf("the session synced %d of %d messages", got.Load(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}

	tok := ts.mint(t, "bob")
	base := ts.httpBase + "/v1/conversations/" + url.PathEscape(conv) + "/messages"
	t.Run("http", func(t *testing.T) {
		ctx := phase(t)
		fwd := pageAll(t, "http after", func(after uint64) (*pb.MessagePage, error) {
			var p pb.MessagePage
			_, err := httpGet(ctx, fmt.Sprintf("%s?after=%d", base, after), tok, &p)
			return &p, err
		})
		checkSeqs(t, "http after", fwd, n)
		back := pageBack(t, "http before", func(before uint64) (*pb.MessagePage, error) {
			var p pb.MessagePage
			_, err := httpGet(ctx, fmt.Sprintf("%s?before=%d", base, before), tok, &p)
			return &p, err
		})
		checkSeqs(t, "http before", back, n)
		// Even when asked for 1,000 at once.
		fwd = pageAll(t, "http limit 1000", func(after uint64) (*pb.MessagePage, error) {
			var p pb.MessagePage
			_, err := httpGet(ctx, fmt.Sprintf("%s?after=%d&limit=1000", base, after), tok, &p)
			return &p, err
		})
		checkSeqs(t, "http limit 1000", fwd, n)
	})
	t.Run("rpc", func(t *testing.T) {
		ctx := phase(t)
		fwd := pageAll(t, "rpc sync", func(after uint64) (*pb.MessagePage, error) {
			p, _, err := rpcPage(ctx, ts.httpBase, tok, fmt.Sprintf(`{"syncMessages":{"conversationId":%q,"afterSeq":"%d"}}`, conv, after))
			return p, err
		})
		checkSeqs(t, "rpc sync", fwd, n)
		back := pageBack(t, "rpc history", func(before uint64) (*pb.MessagePage, error) {
			p, _, err := rpcPage(ctx, ts.httpBase, tok, fmt.Sprintf(`{"history":{"conversationId":%q,"beforeSeq":"%d","limit":1000}}`, conv, before))
			return p, err
		})
		checkSeqs(t, "rpc history", back, n)
	})
	t.Run("admin", func(t *testing.T) {
		ctx := phase(t)
		adm := adminClient(ts)
		fwd := pageAll(t, "admin after", func(after uint64) (*pb.MessagePage, error) {
			return adm.Messages(ctx, conv, after, true, 1000)
		})
		checkSeqs(t, "admin after", fwd, n)
		back := pageBack(t, "admin before", func(before uint64) (*pb.MessagePage, error) {
			return adm.Messages(ctx, conv, before, false, 0)
		})
		checkSeqs(t, "admin before", back, n)
	})
}

// heapPeak samples the heap every 20 ms until stop is called and returns
// the largest HeapAlloc seen.
func heapPeak() (stop func() uint64) {
	var (
		peak atomic.Uint64
		done = make(chan struct{})
		out  = make(chan struct{})
	)
	go func() {
		defer close(out)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); <-out; return peak.Load() }
}

// Concurrent large reads have a global memory bound: sixteen socket
// clients and sixteen HTTP clients each read a conversation of 63 KiB
// messages with limit 1,000 at once. Every read is served (some may be
// refused with TOO_MANY_REQUESTS and retried), the heap stays within a
// bound derived from the config, and another user's sends go through
// meanwhile.
func TestConcurrentLargeReadsBoundedMemory(t *testing.T) {
	// Not parallel: it samples the process heap, which a test running
	// beside it would add to.
	const (
		n        = 320
		readers  = 16
		queueCap = 1 << 20
		readMem  = 8 << 20
	)
	ts := startServer(t, func(c *server.Config) {
		c.NoSync = true
		c.SendQueueBytes = queueCap
		c.ReadMemoryBytes = readMem
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	members := []string{}
	for i := range readers {
		members = append(members, fmt.Sprint("r", i))
	}
	g, err := adminClient(ts).CreateGroup(ctx, groupSpec("owner", members...))
	if err != nil {
		t.Fatal(err)
	}
	owner := ts.dialOnly(t, "owner", "o1", "phone")
	conv := fillConversation(t, owner, "", g.ConversationId, n, bigPayload)
	socks := make([]*client.Client, readers)
	toks := make([]string, readers)
	for i := range readers {
		socks[i], _ = ts.connect(t, members[i], "d", "phone", transports[i%len(transports)])
		toks[i] = ts.mint(t, members[i])
	}
	carol := ts.dialOnly(t, "carol", "c1", "phone")

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := heapPeak()

	var refused atomic.Int64
	retry := func(what string, get func() (*pb.MessagePage, error)) (*pb.MessagePage, error) {
		for {
			p, err := get()
			if err == nil || !(client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS) || errors.Is(err, errHTTP429)) {
				return p, err
			}
			refused.Add(1)
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%s: %w", what, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	var wg sync.WaitGroup
	results := make([][]*pb.Message, 2*readers)
	errs := make([]error, 2*readers)
	for i := range readers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			results[i], errs[i] = readAll(func(after uint64) (*pb.MessagePage, error) {
				return retry("sync", func() (*pb.MessagePage, error) { return socks[i].SyncMessages(ctx, conv, after, 1000) })
			})
		}()
		go func() {
			defer wg.Done()
			base := ts.httpBase + "/v1/conversations/" + url.PathEscape(conv) + "/messages"
			results[readers+i], errs[readers+i] = readAll(func(after uint64) (*pb.MessagePage, error) {
				return retry("http", func() (*pb.MessagePage, error) {
					var p pb.MessagePage
					code, err := httpGet(ctx, fmt.Sprintf("%s?after=%d&limit=1000", base, after), toks[i], &p)
					if code == http.StatusTooManyRequests {
						return nil, errHTTP429
					}
					return &p, err
				})
			})
		}()
	}
	// Another user's sends go through while the reads run.
	readsDone := make(chan struct{})
	go func() { wg.Wait(); close(readsDone) }()
	sends := 0
	for done := false; !done; {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := carol.SendText(sctx, "dave", fmt.Sprint("meanwhile ", sends))
		scancel()
		if err != nil {
			t.Fatalf("another user's send %d during the reads: %v", sends, err)
		}
		sends++
		select {
		case <-readsDone:
			done = true
		default:
		}
	}
	peak := stop()
	// What may be live at once: the heap before, the read budget, every
	// connection's queue full, and each client's page being decoded (a
	// page is at most a queue); the garbage collector lets the heap grow
	// to twice what is live before it collects; plus slack.
	bound := 2*(before.HeapAlloc+readMem+uint64(2*readers+2)*queueCap+uint64(2*readers)*queueCap) + 32<<20
	t.Logf("heap before %d MiB, peak %d MiB, bound %d MiB; %d reads refused with TOO_MANY_REQUESTS and retried; %d sends meanwhile",
		before.HeapAlloc>>20, peak>>20, bound>>20, refused.Load(), sends)
	if peak > bound {
		t.Errorf("heap peaked at %d MiB, over the bound of %d MiB", peak>>20, bound>>20)
	}
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		checkSeqs(t, fmt.Sprint("reader ", i), results[i], n+1) // the group's creation is seq 1
	}
}

var errHTTP429 = errors.New("HTTP 429")

// readAll pages forward through a conversation, returning an error instead
// of failing (it runs off the test goroutine).
func readAll(get func(after uint64) (*pb.MessagePage, error)) ([]*pb.Message, error) {
	var all []*pb.Message
	after := uint64(0)
	for {
		p, err := get(after)
		if err != nil {
			return all, err
		}
		for _, m := range p.Messages {
			m.Payload = nil // the seqs are checked; thirty-two copies of the conversation would swamp the heap measured
		}
		all = append(all, p.Messages...)
		if !p.HasMore {
			return all, nil
		}
		if len(p.Messages) == 0 {
			return all, fmt.Errorf("empty page with has_more after %d", after)
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
}

// The conversation list is paged by bytes too: a user with a hundred
// conversations whose last messages are 60 KiB each (6 MB in all, over the
// 4 MiB queue cap) gets them all on default settings, over the socket and
// HTTP, in pages that each fit.
func TestConversationListPagesByBytes(t *testing.T) {
	t.Parallel()
	const convs = 100
	ts := startServer(t, func(c *server.Config) { c.NoSync = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	payload := bytes.Repeat([]byte{'y'}, 60<<10)
	for i := range convs {
		peer, _ := ts.connect(t, fmt.Sprint("peer", i), "p", "phone", transports[2])
		if _, err := peer.Send(ctx, &pb.Send{To: "hub", ClientMsgId: "big", ContentType: "bin", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		peer.Close()
	}
	hub, _ := ts.connect(t, "hub", "h1", "phone", transports[1])
	var pages int
	seen := map[string]bool{}
	for tok := ""; ; {
		l, err := hub.Conversations(ctx, 0, tok)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		for _, c := range l.Conversations {
			if len(c.GetLastMessage().GetPayload()) != len(payload) {
				t.Fatalf("conversation %s without its last message", c.ConversationId)
			}
			seen[c.ConversationId] = true
		}
		if l.NextPageToken == "" {
			break
		}
		if len(l.Conversations) == 0 {
			t.Fatal("empty page with a next page token")
		}
		tok = l.NextPageToken
	}
	if len(seen) != convs || pages < 2 {
		t.Fatalf("socket: %d conversations in %d pages, want %d in several", len(seen), pages, convs)
	}
	all, err := hub.AllConversations(ctx)
	if err != nil || len(all) != convs {
		t.Fatalf("AllConversations: %d, %v", len(all), err)
	}
	token := ts.mint(t, "hub")
	seen = map[string]bool{}
	for tok := ""; ; {
		var l pb.ConversationList
		if _, err := httpGet(ctx, ts.httpBase+"/v1/conversations?limit=1000&page_token="+url.QueryEscape(tok), token, &l); err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Conversations {
			seen[c.ConversationId] = true
		}
		if l.NextPageToken == "" {
			break
		}
		tok = l.NextPageToken
	}
	if len(seen) != convs {
		t.Fatalf("http: %d conversations, want %d", len(seen), convs)
	}
	select {
	case <-hub.Done():
		t.Fatalf("connection closed: %v", hub.Err())
	default:
	}
}

// Read counts with reader lists are bounded by the page budget too: in a
// group of 500 members with 64-byte user ids who all read 100 messages, an
// answer for all 100 seqs would list 50,000 readers (over 3 MB). The answer
// covers the seqs asked first, within page_bytes, and asking again for the
// rest gets every count.
func TestReadCountListsBoundedByBytes(t *testing.T) {
	t.Parallel()
	const (
		members = 500
		msgs    = 100
	)
	ts := startServer(t, func(c *server.Config) { c.NoSync = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := make([]string, members-1)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%04d", strings.Repeat("m", 60), i)
	}
	g, err := adminClient(ts).CreateGroup(ctx, groupSpec("owner", ids...))
	if err != nil {
		t.Fatal(err)
	}
	owner := ts.dialOnly(t, "owner", "o1", "phone")
	var last uint64
	for i := range msgs {
		ack, err := owner.SendToConversation(ctx, g.ConversationId, "text", []byte(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Seq
	}
	for _, id := range ids {
		body := fmt.Sprintf(`{"read":{"conversationId":%q,"seq":"%d"}}`, g.ConversationId, last)
		if code := post(t, ts.httpBase+"/v1/admin/users/"+id+"/rpc", map[string]string{"X-Api-Key": testAPIKey}, json.RawMessage(body), nil); code != http.StatusOK {
			t.Fatalf("read as %s: HTTP %d", id, code)
		}
	}
	seqs := make([]uint64, msgs)
	for i := range seqs {
		seqs[i] = last - msgs + 1 + uint64(i)
	}
	pageBytes := ts.cfg.SendQueueBytes / 4
	if pageBytes == 0 {
		pageBytes = (4 << 20) / 4 // the defaults
	}
	eventually(t, "every member's read cursor is written", func() bool {
		l, err := owner.ReadCounts(ctx, g.ConversationId, seqs[len(seqs)-1])
		return err == nil && len(l.Counts) == 1 && l.Counts[0].Count == members-1
	})
	got := map[uint64]*pb.ReadCount{}
	answers := 0
	for rest := seqs; len(rest) > 0; answers++ {
		l, err := owner.ReadCounts(ctx, g.ConversationId, rest...)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Counts) == 0 {
			t.Fatal("an answer with no counts")
		}
		if size := gproto.Size(l); size > pageBytes+gproto.Size(l.Counts[0]) {
			t.Fatalf("an answer of %d bytes for %d seqs, over the page budget %d", size, len(l.Counts), pageBytes)
		}
		for _, c := range l.Counts {
			if c.Count != members-1 || len(c.Readers) != members-1 {
				t.Fatalf("seq %d: count %d, %d readers; want %d", c.Seq, c.Count, len(c.Readers), members-1)
			}
			got[c.Seq] = c
		}
		rest = rest[len(l.Counts):]
	}
	if len(got) != msgs || answers < 2 {
		t.Fatalf("%d seqs counted in %d answers", len(got), answers)
	}
}

// page_bytes must leave a page room in a connection's queue, and
// read_memory_bytes must hold at least two pages.
func TestPageConfigValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  func(*server.Config)
	}{
		{"page over half the queue", func(c *server.Config) { c.SendQueueBytes = 1 << 20; c.PageBytes = 600 << 10 }},
		{"page too small", func(c *server.Config) { c.PageBytes = 100 }},
		{"read memory under two pages", func(c *server.Config) { c.PageBytes = 1 << 20; c.ReadMemoryBytes = 1 << 20 }},
	} {
		cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0"}
		tc.mod(&cfg)
		srv, err := server.New(cfg)
		if err == nil {
			srv.Shutdown(context.Background())
			t.Errorf("%s: accepted", tc.name)
		} else if !strings.Contains(err.Error(), "page_bytes") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
