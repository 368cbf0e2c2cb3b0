package pgstore

import (
	"context"
	"errors"
	"hash/crc32"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Messages implements store.Store. A corrupt message in the page fails the
// whole call with store.ErrCorrupt; pages without it are served.
func (s *Store) Messages(ctx context.Context, conversationID string, after uint64, limit int) ([]*pb.Message, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || after >= math.MaxInt64 {
		return nil, nil
	}
	return s.readMessages(ctx, "messages", s.q.messagesAfter, conversationID, int64(after), limit)
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, conversationID string, before uint64, limit int) ([]*pb.Message, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	if before == 0 || before > math.MaxInt64 {
		before = math.MaxInt64
	}
	out, err := s.readMessages(ctx, "history", s.q.messagesBefore, conversationID, int64(before), limit)
	slices.Reverse(out) // read newest first
	return out, err
}

func (s *Store) readMessages(ctx context.Context, op, sql, conv string, bound int64, limit int) ([]*pb.Message, error) {
	rows, err := s.pool.Query(ctx, sql, conv, bound, limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	var out []*pb.Message
	var seq int64
	var body []byte
	var crc int32
	_, err = pgx.ForEachRow(rows, []any{&seq, &body, &crc}, func() error {
		m, err := s.decode(conv, seq, body, crc)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// MessageHeads implements store.Store: Messages' query, with only the
// head of each body decoded.
func (s *Store) MessageHeads(ctx context.Context, conversationID string, after uint64, limit int) ([]store.MessageHead, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || after >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.messagesAfter, conversationID, int64(after), limit)
	if err != nil {
		return nil, mapErr("message heads", err)
	}
	defer rows.Close()
	var out []store.MessageHead
	var seq int64
	var body []byte
	var crc int32
	_, err = pgx.ForEachRow(rows, []any{&seq, &body, &crc}, func() error {
		if crc32.Checksum(body, s.crc) != uint32(crc) {
			return s.corrupt(conversationID, seq, errors.New("checksum mismatch"))
		}
		h, err := store.DecodeHead(body)
		if err != nil {
			return s.corrupt(conversationID, seq, err)
		}
		h.Seq = uint64(seq)
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, mapErr("message heads", err)
	}
	return out, nil
}

// GetMessage implements store.Store.
func (s *Store) GetMessage(ctx context.Context, conversationID string, seq uint64) (*pb.Message, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if seq == 0 || seq > math.MaxInt64 {
		return nil, store.ErrNotFound
	}
	var stored int64
	var body []byte
	var crc int32
	err = s.pool.QueryRow(ctx, s.q.getMessage, conversationID, int64(seq)).Scan(&stored, &body, &crc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, mapErr("get message", err)
	}
	return s.decode(conversationID, stored, body, crc)
}

// LastSeq implements store.Store: the conversation's counter row.
func (s *Store) LastSeq(ctx context.Context, conversationID string) (uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var seq int64
	err = s.pool.QueryRow(ctx, s.q.lastSeq, conversationID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr("last seq", err)
	}
	return uint64(seq), nil
}

// Conversations implements store.Store.
func (s *Store) Conversations(ctx context.Context, userID string) ([]string, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.strings(ctx, "conversations", s.q.conversations, userID)
}

// strings runs a query returning one text column.
func (s *Store) strings(ctx context.Context, op, sql string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}
