package pgstore

import (
	"context"
	"errors"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func wantCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("%s: %v, want ErrCorrupt", what, err)
	}
}

// sqlExec runs statements on s's schema behind the store's back ({s} is the schema).
func sqlExec(t *testing.T, s *Store, schema, sql string, args ...any) {
	t.Helper()
	sql = strings.ReplaceAll(sql, "{s}", pgx.Identifier{schema}.Sanitize())
	if _, err := s.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func openTempSchema(t *testing.T) (*Store, string) {
	url := testURL(t)
	schema := freshSchema(t, url)
	s := openSchema(t, url, schema)
	t.Cleanup(func() { _ = s.Close() })
	return s, schema
}

// TestPGCorruptMessagesAreNeverServed damages rows with SQL: a flipped bit,
// a body that does not decode (with a matching checksum), and a valid body
// moved to another conversation's row. Each is reported as ErrCorrupt, by
// reads and by a resend that resolves to it, and pages without it are served.
func TestPGCorruptMessagesAreNeverServed(t *testing.T) {
	ctx := context.Background()
	s, schema := openTempSchema(t)
	mustAppend(t, s, message("c1", "alice", "bob", "1"), message("c1", "alice", "bob", "2"), message("c1", "alice", "bob", "3"),
		message("c2", "carol", "", "1"))

	// A flipped bit in the payload of c1/2.
	sqlExec(t, s, schema, `UPDATE {s}.messages SET body = set_byte(body, length(body) - 2, get_byte(body, length(body) - 2) # 4)
		WHERE conversation_id = 'c1' AND seq = 2`)
	got, err := s.Messages(ctx, "c1", 0, 10)
	wantCorrupt(t, "Messages over a corrupt message", err)
	if got != nil {
		t.Fatalf("Messages returned %d messages along with the error", len(got))
	}
	_, err = s.History(ctx, "c1", 0, 10)
	wantCorrupt(t, "History over a corrupt message", err)
	_, err = s.GetMessage(ctx, "c1", 2)
	wantCorrupt(t, "GetMessage of a corrupt message", err)
	if got, err := s.Messages(ctx, "c1", 0, 1); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("Messages(after 0, limit 1) = %v, %v", got, err)
	}
	if got, err := s.History(ctx, "c1", 0, 1); err != nil || len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("History(limit 1) = %v, %v", got, err)
	}
	// A resend resolved to the corrupt original fails rather than
	// acknowledging something else, and stores nothing.
	_, err = s.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "2")})
	wantCorrupt(t, "resend of a corrupt message", err)
	_, err = s.Apply(ctx, store.Change{Event: message("c1", "alice", "bob", "2")})
	wantCorrupt(t, "Apply with a corrupt message's client id", err)
	if n, err := s.LastSeq(ctx, "c1"); err != nil || n != 3 {
		t.Fatalf("LastSeq = %d, %v after failed resends, want 3", n, err)
	}

	// Bytes that are not a protobuf message, with a checksum that matches.
	junk := []byte{0xff, 0xff, 0xff, 0xff}
	sqlExec(t, s, schema, `UPDATE {s}.messages SET body = $1, crc = $2 WHERE conversation_id = 'c1' AND seq = 3`,
		junk, int32(crc32.Checksum(junk, crc32.MakeTable(crc32.Castagnoli))))
	_, err = s.GetMessage(ctx, "c1", 3)
	wantCorrupt(t, "GetMessage of an undecodable body", err)

	// A valid body and checksum moved under another conversation's key.
	sqlExec(t, s, schema, `UPDATE {s}.messages AS m SET body = o.body, crc = o.crc FROM {s}.messages o
		WHERE m.conversation_id = 'c1' AND m.seq = 1 AND o.conversation_id = 'c2' AND o.seq = 1`)
	_, err = s.Messages(ctx, "c1", 0, 1)
	wantCorrupt(t, "Messages over a moved body", err)

	// Other conversations are unaffected, and c1 still takes new messages.
	if got, err := s.Messages(ctx, "c2", 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("Messages(c2) = %v, %v", got, err)
	}
	if res := mustAppend(t, s, message("c1", "alice", "bob", "4")); res[0].Msg.Seq != 4 {
		t.Fatalf("Append after corruption: seq %d, want 4", res[0].Msg.Seq)
	}
}

// TestPGRejectedBatchLeavesNoGap: a batch PostgreSQL refuses (a NUL byte,
// which text cannot hold) fails with a permanent error, stores none of its
// messages, and the next batch continues the seqs without a gap.
func TestPGRejectedBatchLeavesNoGap(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("c1", "alice", "bob", "0"))
	ok, bad := message("c1", "alice", "bob", "1"), message("c1", "alice\x00", "bob", "2")
	_, err := s.Append(ctx, []*pb.Message{ok, bad})
	if err == nil {
		t.Fatal("Append of a sender id with NUL succeeded")
	}
	if errors.Is(err, ErrUnavailable) {
		t.Fatalf("a rejected batch reported as temporary: %v", err)
	}
	if ok.Seq != 0 {
		t.Fatalf("failed Append left seq %d on a message it did not store", ok.Seq)
	}
	res := mustAppend(t, s, message("c1", "alice", "bob", "1"))
	if res[0].Duplicate || res[0].Msg.Seq != 2 {
		t.Fatalf("after a rejected Append: seq %d duplicate %v, want 2 false", res[0].Msg.Seq, res[0].Duplicate)
	}
	if got, err := s.Conversations(ctx, "alice\x00"); err == nil && len(got) != 0 {
		t.Fatalf("the rejected batch listed a conversation: %q", got)
	}
	// A message protobuf cannot encode (ContentType not UTF-8) is refused
	// before any write, permanently too.
	unencodable := message("c1", "alice", "bob", "3")
	unencodable.ContentType = "\xff\xfe"
	if _, err := s.Append(ctx, []*pb.Message{unencodable}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append of an unencodable message: %v, want a permanent error", err)
	}
	if n, err := s.LastSeq(ctx, "c1"); err != nil || n != 2 {
		t.Fatalf("LastSeq = %d, %v; want 2", n, err)
	}
}

// TestPGMigrations: Stores opening one new schema at once apply each
// migration exactly once; a schema migrated by a newer build is refused.
func TestPGMigrations(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), url, Options{Schema: schema, Logger: quiet, ConnectTimeout: 20 * time.Second})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	migs, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := stores[0].pool.Query(context.Background(),
		"SELECT version FROM "+pgx.Identifier{schema}.Sanitize()+".schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(migs) || versions[0] != 1 || int(versions[len(versions)-1]) != len(migs) {
		t.Fatalf("schema_migrations = %v, want 1..%d once each", versions, len(migs))
	}
	mustAppend(t, stores[1], message("c1", "a", "b", "1"))

	sqlExec(t, stores[0], schema, "INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, 'from the future')", len(migs)+1)
	if s, err := Open(context.Background(), url, Options{Schema: schema, Logger: quiet}); err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a schema newer than this build")
	} else if !strings.Contains(err.Error(), "newer") || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// TestPGByteOrder: ids order bytewise (COLLATE "C"), whatever the
// database's collation, in Members, Contacts and Blocked. A database whose
// default collation is already bytewise cannot show a wrong order, so the
// catalog is checked too: every indexed text column is COLLATE "C".
func TestPGByteOrder(t *testing.T) {
	ctx := context.Background()
	s, schema := openTempSchema(t)
	rows, err := s.pool.Query(ctx, `SELECT c.relname || '.' || a.attname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = i.indexrelid
		WHERE n.nspname = $1 AND a.atttypid = 'text'::regtype
		AND a.attcollation <> (SELECT oid FROM pg_collation WHERE collname = 'C' AND collnamespace = 'pg_catalog'::regnamespace)`, schema)
	if err != nil {
		t.Fatal(err)
	}
	notC, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(notC) != 0 {
		t.Fatalf("indexed text columns without COLLATE \"C\": %q, %v", notC, err)
	}
	ids := []string{"B", "a", "_x", "Z", "é", "e", "aa", "A"}
	var ms []store.Member
	for _, id := range ids {
		ms = append(ms, store.Member{UserID: id, Role: pb.GroupRole_GROUP_ROLE_MEMBER})
		if err := s.SetBlocked(ctx, "owner", id, true); err != nil {
			t.Fatal(err)
		}
		if err := s.PutContact(ctx, "owner", store.Contact{UserID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply(ctx, store.Change{Event: message("g:1", "A", "", "add"), Members: ms}); err != nil {
		t.Fatal(err)
	}
	want := "A B Z _x a aa e é"
	got, err := s.Members(ctx, "g:1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.UserID)
	}
	if g := strings.Join(names, " "); g != want {
		t.Fatalf("Members order %q, want %q", g, want)
	}
	blocked, err := s.Blocked(ctx, "owner")
	if err != nil || strings.Join(blocked, " ") != want {
		t.Fatalf("Blocked order %q, %v; want %q", blocked, err, want)
	}
	cs, err := s.Contacts(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, c := range cs {
		names = append(names, c.UserID)
	}
	if g := strings.Join(names, " "); g != want {
		t.Fatalf("Contacts order %q, want %q", g, want)
	}
	if got, err := s.Members(ctx, "g:1", "_", 2); err != nil || len(got) != 2 || got[0].UserID != "_x" || got[1].UserID != "a" {
		t.Fatalf("Members(after _) = %v, %v", got, err)
	}
}
