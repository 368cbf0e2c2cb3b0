package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A recall on one node and an edit of the same message on another, racing
// many times over one PostgreSQL database: each node's committer checks the
// message it read, and the database refuses an update of a message recalled
// meanwhile by the other node, so the edit never brings a recalled payload
// back. The edit is either stored first (the recall then clears it) or
// answered CONFLICT.
func TestRecallEditRaceAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 2, nil)
	phone, _ := nodes[0].connect(t, "alice", "phone-1", "phone", transports[0])
	desk, _ := nodes[1].connect(t, "alice", "desk-1", "desktop", transports[0])
	ctx := ctx10(t)
	conv := ""
	const rounds = 40
	for i := range rounds {
		ack, err := phone.SendText(ctx, "bob", fmt.Sprint("secret ", i))
		if err != nil {
			t.Fatal(err)
		}
		conv = ack.ConversationId
		var recall, edit *pb.SendAck
		var recallErr, editErr error
		var wg sync.WaitGroup
		wg.Add(2)
		start := make(chan struct{})
		go func() {
			defer wg.Done()
			<-start
			recall, recallErr = phone.Recall(ctx, conv, ack.Seq)
		}()
		go func() {
			defer wg.Done()
			<-start
			edit, editErr = desk.Edit(ctx, conv, ack.Seq, "text", []byte("edited secret"))
		}()
		close(start)
		wg.Wait()
		if recallErr != nil {
			t.Fatalf("round %d: recall: %v", i, recallErr)
		}
		var ce *client.Error
		switch {
		case editErr == nil:
			if edit.Seq > recall.Seq {
				t.Fatalf("round %d: an edit stored after the recall", i)
			}
		case !errors.As(editErr, &ce) || ce.Code != pb.ErrorCode_ERROR_CODE_CONFLICT:
			t.Fatalf("round %d: edit: %v, want stored or CONFLICT", i, editErr)
		}
		page, err := phone.History(ctx, conv, ack.Seq+1, 1)
		if err != nil {
			t.Fatal(err)
		}
		m := messageAt(page.Messages, ack.Seq)
		if m == nil || !m.Recalled || len(m.Payload) != 0 {
			t.Fatalf("round %d: the message after recall and edit: %v, want recalled without content", i, m)
		}
	}
}
