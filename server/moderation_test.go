package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/webhook/signature"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

const hookSecret = "moderation-hook-secret-0123456789"

// hookEvent is a before-send hook request as docs/moderation.md specifies
// it, decoded without the server's types.
type hookEvent struct {
	Type           string          `json:"type"`
	ClientMsgID    string          `json:"client_msg_id"`
	Sender         string          `json:"sender"`
	ConversationID string          `json:"conversation_id"`
	Recipient      string          `json:"recipient"`
	TargetSeq      string          `json:"target_seq"`
	ContentType    string          `json:"content_type"`
	Text           *string         `json:"text"`
	Payload        *string         `json:"payload"`
	Attachments    json.RawMessage `json:"attachments"`
	Change         json.RawMessage `json:"change"`
	IdempotencyKey string          `json:"idempotency_key"`
	MessageID      string          `json:"message_id"`
}

// appHook is a real local HTTP hook: it checks each request's signature
// and body, and answers by the text: "bad…" rejects, "swap…" replaces,
// "slow…" answers after delay, anything else is allowed.
type appHook struct {
	t      *testing.T
	srv    *httptest.Server
	delay  atomic.Int64 // ns, for "slow…"
	broken atomic.Bool  // answer garbage
	mu     sync.Mutex
	seen   []hookEvent
}

func newAppHook(t *testing.T) *appHook {
	h := &appHook{t: t}
	h.delay.Store(int64(time.Second))
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *appHook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	ts := r.Header.Get("X-Parley-Timestamp")
	if !signature.Verify(hookSecret, ts, r.Header.Get("X-Parley-Signature"), body) {
		h.t.Errorf("hook: bad signature over %s", body)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev hookEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		h.t.Errorf("hook: body %s: %v", body, err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if r.Header.Get("Idempotency-Key") != ev.IdempotencyKey {
		h.t.Errorf("hook: Idempotency-Key %q, body %q", r.Header.Get("Idempotency-Key"), ev.IdempotencyKey)
	}
	h.mu.Lock()
	h.seen = append(h.seen, ev)
	h.mu.Unlock()
	if h.broken.Load() {
		io.WriteString(w, `{"verdict":"fine"}`)
		return
	}
	text := ""
	if ev.Text != nil {
		text = *ev.Text
	}
	switch {
	case strings.HasPrefix(text, "bad"):
		io.WriteString(w, `{"action":"reject","code":"spam","reason":"No spam here, please"}`)
	case strings.HasPrefix(text, "swap"):
		io.WriteString(w, `{"action":"replace","content_type":"text","text":"[removed by the app]"}`)
	case strings.HasPrefix(text, "slow"):
		select {
		case <-time.After(time.Duration(h.delay.Load())):
		case <-r.Context().Done():
		}
		io.WriteString(w, `{"action":"allow"}`)
	case ev.Type == "group.change" && strings.Contains(string(ev.Change), "forbidden"):
		io.WriteString(w, `{"action":"reject","code":"bad_name","reason":"Pick another name"}`)
	default:
		io.WriteString(w, `{"action":"allow"}`)
	}
}

func (h *appHook) events() []hookEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookEvent(nil), h.seen...)
}

func (h *appHook) count(clientMsgID string) int {
	n := 0
	for _, ev := range h.events() {
		if ev.ClientMsgID == clientMsgID {
			n++
		}
	}
	return n
}

func withHook(url, policy string, timeout time.Duration, events ...string) func(*server.Config) {
	return func(c *server.Config) {
		c.ModerationHooks = []server.ModerationHook{{Name: "app", URL: url, Secret: hookSecret,
			Policy: policy, Timeout: timeout, Events: events}}
	}
}

var allHookEvents = []string{"message.direct", "message.group", "message.edit", "group.change"}

func sendTo(ctx context.Context, c *client.Client, to, text string) (*pb.SendAck, error) {
	return c.Send(ctx, &pb.Send{To: to, ContentType: "text", Payload: []byte(text)})
}

// The hook allows, rejects (the sender sees its code and reason), and
// replaces (what is stored and delivered is the app's content), for 1:1
// and group sends, edits and group changes.
func TestHookDecides(t *testing.T) {
	t.Parallel()
	h := newAppHook(t)
	ts := startServer(t, withHook(h.srv.URL+"/hook", "fail_closed", 2*time.Second, allHookEvents...))
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[0])

	ack, err := sendTo(ctx, alice, "bob", "hello")
	if err != nil {
		t.Fatalf("allowed send: %v", err)
	}
	_, err = sendTo(ctx, alice, "bob", "bad deal")
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_REJECTED || pe.RejectCode != "spam" ||
		pe.Reason != "No spam here, please" || pe.Temporary() {
		t.Fatalf("rejected send: %v, want REJECTED spam with the app's reason, not temporary", err)
	}
	swapped, err := sendTo(ctx, alice, "bob", "swap this")
	if err != nil {
		t.Fatalf("replaced send: %v", err)
	}
	eventually(t, "bob gets two messages", func() bool { return bobRec.count() == 2 })
	got := bobRec.messages()
	if string(got[0].Payload) != "hello" || string(got[1].Payload) != "[removed by the app]" || got[1].Seq != swapped.Seq {
		t.Errorf("bob got %q, %q; want the allowed text and the app's replacement", got[0].Payload, got[1].Payload)
	}
	page, err := alice.History(ctx, ack.ConversationId, 0, 10)
	if err != nil || len(page.Messages) != 2 || string(page.Messages[1].Payload) != "[removed by the app]" {
		t.Errorf("stored: %v, %v; want two messages, the second replaced", page, err)
	}

	// The request: sender, recipient, conversation, content as text.
	first := h.events()[0]
	if first.Type != "message.direct" || first.Sender != "alice" || first.Recipient != "bob" ||
		first.ConversationID != ack.ConversationId || first.ContentType != "text" || first.Text == nil || *first.Text != "hello" ||
		first.IdempotencyKey != "alice:"+first.ClientMsgID {
		t.Errorf("hook got %+v", first)
	}

	// Edits are asked about too.
	if _, err := alice.Edit(ctx, ack.ConversationId, ack.Seq, "text", []byte("bad edit")); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_REJECTED) {
		t.Errorf("rejected edit: %v", err)
	}
	if _, err := alice.Edit(ctx, ack.ConversationId, ack.Seq, "text", []byte("swap edit")); err != nil {
		t.Fatalf("replaced edit: %v", err)
	}
	m, err := alice.History(ctx, ack.ConversationId, ack.Seq+1, 1)
	if err != nil || string(m.Messages[0].Payload) != "[removed by the app]" {
		t.Errorf("edited message: %v, %v; want the replacement", m, err)
	}
	var edit *hookEvent
	for _, ev := range h.events() {
		if ev.Type == "message.edit" {
			edit = &ev
			break
		}
	}
	if edit == nil || edit.TargetSeq != strconv.FormatUint(ack.Seq, 10) {
		t.Errorf("edit event %+v, want target_seq %d", edit, ack.Seq)
	}

	// Groups: the send and the change.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "book club", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatalf("create group: %v", err)
	}
	if _, err := alice.Send(ctx, &pb.Send{ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("bad group msg")}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_REJECTED) {
		t.Errorf("rejected group send: %v", err)
	}
	if _, err := alice.Send(ctx, &pb.Send{ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("hi all")}); err != nil {
		t.Errorf("group send: %v", err)
	}
	name := "forbidden club"
	_, err = alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: g.ConversationId, Name: &name})
	if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_REJECTED || pe.RejectCode != "bad_name" {
		t.Errorf("rejected group change: %v", err)
	}
	info, err := alice.GetGroup(ctx, g.ConversationId)
	if err != nil || info.Name != "book club" {
		t.Errorf("group after a rejected change: %v, %v", info, err)
	}
	types := map[string]int{}
	for _, ev := range h.events() {
		types[ev.Type]++
	}
	if types["message.group"] != 2 || types["group.change"] < 2 { // created, renamed
		t.Errorf("hook saw %v", types)
	}
}

// A slow hook: its timeout ends the call and its policy decides: fail
// closed answers UNAVAILABLE (temporary: retry), fail open stores.
func TestHookTimeoutPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"fail_closed", "fail_open"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			h := newAppHook(t)
			ts := startServer(t, withHook(h.srv.URL+"/hook", policy, 100*time.Millisecond, "message.direct"))
			ctx := ctx10(t)
			alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
			ack, err := sendTo(ctx, alice, "bob", "slow one")
			if policy == "fail_closed" {
				var pe *client.Error
				if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_UNAVAILABLE || !pe.Temporary() {
					t.Fatalf("fail closed: %v, want a temporary UNAVAILABLE", err)
				}
				return
			}
			if err != nil || ack.Seq != 1 {
				t.Fatalf("fail open: %v, %v; want stored", ack, err)
			}
			_, body := adminGet(t, ts.httpBase+"/metrics")
			if !strings.Contains(body, `parley_moderation_hook_failures_total{hook="app",failure="timeout"} 1`) {
				t.Errorf("metrics do not count the timeout:\n%s", grepLines(body, "moderation"))
			}
		})
	}
}

// A hook that is down: fail open lets sends through at once while the
// circuit breaker is open, counted in /metrics; garbage answers count as
// malformed.
func TestHookDownAndMalformed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook"
	ln.Close() // nothing listens: connection refused
	ts := startServer(t, withHook(url, "fail_open", 500*time.Millisecond, "message.direct"))
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	for i := range 8 {
		if _, err := sendTo(ctx, alice, "bob", fmt.Sprint("hi ", i)); err != nil {
			t.Fatalf("send %d with the hook down, fail open: %v", i, err)
		}
	}
	_, body := adminGet(t, ts.httpBase+"/metrics")
	if !strings.Contains(body, `parley_moderation_hook_breaker_open{hook="app"} 1`) ||
		!strings.Contains(body, `parley_moderation_hook_failures_total{hook="app",failure="breaker_open"} 3`) ||
		!strings.Contains(body, `parley_moderation_hook_failures_total{hook="app",failure="error"} 5`) {
		t.Errorf("want 5 errors, then the breaker open for the other 3:\n%s", grepLines(body, "moderation_hook"))
	}

	h := newAppHook(t)
	h.broken.Store(true)
	ts2 := startServer(t, withHook(h.srv.URL+"/hook", "fail_closed", time.Second, "message.direct"))
	carol, _ := ts2.connect(t, "carol", "c1", "phone", transports[0])
	// The SDK retries UNAVAILABLE itself, with the same client message id.
	if _, err := sendTo(ctx, carol, "dave", "hi"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
		t.Errorf("malformed answer, fail closed: %v", err)
	}
	_, body = adminGet(t, ts2.httpBase+"/metrics")
	if strings.Contains(body, `parley_moderation_hook_failures_total{hook="app",failure="malformed"} 0`) {
		t.Errorf("malformed not counted:\n%s", grepLines(body, "moderation_hook"))
	}
}

// A client that retries while the hook is still deciding gets the first
// decision: the hook is asked once, and one message is stored.
func TestHookRetryOneDecision(t *testing.T) {
	t.Parallel()
	h := newAppHook(t)
	h.delay.Store(int64(400 * time.Millisecond))
	ts := startServer(t, withHook(h.srv.URL+"/hook", "fail_closed", 3*time.Second, "message.direct"))
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[2])
	send := &pb.Send{To: "bob", ClientMsgId: "m-retry", ContentType: "text", Payload: []byte("slow but fine")}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := alice.Do(short, &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: send}})
	cancel()
	if err == nil {
		t.Fatal("the first attempt was answered before the hook did")
	}
	acks := make([]*pb.SendAck, 2)
	for i := range acks {
		out, err := alice.Do(ctx10(t), &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: send}})
		if err != nil || out.GetSendAck() == nil {
			t.Fatalf("retry %d: %v, %v", i, out, err)
		}
		acks[i] = out.GetSendAck()
	}
	if acks[0].Seq != acks[1].Seq || !acks[1].Duplicate {
		t.Errorf("retries: %v then %v; want one message, the second a duplicate", acks[0], acks[1])
	}
	eventually(t, "bob gets the message", func() bool { return bobRec.count() >= 1 })
	time.Sleep(100 * time.Millisecond)
	if n := bobRec.count(); n != 1 {
		t.Errorf("bob got %d messages, want 1", n)
	}
	if n := h.count("m-retry"); n != 1 {
		t.Errorf("the hook was asked %d times about one client message id, want 1", n)
	}
}

// With the hook answering at random speeds, a sender's pipelined messages
// are stored and delivered in the order sent.
func TestHookKeepsOrder(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			time.Sleep(15 * time.Millisecond)
		}
		io.WriteString(w, `{"action":"allow"}`)
	}))
	t.Cleanup(srv.Close)
	ts := startServer(t, withHook(srv.URL, "fail_closed", 3*time.Second, "message.direct"))
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[2])
	alice := dialRawTCP(t, ts.tcpAddr)
	if f := alice.auth(ts.mint(t, "alice"), "a1", "cli"); f.GetAuthOk() == nil {
		t.Fatal(f)
	}
	const total = 200
	for i := range total { // pipelined: every frame written before any answer is read
		alice.send(&pb.ClientFrame{Id: uint64(i + 1), Body: &pb.ClientFrame_Send{Send: &pb.Send{
			To: "bob", ClientMsgId: fmt.Sprintf("o-%03d", i), ContentType: "text", Payload: []byte(strconv.Itoa(i))}}})
	}
	for acked := 0; acked < total; {
		f := alice.read()
		if f.GetError() != nil {
			t.Fatalf("send %d: %v", f.Id, f.GetError())
		}
		if f.GetSendAck() != nil {
			acked++
		}
	}
	eventually(t, "bob gets every message", func() bool { return bobRec.count() == total })
	last := -1
	for _, m := range bobRec.messages() {
		i, _ := strconv.Atoi(strings.TrimPrefix(m.ClientMsgId, "o-"))
		if i < last {
			t.Fatalf("message %d delivered after %d", i, last)
		}
		last = i
	}
}

// The word filter: a configuration list (from a file, re-read when it
// changes) masks, an admin API list rejects; both in several scripts.
func TestWordFilter(t *testing.T) {
	t.Parallel()
	words := filepath.Join(t.TempDir(), "words.txt")
	if err := os.WriteFile(words, []byte("# masked\ndarn\n笨蛋\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *server.Config) {
		c.WordFilterLists = []server.WordFilterList{{Name: "mild", Action: "mask", WordsFile: words, Leet: true}}
	})
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[1])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[1])
	for i, c := range []struct{ in, out string }{
		{"oh DARN it", "oh **** it"},
		{"ｄａｒｎ", "****"},   // full width
		{"d4rn", "****"},   // leet
		{"你是笨蛋吗", "你是**吗"}, // CJK, no word boundaries
		{"darning is fine", "****ing is fine"},
	} {
		if _, err := sendTo(ctx, alice, "bob", c.in); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		eventually(t, "delivery", func() bool { return bobRec.count() == i+1 })
		ms := bobRec.messages()
		if got := string(ms[len(ms)-1].Payload); got != c.out {
			t.Errorf("%q arrived as %q, want %q", c.in, got, c.out)
		}
	}
	// Opaque payloads pass.
	if _, err := alice.Send(ctx, &pb.Send{To: "bob", ContentType: "application/octet-stream", Payload: []byte("darn")}); err != nil {
		t.Fatal(err)
	}

	admin := adminClient(ts)
	if err := admin.PutWordList(ctx, client.WordList{Name: "scam", Action: "reject", Words: []string{"free bitcoin", "ЛОХ"}, IgnoreSeparators: true}); err != nil {
		t.Fatalf("put list: %v", err)
	}
	for _, in := range []string{"get FREE b.i.t.c.o.i.n now", "ты лох"} {
		_, err := sendTo(ctx, alice, "bob", in)
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_REJECTED || pe.RejectCode != "word_filter" {
			t.Errorf("%q: %v, want REJECTED word_filter", in, err)
		}
	}
	if err := admin.PutWordList(ctx, client.WordList{Name: "scam", Action: "bogus"}); !isHTTP(err, http.StatusBadRequest) {
		t.Errorf("a list with a bad action: %v", err)
	}
	if err := admin.DeleteWordList(ctx, "scam"); err != nil {
		t.Fatal(err)
	}
	if _, err := sendTo(ctx, alice, "bob", "free bitcoin"); err != nil {
		t.Errorf("after the list is deleted: %v", err)
	}

	// The file changes: the new word is masked within a second or so.
	later := time.Now().Add(2 * time.Second)
	if err := os.WriteFile(words, []byte("heck\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(words, later, later)
	eventually(t, "the changed file is used", func() bool {
		if _, err := sendTo(ctx, alice, "bob", "heck"); err != nil {
			t.Fatal(err)
		}
		ms := bobRec.messages()
		return len(ms) > 0 && string(ms[len(ms)-1].Payload) == "****"
	})
}

// Reports: a user reports a message they can read; the report keeps the
// message as it was, whatever happens to it later; the admin API lists,
// resolves and dismisses; nothing tells a user about messages they cannot read.
func TestReports(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	ack, err := sendTo(ctx, alice, "bob", "you will regret this")
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.ReportMessage(ctx, ack.ConversationId, ack.Seq, "abuse", "threatening me"); err != nil {
		t.Fatalf("report: %v", err)
	}
	if err := bob.ReportMessage(ctx, ack.ConversationId, ack.Seq, "abuse", "again"); err != nil {
		t.Fatalf("reporting again: %v", err)
	}
	// Carol is not in the conversation: the same answer as for one that does not exist.
	for _, seq := range []uint64{ack.Seq, 99} {
		if err := carol.ReportMessage(ctx, ack.ConversationId, seq, "spam", ""); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
			t.Errorf("carol reports seq %d: %v", seq, err)
		}
	}
	if err := bob.ReportMessage(ctx, ack.ConversationId, ack.Seq, "Not A Code", ""); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Errorf("bad reason: %v", err)
	}
	if err := alice.ReportMessage(ctx, ack.ConversationId, ack.Seq, "spam", ""); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Errorf("reporting one's own message: %v", err)
	}
	// The evidence stays when the sender edits and recalls.
	if _, err := alice.Edit(ctx, ack.ConversationId, ack.Seq, "text", []byte("have a nice day")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Recall(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatal(err)
	}
	admin := adminClient(ts)
	reports, next, err := admin.Reports(ctx, "", "", 10)
	if err != nil || len(reports) != 1 || next != "" {
		t.Fatalf("open reports: %v, %q, %v; want one", reports, next, err)
	}
	r := reports[0]
	var m pb.Message
	if err := protojson.Unmarshal(r.Message, &m); err != nil {
		t.Fatal(err)
	}
	if r.Reporter != "bob" || r.Reason != "abuse" || r.Note != "threatening me" || r.Status != "open" ||
		string(m.Payload) != "you will regret this" || m.From != "alice" || m.Seq != ack.Seq {
		t.Errorf("report %+v with message %v", r, &m)
	}
	resolved, err := admin.ResolveReport(ctx, r.ID, "warned alice")
	if err != nil || resolved.Status != "resolved" || resolved.Resolution != "warned alice" || resolved.ClosedBy == "" || resolved.ClosedAt == nil {
		t.Fatalf("resolve: %+v, %v", resolved, err)
	}
	if _, err := admin.DismissReport(ctx, r.ID, ""); !isHTTP(err, http.StatusConflict) {
		t.Errorf("closing a closed report: %v", err)
	}
	if open, _, err := admin.Reports(ctx, "open", "", 10); err != nil || len(open) != 0 {
		t.Errorf("open after resolving: %v, %v", open, err)
	}
	if all, _, err := admin.Reports(ctx, "all", "", 10); err != nil || len(all) != 1 {
		t.Errorf("all: %v, %v", all, err)
	}
}

// A ban disables the user, closes every session, refuses their tokens and
// deletes their recent messages for everyone (moderated recalls); the
// audit log names the API key that did it.
func TestBan(t *testing.T) {
	t.Parallel()
	const opsKey = "ops-key-0123456789abcdef"
	ts := startServer(t, func(c *server.Config) { c.AdminAPIKeys = append(c.AdminAPIKeys, "ops:"+opsKey) })
	ctx := ctx10(t)
	admin := adminClient(ts)
	if _, err := admin.CreateUser(ctx, "mallory", ""); err != nil {
		t.Fatal(err)
	}
	token := ts.mint(t, "mallory")
	m1, m1Rec := ts.connectToken(t, token, "m1", "phone", transports[0])
	_, m2Rec := ts.connectToken(t, token, "m2", "desktop", transports[2])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[0])
	var seqs []uint64
	conv := ""
	for i := range 3 {
		ack, err := sendTo(ctx, m1, "bob", fmt.Sprint("spam ", i))
		if err != nil {
			t.Fatal(err)
		}
		seqs, conv = append(seqs, ack.Seq), ack.ConversationId
	}
	eventually(t, "bob gets the spam", func() bool { return bobRec.count() == 3 })

	res, err := client.NewAdmin(ts.httpBase, opsKey).Ban(ctx, "mallory", "spam run", 1)
	if err != nil || res.SessionsClosed != 2 || res.MessagesRemoved != 3 {
		t.Fatalf("ban: %+v, %v; want 2 sessions closed, 3 messages removed", res, err)
	}
	for _, rec := range []*recorder{m1Rec, m2Rec} {
		eventually(t, "mallory's sessions close", func() bool { closed, _ := rec.isClosed(); return closed })
	}
	if _, _, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: token, DeviceID: "m3", DeviceType: "web"}); err == nil {
		t.Error("a banned user's token still works")
	}
	eventually(t, "bob gets three moderated recalls", func() bool {
		n := 0
		for _, m := range bobRec.messages() {
			if m.Kind == pb.MessageKind_MESSAGE_KIND_RECALL && m.GetEvent().GetModerated() {
				n++
			}
		}
		return n == 3
	})
	bob, _ := ts.connect(t, "bob", "b2", "web", transports[1])
	page, err := bob.History(ctx, conv, seqs[2]+1, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && (!m.Recalled || len(m.Payload) > 0) {
			t.Errorf("message %d kept after the ban: %v", m.Seq, m)
		}
	}

	entries, _, err := admin.AuditLog(ctx, 0, 10)
	if err != nil || len(entries) == 0 {
		t.Fatalf("audit: %v, %v", entries, err)
	}
	e := entries[0]
	if e.Actor != "ops" || e.Action != "POST /v1/admin/users/{id}/ban" || e.Target != "/v1/admin/users/mallory/ban" ||
		!strings.Contains(string(e.Detail), `"reason":"spam run"`) || !strings.Contains(string(e.Detail), `"messages_removed":3`) {
		t.Errorf("audit entry %+v (%s)", e, e.Detail)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "GET ") || e.Action == "POST /v1/admin/tokens" {
			t.Errorf("audited %q", e.Action)
		}
	}
	// The log cannot be changed through the API.
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		if code, _ := httpDo(t, method, ts.httpBase+"/v1/admin/audit", map[string]string{"X-Api-Key": testAPIKey}, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("%s /v1/admin/audit: %d, want 405", method, code)
		}
	}

	if err := admin.Unban(ctx, "mallory"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: ts.mint(t, "mallory"), DeviceID: "m4", DeviceType: "web"}); err != nil {
		t.Errorf("after unban, a new token: %v", err)
	}
}

// An admin deletes any message for everyone: a RECALL event marked
// moderated, whatever its age.
func TestAdminDeleteMessage(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[2])
	ack, err := sendTo(ctx, alice, "bob", "against the rules")
	if err != nil {
		t.Fatal(err)
	}
	if err := adminClient(ts).DeleteMessage(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the moderated recall", func() bool {
		ms := bobRec.messages()
		m := ms[len(ms)-1]
		return m.Kind == pb.MessageKind_MESSAGE_KIND_RECALL && m.GetEvent().GetModerated() && m.GetEvent().GetTargetSeq() == ack.Seq
	})
}

func grepLines(body, sub string) string {
	var out []string
	for line := range strings.Lines(body) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
