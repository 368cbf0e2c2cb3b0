package pebblestore

import (
	"context"
)

// RaiseSeq implements store.Store: the conversation's 'l' record (its newest
// seq, which every Append and Apply continues from) is raised to floor.
func (s *Store) RaiseSeq(ctx context.Context, conversationID string, floor uint64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	last, err := s.committedLastSeq(conversationID)
	if err != nil {
		return mapErr(err)
	}
	if floor <= last {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	s.resetBatch()
	s.batchSeqs[conversationID] = floor
	return mapErr(s.commit(b, nil))
}
