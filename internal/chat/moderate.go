package chat

import (
	"context"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/internal/moderation/hook"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Moderator is what chat asks of the app's moderation (internal/moderation):
// the word filter, the before-send hooks, and users' reports.
type Moderator interface {
	// Filter runs the word filter on a message's content (no I/O): the
	// payload to store (masked, or payload itself), or an *Error
	// REJECTED.
	Filter(contentType string, payload []byte) ([]byte, error)
	// Hooked reports whether a before-send hook wants events of type t.
	Hooked(t hook.EventType) bool
	// Decide asks the before-send hooks about ev without blocking: done
	// gets nil to allow it, with ev's content replaced when a hook
	// replaced it, or an *Error refusing it (REJECTED, or UNAVAILABLE when a
	// fail-closed hook could not decide); exactly once, on this goroutine
	// or another, within the hooks' timeouts.
	Decide(ev *hook.Event, done func(error))
	// Report keeps uid's report of m, the message as stored now.
	Report(ctx context.Context, uid string, m *pb.Message, reason, note string) error
}

// moderateSend runs the word filter on p's message, then, when a hook wants
// it, asks the hooks and queues p once they answer (decideThen): a gateway
// worker never waits for the app.
func (s *Service) moderateSend(ctx context.Context, sess *session.Session, p *pendingSend) error {
	mod, msg := s.cfg.Moderator, p.msg
	payload, err := mod.Filter(msg.ContentType, msg.Payload)
	if err != nil {
		return err
	}
	msg.Payload = payload
	t := hook.EventDirectSend
	if isGroup(msg.ConversationId) {
		t = hook.EventGroupSend
	}
	var ask func(done func(error))
	if mod.Hooked(t) {
		ask = func(done func(error)) {
			ev := &hook.Event{Type: t, ClientMsgID: msg.ClientMsgId, Sender: msg.From,
				ConversationID: msg.ConversationId, Recipient: msg.To,
				ContentType: msg.ContentType, Payload: msg.Payload, Attachments: hookAttachments(msg.Attachments)}
			hs := s.traceHook(ctx, p.trace, string(t))
			mod.Decide(ev, func(err error) {
				if err == nil {
					err = s.replaced(msg, ev)
				}
				endSpan(hs, err)
				done(err)
			})
		}
	}
	return s.decideThen(ctx, sess, p, ask)
}

// moderateEdit is moderateSend for an edit's new content (its event ev).
func (s *Service) moderateEdit(ctx context.Context, sess *session.Session, p *pendingSend, ev *pb.Message) error {
	mod := s.cfg.Moderator
	payload, err := mod.Filter(ev.ContentType, ev.Payload)
	if err != nil {
		return err
	}
	ev.Payload = payload
	var ask func(done func(error))
	if mod.Hooked(hook.EventEdit) {
		ask = func(done func(error)) {
			he := &hook.Event{Type: hook.EventEdit, ClientMsgID: ev.ClientMsgId, Sender: ev.From,
				ConversationID: ev.ConversationId, Recipient: ev.To, TargetSeq: ev.GetEvent().GetTargetSeq(),
				ContentType: ev.ContentType, Payload: ev.Payload}
			mod.Decide(he, func(err error) {
				if err == nil {
					err = s.replaced(ev, he)
				}
				done(err)
			})
		}
	}
	return s.decideThen(ctx, sess, p, ask)
}

// moderateGroupChange asks the hooks about a user's change of a group
// (the admin API's changes are the operator's and are not asked about).
func (s *Service) moderateGroupChange(ctx context.Context, sess *session.Session, p *pendingSend) error {
	mod := s.cfg.Moderator
	var ask func(done func(error))
	if !sess.System && mod.Hooked(hook.EventGroupChange) {
		ev := p.change.Event
		change, err := groupChangeJSON(ev)
		if err != nil {
			return err
		}
		ask = func(done func(error)) {
			mod.Decide(&hook.Event{Type: hook.EventGroupChange, ClientMsgID: ev.ClientMsgId, Sender: ev.From,
				ConversationID: ev.ConversationId, Change: change}, done)
		}
	}
	return s.decideThen(ctx, sess, p, ask)
}

// replaced takes a hook's replaced content into msg, within a send's limits.
func (s *Service) replaced(msg *pb.Message, ev *hook.Event) error {
	if len(ev.ContentType) > maxContentType || len(ev.Payload) > int(s.cfg.MaxFrameBytes) {
		s.log.Warn("moderation hook replaced a message with content over the limits; refused", "sender", msg.From,
			"content_type_bytes", len(ev.ContentType), "payload_bytes", len(ev.Payload))
		return errTooLarge
	}
	msg.ContentType, msg.Payload = ev.ContentType, ev.Payload
	return nil
}

// heldWrites are a session's writes waiting for the hooks, in the order
// the session sent them: a write is queued for storage only once every
// write before it was, so the hooks' answers, which come in any order,
// never reorder a session's messages.
type heldWrites struct {
	mu       sync.Mutex
	writes   []*heldWrite
	flushing bool // a goroutine is queueing the decided front
}

type heldWrite struct {
	ctx     context.Context
	p       *pendingSend
	weight  int64 // of moderatingBytes
	decided bool
	err     error
}

// moderatingBytesMax bounds the bytes of the writes held for the hooks on
// a node (beside their count, Config.MaxModerating: one write may carry a
// frame's worth of payload).
const moderatingBytesMax = 64 << 20

// heldWeight is what a held write counts against moderatingBytesMax.
func heldWeight(p *pendingSend) int64 {
	m := p.msg
	if p.change != nil {
		m = p.change.Event
	}
	return int64(len(m.Payload)) + 512 // the message's other fields and ours
}

// empty: nothing held, and nothing being queued by a flushing goroutine
// (which has taken its writes off the list but may not have queued them
// yet: a write sent straight to the committer now could pass them).
func (h *heldWrites) empty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.writes) == 0 && !h.flushing
}

// held returns the session's held writes, made on first use. Only the
// session's frame handler (one frame at a time) calls it.
func held(sess *session.Session) *heldWrites {
	if h, ok := sess.Moderating.(*heldWrites); ok {
		return h
	}
	h := &heldWrites{}
	sess.Moderating = h
	return h
}

// decideThen queues p for storage once ask (nil: nothing to ask) has
// answered nil and every write the session held before it is queued, or
// answers the client ask's error. Nothing waits on a goroutine of its own:
// ask's answer arrives on a goroutine of the hooks' senders.
func (s *Service) decideThen(ctx context.Context, sess *session.Session, p *pendingSend, ask func(done func(error))) error {
	if ask == nil {
		h, _ := sess.Moderating.(*heldWrites)
		if h == nil || h.empty() {
			if !s.submit(ctx, p) {
				return errUnavail
			}
			return nil
		}
	}
	h := held(sess)
	// A bounded number of writes held on the node: past it the session's
	// frames wait here, as when the committer's queue is full.
	select {
	case s.moderating <- struct{}{}:
	default:
		select {
		case s.moderating <- struct{}{}:
		case <-ctx.Done():
			return errUnavail
		case <-s.stop:
			return errUnavail
		}
	}
	w := &heldWrite{ctx: ctx, p: p, weight: heldWeight(p)}
	if !s.moderatingBytes.TryAcquire(w.weight) {
		if err := s.moderatingBytes.Acquire(ctx, w.weight); err != nil {
			<-s.moderating
			return errUnavail
		}
	}
	s.moderators.Add(1)
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
	if ask == nil {
		s.decided(h, w, nil)
		return nil
	}
	ask(func(err error) { s.decided(h, w, err) })
	return nil
}

// decided records w's answer and queues (or refuses) the decided writes at
// the front, in order; one goroutine at a time does that for a session.
func (s *Service) decided(h *heldWrites, w *heldWrite, err error) {
	h.mu.Lock()
	w.decided, w.err = true, err
	if h.flushing {
		h.mu.Unlock()
		return // the goroutine flushing takes it if it is at the front
	}
	h.flushing = true
	for {
		n := 0
		for n < len(h.writes) && h.writes[n].decided {
			n++
		}
		if n == 0 {
			h.flushing = false
			h.mu.Unlock()
			return
		}
		front := append([]*heldWrite(nil), h.writes[:n]...)
		rest := copy(h.writes, h.writes[n:])
		clear(h.writes[rest:])
		h.writes = h.writes[:rest]
		h.mu.Unlock()
		for _, w := range front {
			err := w.err
			if err == nil && !s.submit(w.ctx, w.p) {
				err = errUnavail
			}
			if err != nil {
				if w.p.trace != nil {
					w.p.trace.refused(err)
				}
				s.replyErr(w.p.conn, w.p.reqID, err)
			}
			s.moderatingBytes.Release(w.weight)
			<-s.moderating
			s.moderators.Done()
		}
		h.mu.Lock()
	}
}

func hookAttachments(atts []*pb.Attachment) []hook.Attachment {
	if len(atts) == 0 {
		return nil
	}
	out := make([]hook.Attachment, len(atts))
	for i, a := range atts {
		out[i] = hook.Attachment{ID: a.Id, Name: a.Name, Size: a.Size, ContentType: a.ContentType}
	}
	return out
}

// groupChangeJSON renders a group change's event as the hooks get it:
// {"kind": "MESSAGE_KIND_…", "event": {…}} (the webhooks' JSON form).
func groupChangeJSON(ev *pb.Message) ([]byte, error) {
	inner := []byte("{}")
	if ev.Event != nil {
		var err error
		if inner, err = protojson.Marshal(ev.Event); err != nil {
			return nil, err
		}
	}
	kind, _ := protojson.Marshal(&pb.Message{Kind: ev.Kind})
	// kind is {"kind":"MESSAGE_KIND_…"}: splice the event in.
	out := append(kind[:len(kind)-1:len(kind)-1], `,"event":`...)
	out = append(out, inner...)
	return append(out, '}'), nil
}

// report keeps uid's report of a message they can read.
func (s *Service) report(ctx context.Context, uid string, r *pb.ReportMessage) error {
	if s.cfg.Moderator == nil {
		return errBadRequest
	}
	if r.Seq == 0 || r.ConversationId == "" || !validReason(r.Reason) || len(r.Note) > maxReportNote {
		return errBadRequest
	}
	m, err := s.readableMessage(ctx, uid, r.ConversationId, r.Seq)
	if err != nil {
		return err
	}
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.From == uid || m.From == "" {
		return errBadRequest // events, one's own and system messages are not reported
	}
	if m.Recalled {
		return errConflict // nothing left to report
	}
	return s.cfg.Moderator.Report(ctx, uid, m, r.Reason, r.Note)
}

const (
	maxReportReason = 32
	maxReportNote   = 1000
)

// validReason: 1-32 bytes of a-z, 0-9 and "_".
func validReason(r string) bool {
	if len(r) == 0 || len(r) > maxReportReason {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
