package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// TestPGSwapSettingRaceAcrossNodes: node B's swap of a setting (an insert
// of an unset key, or an update from its value) sits in an uncommitted
// transaction while node A swaps from the same old value; A waits for the
// row and then loses (B committed) or wins (B rolled back).
func TestPGSwapSettingRaceAcrossNodes(t *testing.T) {
	url := testURL(t)
	for _, from := range []string{"unset", "set"} {
		for _, outcome := range []string{"COMMIT", "ROLLBACK"} {
			t.Run(from+"/"+outcome, func(t *testing.T) {
				schema := freshSchema(t, url)
				a, b := openSchema(t, url, schema), openSchema(t, url, schema)
				t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
				ctx := context.Background()
				var old []byte
				if from == "set" {
					old = []byte("v0")
					if err := b.PutSetting(ctx, "k", old); err != nil {
						t.Fatal(err)
					}
				}

				conn, err := b.pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Release()
				if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				var tag pgconn.CommandTag
				if old == nil {
					tag, err = conn.Exec(ctx, b.q.addSetting, "k", []byte("vB"))
				} else {
					tag, err = conn.Exec(ctx, b.q.swapSetting, "k", []byte("vB"), old)
				}
				if err != nil || tag.RowsAffected() != 1 {
					t.Fatalf("node B's swap: %v, %v", tag, err)
				}

				type result struct {
					swapped bool
					err     error
				}
				done := make(chan result, 1)
				go func() {
					swapped, err := a.SwapSetting(ctx, "k", old, []byte("vA"))
					done <- result{swapped, err}
				}()
				waitForLockWait(t, url, schema)
				if _, err := conn.Exec(ctx, outcome); err != nil {
					t.Fatal(err)
				}
				var r result
				select {
				case r = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("SwapSetting still waiting after the other node finished")
				}
				want, wantV := result{}, "vB"
				if outcome == "ROLLBACK" {
					want, wantV = result{swapped: true}, "vA"
				}
				if r != want {
					t.Fatalf("racing SwapSetting = %+v, want %+v", r, want)
				}
				if v, err := a.GetSetting(ctx, "k"); err != nil || string(v) != wantV {
					t.Fatalf("GetSetting = %q, %v; want %s", v, err, wantV)
				}
			})
		}
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
