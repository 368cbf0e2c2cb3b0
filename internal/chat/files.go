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
	since, upTo, err := s.readRange(ctx, uid, r.ConversationId)
	if errors.Is(err, errDenied) || (err == nil && (r.Seq <= since || (upTo > 0 && r.Seq > upTo))) {
		return errDenied
	}
	if err != nil {
		return err
	}
	cs, err := s.store.GetConversationSettings(ctx, uid, r.ConversationId)
	if err != nil {
		return storeErr(err)
	}
	if r.Seq <= cs.ClearedSeq {
		return errDenied
	}
	hidden, err := s.store.HiddenMessages(ctx, uid, r.ConversationId, r.Seq, r.Seq)
	if err != nil {
		return storeErr(err)
	}
	if len(hidden) > 0 {
		return errDenied
	}
	m, err := s.store.GetMessage(ctx, r.ConversationId, r.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return errDenied
	}
	if err != nil {
		return storeErr(err)
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
