package chat

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// stallingAppends is the real store, except that while stall is set an
// Append waits until its context is done, as a store that stopped
// answering would.
type stallingAppends struct {
	store.Store
	stall atomic.Bool
}

func (s *stallingAppends) Append(ctx context.Context, msgs []*pb.Message) ([]store.AppendResult, error) {
	if s.stall.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Append(ctx, msgs)
}

// startService runs a Service over a real embedded store (wrapped by wrap
// when set) in t.TempDir().
func startService(t *testing.T, cfg Config, wrap func(store.Store) store.Store) (*Service, store.Store) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var st store.Store
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		st = wrap(st)
	}
	cfg.Logger = log
	reg := session.NewRegistry(session.KickSameDeviceType)
	s := New(cfg, st, route.NewInProcess(reg), reg, nil)
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		st.Close()
	})
	return s, st
}

// call runs f as uid and returns the answer; a call that gets none within
// 10 s (a hung request) fails the test.
func call(t *testing.T, s *Service, uid string, f *pb.ClientFrame) *pb.ServerFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.Call(ctx, auth.Claims{UserID: uid}, f)
	if err != nil {
		t.Fatalf("%T: no answer: %v", f.Body, err)
	}
	return out
}

func sendFrame(to, clientMsgID, text string) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{To: to, ClientMsgId: clientMsgID, ContentType: "text", Payload: []byte(text)}}}
}

// A store that stops answering fails the committer's batch after
// CommitTimeout: the sender is answered UNAVAILABLE instead of waiting
// forever, and a retry with the same client message id is stored once the
// store answers again.
func TestHungStoreFailsTheBatch(t *testing.T) {
	st := &stallingAppends{}
	s, _ := startService(t, Config{CommitTimeout: 50 * time.Millisecond}, func(inner store.Store) store.Store {
		st.Store = inner
		return st
	})
	st.stall.Store(true)
	out := call(t, s, "alice", sendFrame("bob", "m1", "hello"))
	if got := out.GetError().GetCode(); got != pb.ErrorCode_ERROR_CODE_UNAVAILABLE {
		t.Fatalf("a send into a hung store: %v, want UNAVAILABLE", out)
	}
	if got := s.Stats().SendsFailed; got != 1 {
		t.Fatalf("SendsFailed %d, want 1", got)
	}
	st.stall.Store(false)
	out = call(t, s, "alice", sendFrame("bob", "m1", "hello"))
	ack := out.GetSendAck()
	if ack == nil || ack.Duplicate || ack.Seq != 1 {
		t.Fatalf("the retry: %v, want a new message at seq 1", out)
	}
}

// A recall and an edit of one message, racing each other many times: the
// edit never brings the recalled payload back. Whichever the committer
// stores first wins; the other is answered CONFLICT, or, when the edit
// came first, the recall removes the edited content.
func TestRecallAndEditRace(t *testing.T) {
	s, st := startService(t, Config{}, nil)
	conv := DirectID("alice", "bob")
	const rounds = 200
	bothStored := 0 // rounds where the edit was stored first
	for i := range rounds {
		ack := call(t, s, "alice", sendFrame("bob", fmt.Sprint("m", i), "secret")).GetSendAck()
		if ack == nil {
			t.Fatalf("round %d: send not acknowledged", i)
		}
		recallF := &pb.ClientFrame{Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{ConversationId: conv, Seq: ack.Seq}}}
		editF := &pb.ClientFrame{Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{
			ConversationId: conv, Seq: ack.Seq, ContentType: "text", Payload: []byte("edited secret")}}}
		// Both start together; which is launched first alternates.
		frames := []*pb.ClientFrame{recallF, editF}
		if i%2 == 1 {
			frames[0], frames[1] = editF, recallF
		}
		answers := make([]*pb.ServerFrame, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, f := range frames {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				answers[j], errs[j] = s.Call(ctx, auth.Claims{UserID: "alice"}, f)
			}()
		}
		close(start)
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %T: no answer: %v", i, frames[j].Body, err)
			}
		}
		recall, edit := answers[0], answers[1]
		if i%2 == 1 {
			recall, edit = edit, recall
		}
		if recall.GetSendAck() == nil {
			t.Fatalf("round %d: recall of an unrecalled message refused: %v", i, recall)
		}
		if edit.GetSendAck() == nil {
			if code := edit.GetError().GetCode(); code != pb.ErrorCode_ERROR_CODE_CONFLICT {
				t.Fatalf("round %d: edit answered %v, want CONFLICT or stored", i, edit)
			}
		} else {
			bothStored++
			if edit.GetSendAck().Seq > recall.GetSendAck().Seq {
				t.Fatalf("round %d: an edit stored after the recall", i)
			}
		}
		m, err := st.GetMessage(context.Background(), conv, ack.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Recalled || len(m.Payload) != 0 || m.ContentType != "" {
			t.Fatalf("round %d: after recall and edit the message is %v, want recalled without content", i, m)
		}
	}
	if got := s.Stats().SendsFailed; got != 0 {
		t.Fatalf("SendsFailed %d: a refused change counted as a storage failure", got)
	}
	t.Logf("%d of %d rounds stored the edit before the recall", bothStored, rounds)
}
