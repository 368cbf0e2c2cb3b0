package server_test

import (
	"archive/zip"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// waitExport waits until job is no longer pending or running.
func waitExport(t *testing.T, ts *testServer, token, id string) *client.ExportJob {
	t.Helper()
	var j *client.ExportJob
	eventually(t, "the export finishes", func() bool {
		var err error
		j, err = ts.http().Export(ctx10(t), token, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State != "pending" && j.State != "running"
	})
	return j
}

func zipFile(t *testing.T, zr *zip.Reader, name string) []byte {
	t.Helper()
	f, err := zr.Open(name)
	if err != nil {
		t.Fatalf("archive has no %s: %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An export holds the user's profile, contacts, block list, groups with
// their role, conversation settings, the messages they sent and received
// (in a group only while a member), and their uploaded files; another
// user's export cannot be read or even told apart from a missing one.
func TestAccountExport(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	creds, err := client.Register(ctx, ts.httpBase, "alice", "alice-password")
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := ts.connectToken(t, creds.Token, "a1", "cli", transports[0])
	bobTok := ts.mint(t, "bob")
	bob, _ := ts.connectToken(t, bobTok, "b1", "cli", transports[0])
	ts.mint(t, "carol")
	carol := ts.dialOnly(t, "carol", "c1", "cli")

	if _, err := alice.SendText(ctx, "bob", "alice-to-bob-export-text"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.SendText(ctx, "alice", "bob-to-alice-export-text"); err != nil {
		t.Fatal(err)
	}
	g, err := carol.CreateGroup(ctx, &pb.CreateGroup{Name: "trip", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendToConversation(ctx, g.ConversationId, "text/plain", []byte("before-alice-joined")); err != nil {
		t.Fatal(err)
	}
	if err := carol.AddMembers(ctx, g.ConversationId, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendToConversation(ctx, g.ConversationId, "text/plain", []byte("after-alice-joined")); err != nil {
		t.Fatal(err)
	}
	if err := alice.FriendRequest(ctx, "bob", "hi"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Block(ctx, "mallory"); err != nil {
		t.Fatal(err)
	}
	fileBody := []byte("file-content-of-alice-0123456789")
	att, err := ts.http().UploadFile(ctx, creds.Token, "notes.txt", bytes.NewReader(fileBody), int64(len(fileBody)))
	if err != nil {
		t.Fatal(err)
	}

	job, err := ts.http().StartExport(ctx, creds.Token)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ts.http().StartExport(ctx, creds.Token)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != job.ID {
		// A new export replaces only one that has ended (a fast first one
		// can end between the two requests); the replaced one is gone.
		first, err := ts.http().Export(ctx, creds.Token, job.ID)
		if err == nil && (first.State == "running" || first.State == "pending") {
			t.Fatalf("a second export started while the first ran: %+v", first)
		}
		if err != nil && !hasCode(err, 404, "not_found") {
			t.Fatal(err)
		}
	}
	job = waitExport(t, ts, creds.Token, again.ID)
	if job.State != "ready" || job.Size == 0 || job.ExpiresAt.IsZero() {
		t.Fatalf("export ended as %+v", job)
	}

	// Bob cannot see or download alice's export; the answer is the one a
	// missing id gets.
	_, errOther := ts.http().Export(ctx, bobTok, job.ID)
	_, errNone := ts.http().Export(ctx, bobTok, "0123456789abcdef0123456789abcdef")
	if !hasCode(errOther, 404, "not_found") || fmt.Sprint(errOther) != fmt.Sprint(errNone) {
		t.Fatalf("bob reading alice's export: %v; a missing one: %v", errOther, errNone)
	}
	st1, b1 := httpDo(t, "GET", ts.httpBase+"/v1/account/exports/"+job.ID+"/archive", bearer(bobTok), nil)
	st2, b2 := httpDo(t, "GET", ts.httpBase+"/v1/account/exports/0123456789abcdef0123456789abcdef/archive", bearer(bobTok), nil)
	if st1 != 404 || st1 != st2 || !bytes.Equal(b1, b2) {
		t.Fatalf("bob downloading alice's archive: %d %s; a missing one: %d %s", st1, b1, st2, b2)
	}

	var buf bytes.Buffer
	if _, err := ts.http().DownloadExport(ctx, creds.Token, job.ID, &buf); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("the archive is not a zip: %v", err)
	}
	var profile struct {
		UserID      string `json:"user_id"`
		HasPassword bool   `json:"has_password"`
	}
	if err := json.Unmarshal(zipFile(t, zr, "profile.json"), &profile); err != nil || profile.UserID != "alice" || !profile.HasPassword {
		t.Fatalf("profile.json: %+v, %v", profile, err)
	}
	if s := string(zipFile(t, zr, "profile.json")); strings.Contains(s, "argon2") {
		t.Fatalf("the password hash is in the export: %s", s)
	}
	var contacts []struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(zipFile(t, zr, "contacts.json"), &contacts); err != nil || len(contacts) != 1 || contacts[0].UserID != "bob" {
		t.Fatalf("contacts.json: %+v, %v", contacts, err)
	}
	if s := string(zipFile(t, zr, "blocked.json")); !strings.Contains(s, "mallory") {
		t.Fatalf("blocked.json: %s", s)
	}
	var groups []struct {
		ConversationID string `json:"conversation_id"`
		Role           string `json:"role"`
	}
	if err := json.Unmarshal(zipFile(t, zr, "groups.json"), &groups); err != nil || len(groups) != 1 ||
		groups[0].ConversationID != g.ConversationId || groups[0].Role != "GROUP_ROLE_MEMBER" {
		t.Fatalf("groups.json: %+v, %v", groups, err)
	}
	var convs []struct {
		ConversationID string `json:"conversation_id"`
		MessagesFile   string `json:"messages_file"`
	}
	if err := json.Unmarshal(zipFile(t, zr, "conversations.json"), &convs); err != nil || len(convs) != 2 {
		t.Fatalf("conversations.json: %+v, %v", convs, err)
	}
	all := ""
	for _, c := range convs {
		all += string(zipFile(t, zr, c.MessagesFile))
	}
	for _, want := range []string{"alice-to-bob-export-text", "bob-to-alice-export-text", "after-alice-joined"} {
		if !strings.Contains(all, b64(want)) {
			t.Fatalf("the export's messages lack %q", want)
		}
	}
	if strings.Contains(all, b64("before-alice-joined")) {
		t.Fatalf("the export holds a group message from before alice joined")
	}
	var files []struct {
		ID   string `json:"id"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal(zipFile(t, zr, "files.json"), &files); err != nil || len(files) != 1 || files[0].ID != att.Id {
		t.Fatalf("files.json: %+v, %v", files, err)
	}
	if got := zipFile(t, zr, files[0].Path); !bytes.Equal(got, fileBody) {
		t.Fatalf("the exported file holds %q", got)
	}

	// The admin API sees the same job and archive.
	aj, err := adminClient(ts).Export(ctx, job.ID)
	if err != nil || aj.UserID != "alice" || aj.State != "ready" {
		t.Fatalf("admin export view: %+v, %v", aj, err)
	}
	var abuf bytes.Buffer
	if _, err := adminClient(ts).DownloadExport(ctx, job.ID, &abuf); err != nil || !bytes.Equal(abuf.Bytes(), buf.Bytes()) {
		t.Fatalf("admin download: %d bytes, %v", abuf.Len(), err)
	}
	// An export started through the admin API is in the audit log.
	bj, err := adminClient(ts).StartExport(ctx, "bob")
	if err != nil || bj.UserID != "bob" {
		t.Fatalf("admin export of bob: %+v, %v", bj, err)
	}
	entries, _, err := adminClient(ts).AuditLog(ctx, 0, 10)
	if err != nil || len(entries) == 0 || entries[0].Action != "POST /v1/admin/users/{id}/exports" ||
		entries[0].Target != "/v1/admin/users/bob/exports" || !strings.Contains(string(entries[0].Detail), bj.ID) {
		t.Fatalf("audit log after an admin export: %+v, %v", entries, err)
	}
	if _, err := adminClient(ts).StartExport(ctx, "nobody"); !hasCode(err, 404, "not_found") {
		t.Fatalf("admin export of a missing user: %v", err)
	}
}

// b64 is how protocol JSON shows a payload.
func b64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

// storeHolds reports which files under dir contain any of needles.
func storeHolds(t *testing.T, dir string, needles ...[]byte) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // removed meanwhile
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				out = append(out, filepath.Base(p)+" has "+string(n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Deleting an account: the user's sessions end and they cannot log in;
// their group passes on and the members see them leave; their messages
// keep their seqs without content; search finds nothing of them; no byte
// of their messages or password hash is left in any file of the store;
// their file is gone; the id cannot be registered again.
func TestAccountDeletion(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	// The store and the search index that follows it.
	dirs := []string{filepath.Join(ts.cfg.DataDir, "store"), filepath.Join(ts.cfg.DataDir, "search")}
	testDeletion(t, ts, func(needles ...[]byte) []string {
		return append(storeHolds(t, dirs[0], needles...), storeHolds(t, dirs[1], needles...)...)
	})
}

// The same on PostgreSQL: no row of any table of the schema holds the
// marker or the hash (as text, or as bytea's hex form).
func TestPGAccountDeletion(t *testing.T) {
	t.Parallel()
	usePG := pgConfig(t)
	var url, schema string
	ts := startServer(t, func(c *server.Config) { usePG(c); url, schema = c.PostgresURL, c.PostgresSchema })
	testDeletion(t, ts, func(needles ...[]byte) []string { return pgHolds(t, url, schema, needles...) })
}

// pgHolds reports which tables of schema have a row holding any of needles.
func pgHolds(t *testing.T, url, schema string, needles ...[]byte) []string {
	t.Helper()
	ctx := ctx10(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, tb := range tables {
		rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT t::text FROM %s.%s t`, schema, tb))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			rows.Scan(&row)
			for _, n := range needles {
				if strings.Contains(row, string(n)) || strings.Contains(row, hex.EncodeToString(n)) {
					out = append(out, tb+" has "+string(n))
				}
			}
		}
		rows.Close()
	}
	return out
}

func testDeletion(t *testing.T, ts *testServer, rawHolds func(needles ...[]byte) []string) {
	ctx := ctx10(t)
	const password = "alice-password-4f9c2"
	creds, err := client.Register(ctx, ts.httpBase, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	alice, arec := ts.connectToken(t, creds.Token, "a1", "cli", transports[2])
	bobTok := ts.mint(t, "bob")
	bob, brec := ts.connectToken(t, bobTok, "b1", "cli", transports[0])
	ts.mint(t, "carol")

	marker := "zq-marker-7d41c0e9b2"
	if _, err := bob.SendText(ctx, "alice", "from bob, kept"); err != nil {
		t.Fatal(err)
	}
	ack, err := alice.SendText(ctx, "bob", marker+" direct")
	if err != nil {
		t.Fatal(err)
	}
	dm := ack.ConversationId
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "trip", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SendToConversation(ctx, g.ConversationId, "text/plain", []byte(marker+" group")); err != nil {
		t.Fatal(err)
	}
	if err := alice.FriendRequest(ctx, "bob", "hi"); err != nil {
		t.Fatal(err)
	}
	fileBody := []byte("zq-file-bytes-1b7e55aa")
	if _, err := ts.http().UploadFile(ctx, creds.Token, "secret.txt", bytes.NewReader(fileBody), int64(len(fileBody))); err != nil {
		t.Fatal(err)
	}
	waitFound(t, bob, marker, dm+"#2", g.ConversationId+"#2")
	before, err := bob.History(ctx, dm, 0, 100)
	if err != nil {
		t.Fatal(err)
	}

	// The hash as stored: the admin API does not show it, so it is found
	// by its form wherever the store keeps the user.
	hash := []byte("$argon2id$")
	if got := rawHolds(hash, []byte(marker)); len(got) < 2 {
		t.Fatalf("before the deletion the store holds only %v: the check below could not fail", got)
	}

	if _, err := ts.http().DeleteAccount(ctx, creds.Token, "wrong-password"); !hasCode(err, 401, "invalid_credentials") {
		t.Fatalf("deletion with a wrong password: %v", err)
	}
	if _, err := ts.http().DeleteAccount(ctx, creds.Token, password); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's session closes", func() bool { closed, _ := arec.isClosed(); return closed })
	if _, err := client.Login(ctx, ts.httpBase, "alice", password); !hasCode(err, 401, "invalid_credentials") {
		t.Fatalf("login after deletion: %v", err)
	}
	eventually(t, "the deletion finishes", func() bool {
		d, err := adminClient(ts).Deletion(ctx, "alice")
		return err == nil && d.State == "done"
	})

	// The group passed to the oldest remaining member and bob saw alice leave.
	eventually(t, "bob sees alice leave", func() bool {
		owner, left := false, false
		for _, m := range brec.messages() {
			if m.ConversationId != g.ConversationId {
				continue
			}
			owner = owner || m.Kind == pb.MessageKind_MESSAGE_KIND_OWNER_CHANGED
			left = left || (m.Kind == pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED && m.From == "alice" &&
				len(m.GetEvent().GetUserIds()) == 1 && m.GetEvent().GetUserIds()[0] == "alice")
		}
		return owner && left
	})
	info, err := bob.GetGroup(ctx, g.ConversationId)
	if err != nil || info.Owner == "alice" || info.Owner == "" {
		t.Fatalf("group after deletion: %v, %v", info, err)
	}

	after, err := bob.History(ctx, dm, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Messages) != len(before.Messages) {
		t.Fatalf("%d messages after, %d before", len(after.Messages), len(before.Messages))
	}
	for i, m := range after.Messages {
		if m.Seq != before.Messages[i].Seq || m.From != before.Messages[i].From {
			t.Fatalf("message %d changed place: %v, was %v", i, m, before.Messages[i])
		}
		if m.From == "alice" && (len(m.Payload) != 0 || !m.Recalled) {
			t.Fatalf("alice's message kept its content: %v", m)
		}
		if m.From == "bob" && string(m.Payload) != "from bob, kept" {
			t.Fatalf("bob's message changed: %v", m)
		}
	}
	waitFound(t, bob, marker)

	// No byte of the marker, the hash or the file is left on disk.
	eventually(t, "the store holds nothing of alice's", func() bool {
		got := rawHolds(hash, []byte(marker))
		if len(got) > 0 {
			t.Logf("still: %v", got)
		}
		return len(got) == 0
	})
	if got := storeHolds(t, filepath.Join(ts.cfg.DataDir, "media"), fileBody); len(got) != 0 {
		t.Fatalf("alice's file is still in the media store: %v", got)
	}

	// The id stays taken; the admin API cannot bring it back either.
	if _, err := client.Register(ctx, ts.httpBase, "alice", "another-password"); !hasCode(err, 409, "conflict") {
		t.Fatalf("registering the deleted id: %v", err)
	}
	if _, err := client.Register(ctx, ts.httpBase, "ALICE", "another-password"); !hasCode(err, 409, "conflict") {
		t.Fatalf("registering the deleted name in another case: %v", err)
	}
	if _, err := adminClient(ts).MintToken(ctx, "alice", 0); !isHTTP(err, 403) {
		t.Fatalf("minting a token of the deleted user: %v", err)
	}
	// The admin API shows the tombstone and will not bring it back.
	if u, err := adminClient(ts).GetUser(ctx, "alice"); err != nil || !u.Deleted || !u.Disabled || u.HasPassword {
		t.Fatalf("admin view of the deleted user: %+v, %v", u, err)
	}
	if _, err := adminClient(ts).SetDisabled(ctx, "alice", false); !hasCode(err, 409, "conflict") {
		t.Fatalf("enabling the deleted user: %v", err)
	}
	if u, err := adminClient(ts).GetUser(ctx, "bob"); err != nil || u.Deleted {
		t.Fatalf("admin view of bob: %+v, %v", u, err)
	}
	// Deleting again is a no-op that reports the deletion.
	if d, err := adminClient(ts).DeleteUser(ctx, "alice"); err != nil || d.State != "done" {
		t.Fatalf("deleting again: %+v, %v", d, err)
	}
	if _, err := adminClient(ts).DeleteUser(ctx, "nobody"); !hasCode(err, 404, "not_found") {
		t.Fatalf("deleting a missing user: %v", err)
	}
	entries, _, err := adminClient(ts).AuditLog(ctx, 0, 10)
	if err != nil || len(entries) == 0 || entries[0].Action != "DELETE /v1/admin/users/{id}" || entries[0].Target != "/v1/admin/users/alice" {
		t.Fatalf("audit log after an admin deletion: %+v, %v", entries, err)
	}
}

// A deletion cut short (here: the node stopped right after recording it,
// before doing anything) is finished by the next start: the user is
// locked out and their messages are erased without anyone asking again.
func TestAccountDeletionResumesAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	ctx := ctx10(t)
	creds, err := client.Register(ctx, ts.httpBase, "alice", "alice-password")
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := ts.connectToken(t, creds.Token, "a1", "cli", transports[0])
	ack, err := alice.SendText(ctx, "bob", "sent before the crash")
	if err != nil {
		t.Fatal(err)
	}
	alice.Close()
	shutdown(t, ts)

	// What Delete records first, as the stopped node left it.
	st, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSetting(ctx, "account/deletion/alice", []byte(`{"user_id":"alice","state":"running","by":"user","started_at":"2026-11-27T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSetting(ctx, "account/deletions", []byte(`["alice"]`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	ts = startServer(t, func(c *server.Config) { c.DataDir = dir })
	eventually(t, "the deletion finishes after the restart", func() bool {
		d, err := adminClient(ts).Deletion(ctx, "alice")
		return err == nil && d.State == "done"
	})
	if _, err := client.Login(ctx, ts.httpBase, "alice", "alice-password"); !hasCode(err, 401, "invalid_credentials") {
		t.Fatalf("login after the resumed deletion: %v", err)
	}
	bob := ts.dialOnly(t, "bob", "b1", "cli")
	page, err := bob.History(ctx, ack.ConversationId, 0, 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Seq != ack.Seq || len(page.Messages[0].Payload) != 0 {
		t.Fatalf("alice's message after the resumed deletion: %v, %v", page, err)
	}
}
