package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/bleveindex"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestReindex: the index is rebuilt from the store (a stale index's
// documents are gone), and a running server's data directory is refused.
func TestReindex(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	data := t.TempDir()
	st, err := pebblestore.Open(filepath.Join(data, "store"), pebblestore.Options{Logger: quiet, MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*pb.Message
	for i := range 25 {
		msgs = append(msgs, &pb.Message{ConversationId: "g:1", From: "ann", ClientMsgId: fmt.Sprint(i),
			Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, ContentType: "text", Payload: []byte(fmt.Sprintf("hello %d", i))})
	}
	if _, err := st.Append(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// A stale index with a document the store does not have.
	ix, err := bleveindex.Open(filepath.Join(data, bleveindex.Dir), bleveindex.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Apply(ctx, []search.Change{{Put: &search.Doc{ConversationID: "g:1", Seq: 99, Text: "hello ghost"}}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := reindex(ctx, data, &out, quiet); err == nil || !strings.Contains(err.Error(), "stop the server") {
		t.Fatalf("reindex with the store open: %v, want a refusal naming the server", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reindex(ctx, data, &out, quiet); err != nil {
		t.Fatalf("reindex: %v", err)
	}
	if !strings.Contains(out.String(), "reindexed 25 messages") {
		t.Fatalf("reindex said %q", out.String())
	}
	ix, err = bleveindex.Open(filepath.Join(data, bleveindex.Dir), bleveindex.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	r, err := ix.Search(ctx, search.Query{Text: "hello", Ranges: []search.Range{{ConversationID: "g:1", From: 1}}})
	if err != nil || len(r.Hits) != 25 {
		t.Fatalf("after reindex: %d hits, %v; want the 25 stored messages", len(r.Hits), err)
	}
	if err := reindex(ctx, t.TempDir(), &out, quiet); err == nil || !strings.Contains(err.Error(), "no embedded store") {
		t.Fatalf("reindex of an empty directory: %v", err)
	}
}
