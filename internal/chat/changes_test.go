package chat

import (
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The sender recalls their 1:1 message within the window: the reply is the
// RECALL event's ACK, the peer gets the event live, and history shows the
// message recalled without its content. Nobody else may recall it, and
// recalling it again (or recalling the event) is a conflict.
func TestRecall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	bobDev := h.connect("bob", "phone")
	ack := h.send("alice", textSend("oops", "bob", "", "oops, wrong chat"))
	conv := ack.ConversationId
	bobs := h.send("bob", textSend("what", "alice", "", "what?"))

	h.refused("bob", recallReq(conv, ack.Seq), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("carol", recallReq(conv, ack.Seq), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", recallReq(conv, 99), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", recallReq(conv, 0), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)

	rack := h.ok("alice", recallReq(conv, ack.Seq)).GetSendAck()
	if rack.GetConversationId() != conv || rack.GetSeq() != bobs.Seq+1 || rack.GetDuplicate() {
		t.Fatalf("recall answered %v, want the ack of a new event at seq %d", rack, bobs.Seq+1)
	}
	ev := bobDev.waitMessage("the recall event", func(m *pb.Message) bool { return m.Kind == pb.MessageKind_MESSAGE_KIND_RECALL })
	if ev.From != "alice" || ev.Seq != rack.Seq || ev.GetEvent().GetTargetSeq() != ack.Seq || len(ev.Payload) != 0 {
		t.Fatalf("bob got %v", ev)
	}
	h.refused("alice", recallReq(conv, ack.Seq), pb.ErrorCode_ERROR_CODE_CONFLICT)
	h.refused("alice", recallReq(conv, rack.Seq), pb.ErrorCode_ERROR_CODE_CONFLICT)

	hist := h.history("bob", conv, 0, 10)
	if m := messageAt(hist.Messages, ack.Seq); m == nil || !m.Recalled || len(m.Payload) != 0 || m.ContentType != "" || m.From != "alice" {
		t.Fatalf("history shows the recalled message as %v", m)
	}
	if m := messageAt(hist.Messages, bobs.Seq); m == nil || m.Recalled || string(m.Payload) != "what?" {
		t.Fatalf("the other message became %v", m)
	}
}

// Past the recall window the sender's recall is refused and the message stays.
func TestRecallAfterWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{RecallWindow: time.Millisecond})
	ack := h.send("alice", textSend("m", "bob", "", "said"))
	// Server times are in milliseconds: wait until the window is over by
	// that clock, not for a guessed duration.
	eventually(t, "the recall window to pass", func() bool { return time.Now().UnixMilli() > ack.ServerTime+1 })
	h.refused("alice", recallReq(ack.ConversationId, ack.Seq), pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED)
	if m := messageAt(h.sync("bob", ack.ConversationId, 0, 10).Messages, ack.Seq); m == nil || m.Recalled || string(m.Payload) != "said" {
		t.Fatalf("after a refused recall the message is %v", m)
	}
}

// The sender edits their message: the peer gets the EDIT event with the new
// content, history shows the edited payload and when it was edited. Only
// the sender edits, and only a plain message that is not recalled.
func TestEdit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	bobDev := h.connect("bob", "phone")
	ack := h.send("alice", textSend("typo", "bob", "", "helo"))
	conv := ack.ConversationId

	eack := h.ok("alice", editReq(conv, ack.Seq, "hello")).GetSendAck()
	if eack.GetSeq() != ack.Seq+1 || eack.GetDuplicate() {
		t.Fatalf("edit answered %v, want the ack of a new event at seq %d", eack, ack.Seq+1)
	}
	ev := bobDev.waitMessage("the edit event", func(m *pb.Message) bool { return m.Kind == pb.MessageKind_MESSAGE_KIND_EDIT })
	if ev.Seq != eack.Seq || string(ev.Payload) != "hello" || ev.GetEvent().GetTargetSeq() != ack.Seq || ev.From != "alice" {
		t.Fatalf("bob got %v", ev)
	}
	hist := h.history("bob", conv, 0, 10)
	if m := messageAt(hist.Messages, ack.Seq); m == nil || string(m.Payload) != "hello" || m.EditedAt < ack.ServerTime || m.Recalled {
		t.Fatalf("history shows the edited message as %v", m)
	}

	h.refused("bob", editReq(conv, ack.Seq, "hijacked"), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", editReq(conv, eack.Seq, "edit an event"), pb.ErrorCode_ERROR_CODE_CONFLICT)
	h.ok("alice", recallReq(conv, ack.Seq))
	h.refused("alice", editReq(conv, ack.Seq, "back again"), pb.ErrorCode_ERROR_CODE_CONFLICT)
	if m := messageAt(h.sync("bob", conv, 0, 10).Messages, ack.Seq); !m.Recalled || len(m.Payload) != 0 {
		t.Fatalf("the recalled message after a refused edit: %v", m)
	}
}
