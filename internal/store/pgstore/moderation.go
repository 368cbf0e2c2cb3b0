package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var (
	errReportNotOpen = errors.New("pgstore: a new report must be open")
	errCloseStatus   = errors.New("pgstore: a report closes as resolved or dismissed")
)

// reportColumns are a report row's columns in the order scanReport reads them.
const reportColumns = `id, reporter, conversation_id, seq, reason, note, message, created_at, status, closed_by, closed_at, resolution`

func (s *Store) scanReport(r pgx.Row) (store.Report, error) {
	var rep store.Report
	var seq int64
	var msg []byte
	var status int16
	var created, closed pgtype.Timestamptz
	if err := r.Scan(&rep.ID, &rep.Reporter, &rep.ConversationID, &seq, &rep.Reason, &rep.Note, &msg, &created, &status,
		&rep.ClosedBy, &closed, &rep.Resolution); err != nil {
		return store.Report{}, err
	}
	rep.Seq, rep.Status = uint64(seq), store.ReportStatus(status)
	rep.CreatedAt, rep.ClosedAt = fromTimestamp(created), fromTimestamp(closed)
	if msg != nil {
		rep.Message = new(pb.Message)
		if err := proto.Unmarshal(msg, rep.Message); err != nil {
			s.log.Error("pgstore: corrupt reported message", "report", rep.ID, "err", err)
			return store.Report{}, fmt.Errorf("%w: report %q: reported message: %v", store.ErrCorrupt, rep.ID, err)
		}
	}
	return rep, nil
}

// PutReport implements store.Store. The insert does nothing when
// reports_once (or the id) is taken, also against a concurrent insert on
// another node, which it waits for; the first report's id is then read.
func (s *Store) PutReport(ctx context.Context, r store.Report) (string, bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return "", false, err
	}
	defer done()
	if r.ID == "" || r.Reporter == "" {
		return "", false, errEmptyID
	}
	if r.Status != store.ReportOpen {
		return "", false, errReportNotOpen
	}
	var msg []byte // NULL: no message
	if r.Message != nil {
		if msg, err = proto.Marshal(r.Message); err != nil {
			return "", false, permanentError{fmt.Errorf("pgstore: encoding the reported message: %w", err)}
		}
		if msg == nil {
			msg = []byte{} // an empty message is not NULL
		}
	}
	tag, err := s.pool.Exec(ctx, s.q.putReport, r.ID, r.Reporter, r.ConversationID, int64(r.Seq), r.Reason, r.Note,
		msg, timestamp(r.CreatedAt), int16(r.Status))
	if err != nil {
		return "", false, mapErr("put report", err)
	}
	if tag.RowsAffected() > 0 {
		return r.ID, true, nil
	}
	var first string
	err = s.pool.QueryRow(ctx, s.q.reportOf, r.Reporter, r.ConversationID, int64(r.Seq)).Scan(&first)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, store.ErrExists // the id is another report's
	}
	if err != nil {
		return "", false, mapErr("put report", err)
	}
	return first, false, nil
}

// GetReport implements store.Store.
func (s *Store) GetReport(ctx context.Context, id string) (store.Report, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.Report{}, err
	}
	defer done()
	rep, err := s.scanReport(s.pool.QueryRow(ctx, s.q.getReport, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Report{}, store.ErrNotFound
	}
	if err != nil {
		return store.Report{}, mapErr("get report", err)
	}
	return rep, nil
}

// Reports implements store.Store: a scan of the primary key, or of
// reports_status for one status.
func (s *Store) Reports(ctx context.Context, status store.ReportStatus, after string, limit int) ([]store.Report, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	var rows pgx.Rows
	if status == 0 {
		rows, err = s.pool.Query(ctx, s.q.reportsAfter, after, limit)
	} else {
		rows, err = s.pool.Query(ctx, s.q.reportsByStatus, int16(status), after, limit)
	}
	if err != nil {
		return nil, mapErr("reports", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Report, error) { return s.scanReport(r) })
	if err != nil {
		return nil, mapErr("reports", err)
	}
	return out, nil
}

// CloseReport implements store.Store.
func (s *Store) CloseReport(ctx context.Context, id string, status store.ReportStatus, by, note string, at time.Time) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if status != store.ReportResolved && status != store.ReportDismissed {
		return errCloseStatus
	}
	var closed, exists bool
	if err := s.pool.QueryRow(ctx, s.q.closeReport, id, int16(status), by, note, timestamp(at)).Scan(&closed, &exists); err != nil {
		return mapErr("close report", err)
	}
	switch {
	case closed:
		return nil
	case exists:
		return store.ErrConflict
	}
	return store.ErrNotFound
}

// AppendAudit implements store.Store: the id comes from audit_log's
// sequence.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var id int64
	if err := s.pool.QueryRow(ctx, s.q.appendAudit, timestamp(e.Time), e.Actor, e.Action, e.Target, e.Detail).Scan(&id); err != nil {
		return 0, mapErr("append audit", err)
	}
	return uint64(id), nil
}

// AuditLog implements store.Store.
func (s *Store) AuditLog(ctx context.Context, before uint64, limit int) ([]store.AuditEntry, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	upper := int64(math.MaxInt64) // ids are bigserial: never above it
	if before != 0 {
		upper = clampSeq(before)
	}
	rows, err := s.pool.Query(ctx, s.q.auditLog, upper, limit)
	if err != nil {
		return nil, mapErr("audit log", err)
	}
	var out []store.AuditEntry
	var e store.AuditEntry
	var id int64
	var at pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &e.Actor, &e.Action, &e.Target, &e.Detail}, func() error {
		e.ID, e.Time = uint64(id), fromTimestamp(at)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, mapErr("audit log", err)
	}
	return out, nil
}

// GetSetting implements store.Store.
func (s *Store) GetSetting(ctx context.Context, key string) ([]byte, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if key == "" {
		return nil, store.ErrNotFound
	}
	var v []byte
	err = s.pool.QueryRow(ctx, s.q.getSetting, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, mapErr("get setting", err)
	}
	if v == nil {
		v = []byte{} // set, to an empty value
	}
	return v, nil
}

// PutSetting implements store.Store.
func (s *Store) PutSetting(ctx context.Context, key string, value []byte) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if key == "" {
		return errEmptyID
	}
	if value == nil {
		value = []byte{} // NOT NULL
	}
	_, err = s.pool.Exec(ctx, s.q.putSetting, key, value)
	return mapErr("put setting", err)
}

// SwapSetting implements store.Store in one statement: an insert of an
// unset key (old nil) or an update conditional on the old value.
func (s *Store) SwapSetting(ctx context.Context, key string, old, value []byte) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	if key == "" {
		return false, errEmptyID
	}
	if value == nil {
		value = []byte{} // NOT NULL
	}
	var tag pgconn.CommandTag
	if old == nil {
		tag, err = s.pool.Exec(ctx, s.q.addSetting, key, value)
	} else {
		tag, err = s.pool.Exec(ctx, s.q.swapSetting, key, value, old)
	}
	if err != nil {
		return false, mapErr("swap setting", err)
	}
	return tag.RowsAffected() == 1, nil
}
