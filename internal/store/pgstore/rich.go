package pgstore

import (
	"context"
	"errors"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// errRichMessages: the rich-message methods are not implemented in this
// store yet (the embedded store has them); they come with migration 0009.
var errRichMessages = errors.New("pgstore: rich messages not implemented yet")

func (s *Store) React(context.Context, []store.ReactionOp) ([]store.ReactionResult, error) {
	return nil, errRichMessages
}

func (s *Store) Reactions(context.Context, string, []uint64, string) (map[uint64]store.ReactionSet, error) {
	return nil, errRichMessages
}

func (s *Store) ReactionChanges(context.Context, string, uint64, int) ([]store.ReactionChange, error) {
	return nil, errRichMessages
}

func (s *Store) ReactionVersion(context.Context, string) (uint64, error) {
	return 0, errRichMessages
}

func (s *Store) Pins(context.Context, string) ([]store.Pin, error) { return nil, errRichMessages }

func (s *Store) Threads(context.Context, string, []uint64) (map[uint64]store.ThreadSummary, error) {
	return nil, errRichMessages
}

func (s *Store) ThreadMessages(context.Context, string, uint64, uint64, int) ([]*pb.Message, error) {
	return nil, errRichMessages
}

func (s *Store) ThreadHistory(context.Context, string, uint64, uint64, int) ([]*pb.Message, error) {
	return nil, errRichMessages
}

func (s *Store) InThread(context.Context, string, uint64, string) (bool, error) {
	return false, errRichMessages
}

func (s *Store) Mentions(context.Context, string, string, uint64, int) ([]uint64, error) {
	return nil, errRichMessages
}
