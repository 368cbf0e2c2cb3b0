package chat

import (
	"context"
	"errors"

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
	// Decide asks the before-send hooks about ev, blocking up to their
	// timeouts (ctx may end it sooner): nil allows it, with ev's content
	// replaced when a hook replaced it; an *Error refuses it (REJECTED, or
	// UNAVAILABLE when a fail-closed hook could not decide).
	Decide(ctx context.Context, ev *hook.Event) error
	// Report keeps uid's report of m, the message as stored now.
	Report(ctx context.Context, uid string, m *pb.Message, reason, note string) error
}

// moderateSend runs the word filter on p's message, then, when a hook wants
// it, asks the hooks off the caller's goroutine (decideThen), so a gateway
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
	hooked := mod.Hooked(t)
	if !hooked && !waiting(sess) {
		if !s.submit(ctx, p) {
			return errUnavail
		}
		return nil
	}
	return s.decideThen(ctx, sess, p, func(ctx context.Context) error {
		if !hooked {
			return nil // only queued behind the session's earlier writes
		}
		ev := hook.Event{Type: t, ClientMsgID: msg.ClientMsgId, Sender: msg.From,
			ConversationID: msg.ConversationId, Recipient: msg.To,
			ContentType: msg.ContentType, Payload: msg.Payload, Attachments: hookAttachments(msg.Attachments)}
		if err := mod.Decide(ctx, &ev); err != nil {
			return err
		}
		return s.replaced(msg, &ev)
	})
}

// moderateEdit is moderateSend for an edit's new content (its event ev).
func (s *Service) moderateEdit(ctx context.Context, sess *session.Session, p *pendingSend, ev *pb.Message) error {
	mod := s.cfg.Moderator
	payload, err := mod.Filter(ev.ContentType, ev.Payload)
	if err != nil {
		return err
	}
	ev.Payload = payload
	hooked := mod.Hooked(hook.EventEdit)
	if !hooked && !waiting(sess) {
		if !s.submit(ctx, p) {
			return errUnavail
		}
		return nil
	}
	return s.decideThen(ctx, sess, p, func(ctx context.Context) error {
		if !hooked {
			return nil
		}
		he := hook.Event{Type: hook.EventEdit, ClientMsgID: ev.ClientMsgId, Sender: ev.From,
			ConversationID: ev.ConversationId, Recipient: ev.To, TargetSeq: ev.GetEvent().GetTargetSeq(),
			ContentType: ev.ContentType, Payload: ev.Payload}
		if err := mod.Decide(ctx, &he); err != nil {
			return err
		}
		return s.replaced(ev, &he)
	})
}

// moderateGroupChange asks the hooks about a user's change of a group
// (the admin API's changes are the operator's and are not asked about).
func (s *Service) moderateGroupChange(ctx context.Context, sess *session.Session, p *pendingSend) error {
	mod := s.cfg.Moderator
	hooked := !sess.System && mod.Hooked(hook.EventGroupChange)
	if !hooked && !waiting(sess) {
		if !s.submit(ctx, p) {
			return errUnavail
		}
		return nil
	}
	ev := p.change.Event
	return s.decideThen(ctx, sess, p, func(ctx context.Context) error {
		if !hooked {
			return nil
		}
		change, err := groupChangeJSON(ev)
		if err != nil {
			return err
		}
		he := hook.Event{Type: hook.EventGroupChange, ClientMsgID: ev.ClientMsgId, Sender: ev.From,
			ConversationID: ev.ConversationId, Change: change}
		return mod.Decide(ctx, &he)
	})
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

// waiting reports whether the session has a write still waiting for the hooks.
func waiting(sess *session.Session) bool {
	if sess.Moderating == nil {
		return false
	}
	select {
	case <-sess.Moderating:
		sess.Moderating = nil
		return false
	default:
		return true
	}
}

// decideThen runs decide on a goroutine of its own (at most
// Config.MaxModerating at once on the node), then queues p for storage, or
// answers the client decide's error. A session's writes are queued in the
// order it sent them: each waits for the one before it, so the hooks'
// answers for one session are awaited concurrently but never reorder its
// messages.
func (s *Service) decideThen(ctx context.Context, sess *session.Session, p *pendingSend, decide func(context.Context) error) error {
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
	prev, done := sess.Moderating, make(chan struct{})
	sess.Moderating = done
	s.moderators.Add(1)
	go func() {
		defer s.moderators.Done()
		defer func() { <-s.moderating }()
		defer close(done)
		err := decide(ctx)
		if prev != nil {
			<-prev
		}
		if err == nil {
			if !s.submit(ctx, p) {
				err = errUnavail
			}
		}
		if err != nil {
			if errors.Is(err, ctx.Err()) {
				err = errUnavail // the client has gone; the answer goes nowhere
			}
			s.replyErr(p.conn, p.reqID, err)
		}
	}()
	return nil
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
