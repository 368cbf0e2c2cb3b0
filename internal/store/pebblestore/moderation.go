package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var (
	errReportNotOpen = errors.New("pebblestore: a new report must be open")
	errCloseStatus   = errors.New("pebblestore: a report closes as resolved or dismissed")
)

func reportKey(id string) []byte { return append([]byte{nsReport}, id...) }

func reportIdxKey(st store.ReportStatus, id string) []byte {
	return append([]byte{nsReportIdx, byte(st)}, id...)
}

func reportDupKey(reporter, conv string, seq uint64) []byte {
	b := appendLP(appendLP([]byte{nsReportDup}, reporter), conv)
	return binary.BigEndian.AppendUint64(b, seq)
}

func auditKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{nsAudit}, id) }

func settingKey(key string) []byte { return appendLP([]byte{nsSetting}, key) }

// report values: lp(reporter) lp(conversation) uvarint(seq) lp(reason)
// lp(note) flags(has message) lp(message, protobuf) time(created)
// uvarint(status) lp(closed by) time(closed) lp(resolution).
func encodeReport(r store.Report) ([]byte, error) {
	var msg []byte
	if r.Message != nil {
		var err error
		if msg, err = proto.Marshal(r.Message); err != nil {
			return nil, fmt.Errorf("pebblestore: encoding the reported message: %w", err)
		}
	}
	b := make([]byte, 0, 64+len(r.Reporter)+len(r.ConversationID)+len(r.Reason)+len(r.Note)+len(msg)+len(r.ClosedBy)+len(r.Resolution))
	b = appendLP(appendLP(b, r.Reporter), r.ConversationID)
	b = binary.AppendUvarint(b, r.Seq)
	b = appendLP(appendLP(b, r.Reason), r.Note)
	b = append(b, flags(r.Message != nil))
	b = append(binary.AppendUvarint(b, uint64(len(msg))), msg...)
	b = appendTime(b, r.CreatedAt)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = appendTime(appendLP(b, r.ClosedBy), r.ClosedAt)
	return appendLP(b, r.Resolution), nil
}

func decodeReport(key []byte, id string, body []byte) (store.Report, error) {
	r := bodyReader{b: body}
	rep := store.Report{ID: id, Reporter: r.str(), ConversationID: r.str(), Seq: r.uvarint(), Reason: r.str(), Note: r.str()}
	hasMsg := r.flags(1) != 0
	msg := r.str()
	rep.CreatedAt = r.time()
	st := r.uvarint()
	rep.ClosedBy, rep.ClosedAt, rep.Resolution = r.str(), r.time(), r.str()
	if !r.ok() || st < uint64(store.ReportOpen) || st > uint64(store.ReportDismissed) {
		return store.Report{}, corruptf(key, "bad report record")
	}
	rep.Status = store.ReportStatus(st)
	if hasMsg {
		rep.Message = new(pb.Message)
		if err := proto.Unmarshal([]byte(msg), rep.Message); err != nil {
			return store.Report{}, corruptf(key, "undecodable reported message: %v", err)
		}
	}
	return rep, nil
}

// PutReport implements store.Store: the record, its status index entry and
// the (reporter, message) entry in one batch, checked and written under
// reportMu so that of concurrent reports of one message exactly one is
// stored.
func (s *Store) PutReport(ctx context.Context, r store.Report) (string, bool, error) {
	if err := s.enter(ctx); err != nil {
		return "", false, err
	}
	defer s.closeMu.RUnlock()
	if r.ID == "" || r.Reporter == "" {
		return "", false, errEmptyID
	}
	if r.Status != store.ReportOpen {
		return "", false, errReportNotOpen
	}
	body, err := encodeReport(r)
	if err != nil {
		return "", false, err
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	dk := reportDupKey(r.Reporter, r.ConversationID, r.Seq)
	first, found, err := s.getBody(dk)
	if err != nil {
		return "", false, err
	}
	if found {
		if len(first) == 0 {
			return "", false, corruptf(dk, "bad report index record")
		}
		return string(first), false, nil
	}
	key := reportKey(r.ID)
	if _, found, err := s.getBody(key); err != nil || found {
		if found {
			err = store.ErrExists
		}
		return "", false, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	ik := reportIdxKey(r.Status, r.ID)
	_ = b.Set(key, frame(key, body), nil)
	_ = b.Set(ik, frame(ik, nil), nil)
	_ = b.Set(dk, frame(dk, []byte(r.ID)), nil)
	if err := s.commitBatch(b, s.wo, bulk); err != nil {
		return "", false, mapErr(err)
	}
	return r.ID, true, nil
}

// GetReport implements store.Store.
func (s *Store) GetReport(ctx context.Context, id string) (store.Report, error) {
	if err := s.enter(ctx); err != nil {
		return store.Report{}, err
	}
	defer s.closeMu.RUnlock()
	return s.getReport(id)
}

func (s *Store) getReport(id string) (store.Report, error) {
	if id == "" {
		return store.Report{}, store.ErrNotFound
	}
	key := reportKey(id)
	body, found, err := s.getBody(key)
	if err != nil {
		return store.Report{}, err
	}
	if !found {
		return store.Report{}, store.ErrNotFound
	}
	return decodeReport(key, id, body)
}

// Reports implements store.Store: a scan of the records, or of one status's
// index entries and their records read from one snapshot (so a report
// closed meanwhile is neither listed under its new status nor missing).
func (s *Store) Reports(ctx context.Context, status store.ReportStatus, after string, limit int) ([]store.Report, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	var out []store.Report
	if status == 0 {
		prefix := []byte{nsReport}
		err := s.iterate(ctx, afterKey(prefix, after), prefixEnd(prefix), func(key, body []byte) (bool, error) {
			rep, err := decodeReport(key, string(key[len(prefix):]), body)
			if err != nil {
				return false, err
			}
			out = append(out, rep)
			return len(out) < limit, nil
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	prefix := []byte{nsReportIdx, byte(status)}
	err := iterateIn(ctx, snap, afterKey(prefix, after), prefixEnd(prefix), false, func(key, body []byte) (bool, error) {
		if len(body) != 0 {
			return false, corruptf(key, "bad report status record")
		}
		id := string(key[len(prefix):])
		rk := reportKey(id)
		rb, found, err := getBodyFrom(snap, rk)
		if err != nil {
			return false, err
		}
		if !found {
			return false, corruptf(key, "status entry of a missing report")
		}
		rep, err := decodeReport(rk, id, rb)
		if err != nil {
			return false, err
		}
		if rep.Status != status {
			return false, corruptf(key, "status entry disagrees with its report")
		}
		out = append(out, rep)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CloseReport implements store.Store. A small write: moderators must be able
// to work through the queue on a nearly full disk.
func (s *Store) CloseReport(ctx context.Context, id string, status store.ReportStatus, by, note string, at time.Time) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if status != store.ReportResolved && status != store.ReportDismissed {
		return errCloseStatus
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	rep, err := s.getReport(id)
	if err != nil {
		return err
	}
	if rep.Status != store.ReportOpen {
		return store.ErrConflict
	}
	rep.Status, rep.ClosedBy, rep.ClosedAt, rep.Resolution = status, by, at, note
	body, err := encodeReport(rep)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	key, ik := reportKey(id), reportIdxKey(status, id)
	_ = b.Set(key, frame(key, body), nil)
	_ = b.Delete(reportIdxKey(store.ReportOpen, id), nil)
	_ = b.Set(ik, frame(ik, nil), nil)
	return mapErr(s.commitBatch(b, s.wo, small))
}

// audit values: time lp(actor) lp(action) lp(target) lp(detail).
func encodeAudit(e store.AuditEntry) []byte {
	b := make([]byte, 0, 24+len(e.Actor)+len(e.Action)+len(e.Target)+len(e.Detail))
	b = appendTime(b, e.Time)
	return appendLP(appendLP(appendLP(appendLP(b, e.Actor), e.Action), e.Target), e.Detail)
}

func decodeAudit(key, body []byte) (store.AuditEntry, error) {
	if len(key) != 9 {
		return store.AuditEntry{}, corruptf(key, "bad audit key")
	}
	r := bodyReader{b: body}
	e := store.AuditEntry{ID: binary.BigEndian.Uint64(key[1:]), Time: r.time(), Actor: r.str(), Action: r.str(), Target: r.str(), Detail: r.str()}
	if !r.ok() {
		return store.AuditEntry{}, corruptf(key, "bad audit record")
	}
	return e, nil
}

// AppendAudit implements store.Store. IDs continue from the newest entry on
// disk (the log is append-only, so it holds the highest ID stored). A small
// write: the action it records (a ban is a user update) went through.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	if s.auditLast == 0 {
		last, err := s.lastAuditID(ctx)
		if err != nil {
			return 0, err
		}
		s.auditLast = last
	}
	id := s.auditLast + 1
	key := auditKey(id)
	v := frame(key, encodeAudit(e))
	err := s.write(small, len(key)+len(v), func() error {
		// Once the write reaches Pebble, whether it landed may be unknown
		// (a failed commit): the ID is used up either way.
		s.auditLast = id
		return s.db.Set(key, v, s.wo)
	})
	if err != nil {
		return 0, mapErr(err)
	}
	return id, nil
}

// lastAuditID returns the newest entry's ID, 0 when the log is empty. Only
// the key is read: a damaged newest value must not stop the log.
func (s *Store) lastAuditID(ctx context.Context) (uint64, error) {
	prefix := []byte{nsAudit}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, mapErr(err)
	}
	defer it.Close()
	if !it.Last() {
		return 0, mapErr(it.Error()) // an empty log, or the seek failed
	}
	if len(it.Key()) != 9 {
		return 0, corruptf(it.Key(), "bad audit key")
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// AuditLog implements store.Store: a reverse scan from before.
func (s *Store) AuditLog(ctx context.Context, before uint64, limit int) ([]store.AuditEntry, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || before == 1 {
		return nil, nil
	}
	prefix := []byte{nsAudit}
	upper := prefixEnd(prefix)
	if before != 0 {
		upper = auditKey(before)
	}
	var out []store.AuditEntry
	err := iterateIn(ctx, s.db, prefix, upper, true, func(key, body []byte) (bool, error) {
		e, err := decodeAudit(key, body)
		if err != nil {
			return false, err
		}
		out = append(out, e)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetSetting implements store.Store.
func (s *Store) GetSetting(ctx context.Context, key string) ([]byte, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if key == "" {
		return nil, store.ErrNotFound
	}
	body, found, err := s.getBody(settingKey(key))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.ErrNotFound
	}
	if body == nil {
		body = []byte{} // set, to an empty value
	}
	return body, nil
}

// PutSetting implements store.Store, under settingMu so that it cannot land
// between a SwapSetting's compare and its write.
func (s *Store) PutSetting(ctx context.Context, key string, value []byte) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if key == "" {
		return errEmptyID
	}
	s.settingMu.Lock()
	defer s.settingMu.Unlock()
	return s.put(settingKey(key), value, bulk)
}

// SwapSetting implements store.Store: the compare and the write under
// settingMu (one process owns the directory), the write like PutSetting's.
func (s *Store) SwapSetting(ctx context.Context, key string, old, value []byte) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	if key == "" {
		return false, errEmptyID
	}
	s.settingMu.Lock()
	defer s.settingMu.Unlock()
	sk := settingKey(key)
	cur, found, err := s.getBody(sk)
	if err != nil {
		return false, err
	}
	if found != (old != nil) || !bytes.Equal(cur, old) {
		return false, nil
	}
	if err := s.put(sk, value, bulk); err != nil {
		return false, err
	}
	return true, nil
}
