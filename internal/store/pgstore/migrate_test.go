package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyim/parley/internal/store"
)

// rerunMigration runs migration version once more on data written behind
// the store's back (a stand-in for data written by an older build). Only
// for migrations that can run twice (data fixes, not DDL).
func rerunMigration(t *testing.T, s *Store, schema string, version int) *Store {
	t.Helper()
	migs, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	sqlExec(t, s, schema, migs[version-1].sql)
	return s
}

// TestPGMigrationClampsOldCursors: cursors stored beyond their conversation's
// last seq by a build without the clamp are lowered when the schema migrates.
func TestPGMigrationClampsOldCursors(t *testing.T) {
	s, schema := openTempSchema(t)
	mustAppend(t, s, message("c1", "alice", "bob", "1"), message("c1", "alice", "bob", "2"))
	sqlExec(t, s, schema, `INSERT INTO {s}.cursors VALUES ('c1', 'bob', $1, $1), ('c1', 'carol', 1, 1), ('gone', 'bob', 7, 7)`, int64(1<<62))
	s = rerunMigration(t, s, schema, 2)
	for _, want := range []store.Cursor{
		{ConversationID: "c1", UserID: "bob", Delivered: 2, Read: 2},
		{ConversationID: "c1", UserID: "carol", Delivered: 1, Read: 1},
		{ConversationID: "gone", UserID: "bob"},
	} {
		got, err := s.GetCursor(context.Background(), want.ConversationID, want.UserID)
		if err != nil || got != want {
			t.Fatalf("cursor after migration = %+v, %v; want %+v", got, err, want)
		}
	}
}

// TestPGMigrationIndexesOldUserNames: a schema holding look-alike users
// ("alice", "Alice", "ALICE") from before name_key migrates: the oldest keeps
// the name, every one keeps its exact id, and the name is taken.
func TestPGMigrationIndexesOldUserNames(t *testing.T) {
	ctx := context.Background()
	s, schema := openTempSchema(t)
	sqlExec(t, s, schema, `ALTER TABLE {s}.users DROP COLUMN name_key`) // as before migration 3
	sqlExec(t, s, schema, `INSERT INTO {s}.users (id, password_hash, token_epoch, disabled, created_at) VALUES
		('alice', '', 0, false, '2024-01-01 02:00Z'), ('Alice', '', 0, false, '2024-01-01 01:00Z'),
		('ALICE', '', 0, false, '2024-01-01 03:00Z'), ('bob', '', 0, false, NULL),
		('carol', '', 0, false, NULL), ('Carol', '', 0, false, NULL)`)
	s = rerunMigration(t, s, schema, 3)
	for name, want := range map[string]string{"alice": "Alice", "bob": "bob", "carol": "Carol"} {
		if u, err := s.UserByName(ctx, name); err != nil || u.ID != want {
			t.Fatalf("UserByName(%s) = %+v, %v; want %s", name, u, err, want)
		}
	}
	for _, id := range []string{"alice", "Alice", "ALICE", "carol"} {
		if _, err := s.GetUser(ctx, id); err != nil {
			t.Fatalf("GetUser(%s) after migrating: %v", id, err)
		}
	}
	if err := s.CreateUser(ctx, store.User{ID: "aLiCe", NameKey: "alice"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a new look-alike after migrating: %v, want ErrExists", err)
	}
}
