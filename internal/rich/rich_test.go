package rich

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

func TestSnippet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		n       int
		trunc   bool
	}{
		{"short", []byte("hello"), 5, false},
		{"exact", bytes.Repeat([]byte("a"), SnippetBytes), SnippetBytes, false},
		{"ascii", bytes.Repeat([]byte("a"), 1000), SnippetBytes, true},
		{"two-byte chars", []byte(strings.Repeat("é", 200)), SnippetBytes, true},       // 256 is a boundary
		{"three-byte chars", []byte(strings.Repeat("日", 100)), SnippetBytes - 1, true}, // 255
		{"four-byte chars", []byte(strings.Repeat("😀", 100)), SnippetBytes, true},      // 256
		{"binary", bytes.Repeat([]byte{0xff, 0x80}, 300), SnippetBytes, true},
	} {
		got, trunc := Snippet(tc.payload)
		if len(got) != tc.n || trunc != tc.trunc || !bytes.HasPrefix(tc.payload, got) {
			t.Errorf("%s: %d bytes, truncated %v; want %d, %v", tc.name, len(got), trunc, tc.n, tc.trunc)
		}
		if utf8.Valid(tc.payload) && !utf8.Valid(got) {
			t.Errorf("%s: the snippet of text is not valid UTF-8", tc.name)
		}
	}
	orig := []byte("abc")
	s, _ := Snippet(orig)
	s[0] = 'x'
	if orig[0] != 'a' {
		t.Fatal("the snippet shares the payload's bytes")
	}
}

func TestPreview(t *testing.T) {
	if p := Preview(7, nil); !p.Missing || p.Seq != 7 {
		t.Fatalf("missing original: %v", p)
	}
	m := &pb.Message{Seq: 3, From: "bob", ContentType: "text/plain", Payload: []byte("hi"), Attachments: []*pb.Attachment{{Id: "f"}}, EditedAt: 5}
	if p := Preview(3, m); string(p.Snippet) != "hi" || p.From != "bob" || p.Attachments != 1 || p.EditedAt != 5 || p.Missing || p.Recalled {
		t.Fatalf("preview: %v", p)
	}
	if p := Preview(3, &pb.Message{Seq: 3, From: "bob", Recalled: true}); !p.Recalled || len(p.Snippet) != 0 {
		t.Fatalf("recalled: %v", p)
	}
}

func TestValidEmoji(t *testing.T) {
	for _, ok := range []string{"👍", "❤️", ":tada:", "👨‍👩‍👧‍👦", "+1", strings.Repeat("x", MaxEmojiBytes)} {
		if !ValidEmoji(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a\tb", "\x00", "\u200b\n", strings.Repeat("x", MaxEmojiBytes+1), "\xff"} {
		if ValidEmoji(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The coalescer hands on one update per message per flush, the one with
// the highest version, whatever order they came in.
func TestCoalescer(t *testing.T) {
	var mu sync.Mutex
	var got [][]*pb.ReactionUpdate
	c := NewCoalescer(time.Hour, 3, func(us []*pb.ReactionUpdate) {
		mu.Lock()
		got = append(got, us)
		mu.Unlock()
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { c.Run(stop); close(done) }()
	c.Add(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 5})
	c.Add(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 7})
	c.Add(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 6}) // older: dropped
	c.Add(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 2, Version: 8})
	c.Add(&pb.ReactionUpdate{ConversationId: "g:b", Seq: 1, Version: 1}) // third message: flushed early
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no early flush at max messages")
		}
		time.Sleep(time.Millisecond)
	}
	c.Add(&pb.ReactionUpdate{ConversationId: "g:c", Seq: 9, Version: 2})
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	versions := map[string]uint64{}
	total := 0
	for _, us := range got {
		for _, u := range us {
			total++
			versions[u.ConversationId+"/"+string(rune('0'+u.Seq))] = u.Version
		}
	}
	if total != 4 || versions["g:a/1"] != 7 || versions["g:a/2"] != 8 || versions["g:b/1"] != 1 || versions["g:c/9"] != 2 {
		t.Fatalf("flushed %d updates: %v", total, versions)
	}
}

func TestStreams(t *testing.T) {
	var expired []*Stream
	var mu sync.Mutex
	r := NewStreams(StreamLimits{MaxOpen: 3, MaxPerUser: 2, MaxBytes: 10, Idle: time.Second, MaxLife: time.Hour},
		func(st *Stream) { mu.Lock(); expired = append(expired, st); mu.Unlock() })
	now := time.Now()
	a, err := r.Open("0-", "bot", &pb.Message{ConversationId: "g:a"}, now)
	if err != nil || !strings.HasPrefix(a.ID, "0-") {
		t.Fatal(a, err)
	}
	if _, err := r.Open("0-", "bot", &pb.Message{}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("0-", "bot", &pb.Message{}, now); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream of one user: %v", err)
	}
	other, err := r.Open("0-", "other", &pb.Message{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("0-", "third", &pb.Message{}, now); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("past the node's streams: %v", err)
	}
	if _, off, err := r.Append("bot", a.ID, "hello", now); err != nil || off != 0 {
		t.Fatal(off, err)
	}
	if _, off, err := r.Append("bot", a.ID, "world", now); err != nil || off != 5 {
		t.Fatal(off, err)
	}
	if _, _, err := r.Append("bot", a.ID, "!", now); !errors.Is(err, ErrStreamFull) {
		t.Fatalf("past MaxBytes: %v", err)
	}
	if _, _, err := r.Append("other", a.ID, "x", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("another user's stream: %v", err)
	}
	if _, err := r.Finish("other", a.ID); !errors.Is(err, ErrNoStream) {
		t.Fatalf("finishing another user's stream: %v", err)
	}
	st, err := r.Finish("bot", a.ID)
	if err != nil || string(st.Text()) != "helloworld" {
		t.Fatal(st, err)
	}
	if _, err := r.Finish("bot", a.ID); !errors.Is(err, ErrNoStream) {
		t.Fatalf("finishing twice: %v", err)
	}
	// "other" stays active; the bot's second stream goes idle.
	later := now.Add(2 * time.Second)
	if _, _, err := r.Append("other", other.ID, "x", later.Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	r.sweep(later, false)
	mu.Lock()
	if len(expired) != 1 || expired[0].Owner != "bot" {
		t.Fatalf("expired %v", expired)
	}
	mu.Unlock()
	if r.Len() != 1 {
		t.Fatalf("%d open after the sweep", r.Len())
	}
	r.EndAll()
	if r.Len() != 0 || len(expired) != 2 {
		t.Fatalf("EndAll left %d, expired %d", r.Len(), len(expired))
	}
	// The user's count was returned: they may open again.
	if _, err := r.Open("0-", "bot", &pb.Message{}, now); err != nil {
		t.Fatal(err)
	}
}
