package chat

import (
	"context"
	"errors"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// fileURL answers FileUrl: a file is readable by its uploader, and by whoever
// may read the message (conversation, seq) that carries it while that
// message is not recalled nor deleted for them. Every refusal is the same
// PERMISSION_DENIED, whether the file, the message or the conversation
// exists or not.
func (s *Service) fileURL(ctx context.Context, uid string, r *pb.FileUrl) (*pb.FileUrlResult, error) {
	if s.cfg.Media == nil {
		return nil, errBadRequest
	}
	if r.FileId == "" || len(r.FileId) > maxFileID {
		return nil, errDenied
	}
	if r.ConversationId == "" {
		return s.cfg.Media.URL(ctx, r.FileId, r.Thumbnail, uid)
	}
	if err := s.mayReadFile(ctx, uid, r); err != nil {
		return nil, err
	}
	return s.cfg.Media.URL(ctx, r.FileId, r.Thumbnail, "")
}

// maxFileID bounds a file id in a request (the server makes 32 characters).
const maxFileID = 128

// mayReadFile checks that uid may read message (r.ConversationId, r.Seq)
// and that it carries r.FileId (with a thumbnail, when asked for one).
func (s *Service) mayReadFile(ctx context.Context, uid string, r *pb.FileUrl) error {
	m, err := s.readableMessage(ctx, uid, r.ConversationId, r.Seq)
	if err != nil {
		return err
	}
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
		return errDenied
	}
	for _, a := range m.Attachments {
		if a.Id == r.FileId && (!r.Thumbnail || a.Thumbnail) {
			return nil
		}
	}
	return errDenied
}

// readableMessage returns message seq of conv as stored when uid may read
// it: within their read range, not cleared nor deleted for them. Every
// refusal is the same PERMISSION_DENIED, whether the message or the
// conversation exists or not.
func (s *Service) readableMessage(ctx context.Context, uid, conv string, seq uint64) (*pb.Message, error) {
	since, upTo, err := s.readRange(ctx, uid, conv)
	if errors.Is(err, errDenied) || (err == nil && (seq <= since || (upTo > 0 && seq > upTo))) {
		return nil, errDenied
	}
	if err != nil {
		return nil, err
	}
	cs, err := s.store.GetConversationSettings(ctx, uid, conv)
	if err != nil {
		return nil, storeErr(err)
	}
	if seq <= cs.ClearedSeq {
		return nil, errDenied
	}
	hidden, err := s.store.HiddenMessages(ctx, uid, conv, seq, seq)
	if err != nil {
		return nil, storeErr(err)
	}
	if len(hidden) > 0 {
		return nil, errDenied
	}
	m, err := s.store.GetMessage(ctx, conv, seq)
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.SenderOnly && m.From != uid) {
		return nil, errDenied
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return m, nil
}
