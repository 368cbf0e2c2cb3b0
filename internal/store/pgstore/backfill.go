package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
)

// Messages stored before migration 0010 have no search fields. While the
// search_backfill row exists, each Store opened runs backfillSearch: one
// node at a time (the row is locked, SKIP LOCKED) fills in a batch of
// rows in (conversation_id, seq) order from the row's position and moves
// it on, one transaction per batch, and deletes the row after the last.
// A node that dies mid-batch loses only that batch's transaction; the next
// node goes on from the position. Messages written meanwhile have their
// fields already: recomputing them writes the same values.
const (
	backfillBatch = 500
	// backfillWait is how long a node waits before looking again while
	// another node backfills, or after a failed batch.
	backfillWait = 5 * time.Second
)

// backfillSearch runs until the backfill is done (by any node) or the
// store closes.
func (s *Store) backfillSearch() {
	defer close(s.backfilled)
	for {
		more, err := s.backfillStep(context.Background(), backfillBatch)
		switch {
		case errors.Is(err, store.ErrClosed):
			return
		case err != nil:
			s.log.Warn("pgstore: search backfill batch failed; retrying", "err", err)
		case more == backfillDone:
			return
		case more == backfillMore:
			continue
		}
		select {
		case <-s.stop:
			return
		case <-time.After(backfillWait):
		}
	}
}

type backfillState int

const (
	backfillDone backfillState = iota // nothing left (the row is gone)
	backfillMore                      // a batch was filled in; maybe more
	backfillBusy                      // another node holds the row
)

// backfillStep fills in one batch of at most n messages.
func (s *Store) backfillStep(ctx context.Context, n int) (backfillState, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var state backfillState
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var conv string
		var seq int64
		err := tx.QueryRow(ctx, s.q.backfillLock).Scan(&conv, &seq)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, s.q.backfillExists).Scan(&exists); err != nil {
				return err
			}
			if state = backfillDone; exists {
				state = backfillBusy
			}
			return nil
		} else if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.q.backfillRows, conv, seq, n)
		if err != nil {
			return err
		}
		var convs []string
		var seqs []int64
		var sc searchCols
		var body []byte
		var crc int32
		read := 0
		_, err = pgx.ForEachRow(rows, []any{&conv, &seq, &body, &crc}, func() error {
			read++
			m, err := s.decode(conv, seq, body, crc)
			if err != nil {
				return nil // corrupt (logged): never served, nothing to search
			}
			if r := searchRowOf(m); r.norm.Valid {
				convs, seqs = append(convs, conv), append(seqs, seq)
				sc.add(r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(convs) > 0 {
			if _, err := tx.Exec(ctx, s.q.backfillUpdate, append([]any{convs, seqs}, sc.args()...)...); err != nil {
				return err
			}
		}
		if read < n {
			state = backfillDone
			_, err = tx.Exec(ctx, s.q.backfillDelete)
			return err
		}
		state = backfillMore
		_, err = tx.Exec(ctx, s.q.backfillMove, conv, seq)
		return err
	})
	if err != nil {
		return 0, mapErr("search backfill", err)
	}
	return state, nil
}
