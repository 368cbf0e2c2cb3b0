package pgstore

import (
	"context"
	"fmt"
	"math"
)

// RaiseSeq implements store.Store: the conversation's counter row, which
// every append raises under its row lock, is raised to floor.
func (s *Store) RaiseSeq(ctx context.Context, conversationID string, floor uint64) error {
	if floor > math.MaxInt64 {
		return fmt.Errorf("pgstore: seq floor %d out of range", floor)
	}
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.q.raiseSeq, conversationID, int64(floor))
	return mapErr("raise seq", err)
}
