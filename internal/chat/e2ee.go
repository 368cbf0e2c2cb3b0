package chat

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/e2ee"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// End-to-end encrypted groups (internal/e2ee, docs/e2ee.md). chat stays the
// sequencer: an accepted Commit is a change stored with an MLS step
// (store.MLSStep), so the store decides atomically, on any node, which
// Commit of an epoch is first. What is MLS is decided by package e2ee
// through the E2EE interface.

// E2EE is what chat asks of the MLS Delivery Service (internal/e2ee).
type E2EE interface {
	Publish(ctx context.Context, uid, device string, r *pb.PublishKeyPackages) (*pb.KeyPackageCount, error)
	Count(ctx context.Context, uid, device string) (*pb.KeyPackageCount, error)
	// Claim takes a package of each device of users the caller may message.
	Claim(ctx context.Context, ids []string) (*pb.ClaimedKeyPackages, error)
	// Epoch is conv's epoch; ok false when it is not encrypted.
	Epoch(ctx context.Context, conv string) (epoch uint64, ok bool, err error)
	// CheckMessage checks a non-Commit MLS message sent to encrypted conv.
	CheckMessage(ctx context.Context, conv string, payload []byte) error
	// Commit checks a Commit (and Welcome) and returns its step.
	Commit(conv string, commit, welcome []byte) (*store.MLSStep, error)
}

// mlsCache remembers which groups are encrypted. A group is made
// encrypted or not when it is created, atomically with its record, and
// never changes: an entry never goes stale, on any node.
type mlsCache struct {
	mu sync.Mutex
	m  map[string]bool
}

const mlsCacheMax = 1 << 16

// isEncrypted reports whether conv is an encrypted group. Only groups that
// exist are asked about (a caller checked membership or the group first).
func (s *Service) isEncrypted(ctx context.Context, conv string) (bool, error) {
	if !isGroup(conv) {
		return false, nil
	}
	s.mls.mu.Lock()
	enc, ok := s.mls.m[conv]
	s.mls.mu.Unlock()
	if ok {
		return enc, nil
	}
	_, enc, err := s.cfg.E2EE.Epoch(ctx, conv)
	if err != nil {
		return false, err
	}
	s.mls.mu.Lock()
	if s.mls.m == nil || len(s.mls.m) >= mlsCacheMax {
		s.mls.m = make(map[string]bool)
	}
	s.mls.m[conv] = enc
	s.mls.mu.Unlock()
	return enc, nil
}

// checkMLSSend is Send's check (buildMessage, after the target's): a send
// to an encrypted group carries an MLS application message or proposal and
// no plaintext for search; an MLS message goes nowhere else.
func (s *Service) checkMLSSend(ctx context.Context, msg *pb.Message) error {
	enc, err := s.isEncrypted(ctx, msg.ConversationId)
	if err != nil {
		return err
	}
	switch {
	case !enc && msg.ContentType == e2ee.MediaType:
		return reqerr.MLSInvalid
	case !enc:
		return nil
	case msg.ContentType != e2ee.MediaType:
		return reqerr.MLSRequired
	case msg.SearchText != "":
		return errBadRequest // plaintext the server would keep
	}
	return s.cfg.E2EE.CheckMessage(ctx, msg.ConversationId, msg.Payload)
}

// mlsGate refuses, before their handlers run, the requests an encrypted
// group does not take from its members: an edit that is not an MLS
// message, an open join, a member change without its Commit (or a Commit
// for a group that is not encrypted), a streamed (plaintext) message, an
// encrypted group made with members. Non-members get nil here: the
// handler's own answer does not tell them whether the group is encrypted.
func (s *Service) mlsGate(ctx context.Context, sess *session.Session, f *pb.ClientFrame) error {
	var conv string
	var commit []byte
	switch b := f.Body.(type) {
	case *pb.ClientFrame_CreateGroup:
		if b.CreateGroup.Encrypted && len(b.CreateGroup.UserIds) > 0 {
			return errBadRequest // members are added with the first Commit
		}
		return nil
	case *pb.ClientFrame_Edit:
		conv = b.Edit.ConversationId
	case *pb.ClientFrame_JoinGroup:
		conv = b.JoinGroup.ConversationId
	case *pb.ClientFrame_StreamOpen:
		conv = b.StreamOpen.ConversationId
	case *pb.ClientFrame_AddMembers:
		conv, commit = b.AddMembers.ConversationId, b.AddMembers.MlsCommit
	case *pb.ClientFrame_RemoveMember:
		conv, commit = b.RemoveMember.ConversationId, b.RemoveMember.MlsCommit
	default:
		return nil
	}
	if !isGroup(conv) {
		if commit != nil {
			return reqerr.MLSInvalid
		}
		return nil
	}
	g, err := s.group(ctx, conv)
	if err != nil {
		return nil // the handler answers
	}
	if _, member := g.members[sess.UserID]; !member && !sess.System {
		if _, join := f.Body.(*pb.ClientFrame_JoinGroup); !join {
			return nil
		}
		if !g.info.OpenJoin {
			return nil
		}
	}
	enc, err := s.isEncrypted(ctx, conv)
	if err != nil {
		return err
	}
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Edit:
		if !enc {
			if b.Edit.ContentType == e2ee.MediaType {
				return reqerr.MLSInvalid
			}
			return nil
		}
		if b.Edit.ContentType != e2ee.MediaType {
			return reqerr.MLSRequired
		}
		if b.Edit.SearchText != "" {
			return errBadRequest
		}
		return s.cfg.E2EE.CheckMessage(ctx, conv, b.Edit.Payload)
	case *pb.ClientFrame_AddMembers, *pb.ClientFrame_RemoveMember:
		_, removal := f.Body.(*pb.ClientFrame_RemoveMember)
		switch {
		case enc && len(commit) == 0 && removal && sess.System:
			// The app's moderators remove without a Commit, as a member
			// leaves: the remaining members' devices commit the removal.
			return nil
		case enc && len(commit) == 0:
			return reqerr.MLSRequired
		case !enc && commit != nil:
			return reqerr.MLSInvalid
		}
	default: // join, stream
		if enc {
			return reqerr.MLSRequired
		}
	}
	return nil
}

// withCommit puts the Commit (and Welcome) of a member change of an
// encrypted group into its change: the event carries them and the change
// moves the group's epoch. A plain group's change is left as it is
// (mlsGate refused a Commit for it).
func (s *Service) withCommit(ctx context.Context, ch *store.Change, commit, welcome []byte) error {
	if len(commit) == 0 {
		return nil
	}
	step, err := s.cfg.E2EE.Commit(ch.Event.ConversationId, commit, welcome)
	if err != nil {
		return err
	}
	ch.Event.ContentType, ch.Event.Payload, ch.Event.MlsWelcome = e2ee.MediaType, commit, welcome
	ch.MLS = step
	return nil
}

// mlsStepErr is the client's answer to a change the store refused for its
// MLS step; nil for other errors.
func mlsStepErr(err error) *Error {
	switch {
	case errors.Is(err, store.ErrStaleEpoch):
		return reqerr.MLSStaleEpoch
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrExists):
		return reqerr.MLSInvalid
	}
	return nil
}

// mlsCommit stores a Commit that changes no Parley membership (MlsCommit).
func (s *Service) mlsCommit(ctx context.Context, c Replier, sess *session.Session, reqID uint64, r *pb.MlsCommit) error {
	if len(r.ClientMsgId) == 0 || len(r.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	if len(r.Commit) > int(s.cfg.MaxFrameBytes) {
		return errTooLarge
	}
	conv := r.ConversationId
	if !isGroup(conv) {
		return reqerr.MLSInvalid
	}
	if err := s.maySendToGroup(ctx, sess.UserID, conv); err != nil {
		return err
	}
	enc, err := s.isEncrypted(ctx, conv)
	if err != nil {
		return err
	}
	if !enc {
		return reqerr.MLSInvalid
	}
	step, err := s.cfg.E2EE.Commit(conv, r.Commit, r.Welcome)
	if err != nil {
		return err
	}
	if err := s.checkQuota(ctx, sess.UserID, len(r.Commit)+len(r.Welcome)); err != nil {
		return err
	}
	// Never sender-only, even from a shadow-muted user: the group's epoch
	// moves for everyone, so everyone must get the Commit (it carries no
	// words of theirs).
	msg := &pb.Message{ConversationId: conv, From: sess.UserID, ClientMsgId: r.ClientMsgId, ContentType: e2ee.MediaType,
		Payload: r.Commit, MlsWelcome: r.Welcome, Kind: pb.MessageKind_MESSAGE_KIND_MLS_COMMIT}
	ch := &store.Change{Event: msg, MLS: step}
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, change: ch, start: time.Now().UnixNano()}
	p.after = func(res store.AppendResult, err error) {
		if err != nil {
			if e := mlsStepErr(err); e != nil {
				c.SendFrame(e.Frame(reqID))
				return
			}
			if errors.Is(err, store.ErrCorrupt) {
				c.SendFrame(errorFrame(reqID, pb.ErrorCode_ERROR_CODE_INTERNAL))
				return
			}
			c.SendFrame(errorFrame(reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
			return
		}
		c.SendFrame(sendAckFrame(reqID, res))
		if res.Duplicate {
			return
		}
		m := res.Msg
		s.deliverMessage(s.life, m, sess.ID)
		s.queueCursor(store.Cursor{ConversationID: conv, UserID: m.From, Delivered: m.Seq, Read: m.Seq})
	}
	if !s.submit(ctx, p) {
		return errUnavail
	}
	return nil
}

// claimKeyPackages hands out packages of the users the claimer may
// message; the others (unknown, blocking the claimer, strangers where
// they are refused) are left out alike.
func (s *Service) claimKeyPackages(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ClaimKeyPackages) error {
	if len(r.UserIds) > e2ee.MaxClaimUsers {
		return errTooLarge
	}
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	may := ids[:0]
	for _, u := range ids {
		if u != sess.UserID {
			err := s.mayMessage(ctx, sess.UserID, u)
			if err == errUnavail || err == errInternal {
				return err
			}
			if err != nil {
				continue
			}
		}
		may = append(may, u)
	}
	res, err := s.cfg.E2EE.Claim(ctx, may)
	if err != nil {
		return err
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_ClaimedKeyPackages{ClaimedKeyPackages: res}})
	return nil
}

// getMlsState answers a reader of conv with its MLS state.
func (s *Service) getMlsState(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.GetMlsState) error {
	if _, err := s.readLimit(ctx, sess.UserID, r.ConversationId); err != nil {
		return err
	}
	st := &pb.MlsState{ConversationId: r.ConversationId}
	if isGroup(r.ConversationId) {
		epoch, ok, err := s.cfg.E2EE.Epoch(ctx, r.ConversationId)
		if err != nil {
			return err
		}
		st.Encrypted, st.Epoch = ok, epoch
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_MlsState{MlsState: st}})
	return nil
}

// dispatchE2EE runs the E2EE frames; handled is false for other frames.
func (s *Service) dispatchE2EE(ctx context.Context, c Replier, sess *session.Session, f *pb.ClientFrame) (handled bool, err error) {
	id := f.Id
	count := func(n *pb.KeyPackageCount, err error) error {
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_KeyPackageCount{KeyPackageCount: n}})
		}
		return err
	}
	switch b := f.Body.(type) {
	case *pb.ClientFrame_PublishKeyPackages:
		return true, count(s.cfg.E2EE.Publish(ctx, sess.UserID, sessionDevice(sess), b.PublishKeyPackages))
	case *pb.ClientFrame_CountKeyPackages:
		return true, count(s.cfg.E2EE.Count(ctx, sess.UserID, sessionDevice(sess)))
	case *pb.ClientFrame_ClaimKeyPackages:
		return true, s.claimKeyPackages(ctx, c, sess, id, b.ClaimKeyPackages)
	case *pb.ClientFrame_MlsCommit:
		return true, s.mlsCommit(ctx, c, sess, id, b.MlsCommit)
	case *pb.ClientFrame_GetMlsState:
		return true, s.getMlsState(ctx, c, sess, id, b.GetMlsState)
	}
	return false, nil
}
