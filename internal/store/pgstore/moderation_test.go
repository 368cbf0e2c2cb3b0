package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// TestPGReportRaceAcrossNodes: node B's report of a message sits in an
// uncommitted transaction while node A reports the same message; A's insert
// waits on reports_once and then answers B's report (committed) or stores
// its own (rolled back).
func TestPGReportRaceAcrossNodes(t *testing.T) {
	url := testURL(t)
	for _, outcome := range []string{"COMMIT", "ROLLBACK"} {
		t.Run(outcome, func(t *testing.T) {
			schema := freshSchema(t, url)
			a, b := openSchema(t, url, schema), openSchema(t, url, schema)
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			ctx := context.Background()

			conn, err := b.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, b.q.putReport, "rB", "alice", "g:1", int64(3), "spam", "", nil, nil, int16(store.ReportOpen)); err != nil {
				t.Fatal(err)
			}

			type result struct {
				id      string
				created bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				id, created, err := a.PutReport(ctx, store.Report{ID: "rA", Reporter: "alice", ConversationID: "g:1", Seq: 3,
					Reason: "abuse", Status: store.ReportOpen})
				done <- result{id, created, err}
			}()
			waitForLockWait(t, url, schema)
			if _, err := conn.Exec(ctx, outcome); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("PutReport still waiting after the other node finished")
			}
			want := result{id: "rB"}
			if outcome == "ROLLBACK" {
				want = result{id: "rA", created: true}
			}
			if r != want {
				t.Fatalf("racing PutReport = %+v, want %+v", r, want)
			}
			rs, err := a.Reports(ctx, 0, "", 10)
			if err != nil || len(rs) != 1 || rs[0].ID != want.id {
				t.Fatalf("Reports = %+v, %v; want only %s", rs, err, want.id)
			}
		})
	}
}

// TestPGShadowMutedWithOlderWriters: during a rolling upgrade, nodes built
// before migration 8 insert users without shadow_muted (not muted) and
// update them without touching it (kept).
func TestPGShadowMutedWithOlderWriters(t *testing.T) {
	ctx := context.Background()
	s, schema := openTempSchema(t)
	sqlExec(t, s, schema, `INSERT INTO {s}.users (id, password_hash, token_epoch, disabled, created_at, name_key)
		VALUES ('old', 'h', 0, false, NULL, 'old')`)
	if u, err := s.GetUser(ctx, "old"); err != nil || u.ShadowMuted {
		t.Fatalf("GetUser of a user an older node created = %+v, %v; want not muted", u, err)
	}
	if err := s.UpdateUser(ctx, store.User{ID: "old", PasswordHash: "h", ShadowMuted: true}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, s, schema, `UPDATE {s}.users SET password_hash = 'h2', token_epoch = 1, disabled = false, created_at = NULL WHERE id = 'old'`)
	if u, err := s.UserByName(ctx, "old"); err != nil || !u.ShadowMuted || u.PasswordHash != "h2" {
		t.Fatalf("UserByName after an older node's update = %+v, %v; want still muted", u, err)
	}
}
