package moderation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Report implements chat.Moderator: it keeps uid's report of m, the
// message as stored now (later edits and recalls leave the copy alone).
// A second report of the same message by the same user changes nothing.
func (s *Service) Report(ctx context.Context, uid string, m *pb.Message, reason, note string) error {
	_, _, err := s.store.PutReport(ctx, store.Report{
		ID: newReportID(time.Now()), Reporter: uid, ConversationID: m.ConversationId, Seq: m.Seq,
		Reason: reason, Note: note, Message: m, CreatedAt: time.Now(), Status: store.ReportOpen,
	})
	if err != nil {
		s.log.Warn("storing a report failed", "err", err)
		return reqerr.Store(err)
	}
	return nil
}

// newReportID makes an id that sorts by time across nodes: 12 hex digits of
// Unix milliseconds, then 8 random ones.
func newReportID(t time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%012x%s", t.UnixMilli(), hex.EncodeToString(r[:]))
}

// Reports lists reports oldest first (the moderators' queue), after the id
// after, at most limit; status 0: any.
func (s *Service) Reports(ctx context.Context, status store.ReportStatus, after string, limit int) ([]store.Report, error) {
	return s.store.Reports(ctx, status, after, limit)
}

// GetReport returns one report.
func (s *Service) GetReport(ctx context.Context, id string) (store.Report, error) {
	return s.store.GetReport(ctx, id)
}

// CloseReport resolves or dismisses an open report, as the admin API key by.
func (s *Service) CloseReport(ctx context.Context, id string, status store.ReportStatus, by, note string) error {
	return s.store.CloseReport(ctx, id, status, by, note, time.Now())
}

// Audit appends one admin action to the audit log; detail, when not nil,
// is kept as JSON. The log is append-only: nothing in Parley changes or
// deletes an entry.
func (s *Service) Audit(ctx context.Context, actor, action, target string, detail any) error {
	e := store.AuditEntry{Time: time.Now(), Actor: actor, Action: action, Target: target}
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		e.Detail = string(b)
	}
	_, err := s.store.AppendAudit(ctx, e)
	return err
}

// AuditLog lists the audit log newest first, entries below the id before
// (0: from the newest), at most limit.
func (s *Service) AuditLog(ctx context.Context, before uint64, limit int) ([]store.AuditEntry, error) {
	return s.store.AuditLog(ctx, before, limit)
}
