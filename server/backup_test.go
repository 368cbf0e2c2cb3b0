package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/backup"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// requestBackup POSTs /v1/admin/backup with key and returns the answer
// (the caller closes its body).
func requestBackup(t *testing.T, ts *testServer, key string, secrets bool) *http.Response {
	t.Helper()
	u := ts.httpBase + "/v1/admin/backup"
	if secrets {
		u += "?secrets=true"
	}
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("backup request: %v", err)
	}
	return resp
}

// backupInto takes a backup of ts over HTTP and restores it into a new
// directory, which it returns with the archive's manifest.
func backupInto(t *testing.T, ts *testServer, secrets bool) (string, *backup.Manifest) {
	t.Helper()
	resp := requestBackup(t, ts, testAPIKey, secrets)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("backup: HTTP %d: %s", resp.StatusCode, b)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	m, err := backup.Restore(resp.Body, dir, backup.Limits{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return dir, m
}

type backupAcked struct {
	conv, text string
	seq        uint64
}

// TestBackupUnderLoad: a backup taken while senders send and wait for their
// acks restores into a data directory on which a server serves every
// message acked before the backup was asked for, at its seq, with no gap;
// a new send goes on at the next seq; the search index is rebuilt by the
// restored server by itself; tokens issued before work on the restored
// server only when the backup included the secrets.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	const senders = 4
	tokens := make([]string, senders)
	var mu sync.Mutex
	var acked []backupAcked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for i := range senders {
		tokens[i] = ts.mint(t, fmt.Sprintf("s%d", i))
		c, _ := ts.connectToken(t, tokens[i], "d", "test", transports[i%len(transports)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("walrus%d x%d", i, n)
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ack, err := c.SendText(sctx, fmt.Sprintf("r%d", i), text)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("sender %d: %w", i, err)
					return
				}
				mu.Lock()
				acked = append(acked, backupAcked{ack.ConversationId, text, ack.Seq})
				mu.Unlock()
			}
		}()
	}
	ackedNow := func() []backupAcked { mu.Lock(); defer mu.Unlock(); return append([]backupAcked(nil), acked...) }
	eventually(t, "100 messages acked", func() bool { return len(ackedNow()) >= 100 })
	before := ackedNow() // acked before the backup request starts
	dir, m := backupInto(t, ts, true)
	after := len(ackedNow())
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d messages acked before the backup, %d when it ended; archive: %d files, %d bytes", len(before), after, len(m.Files), m.Bytes())
	if after == len(before) {
		t.Log("no send completed during the backup")
	}
	if _, err := os.Stat(filepath.Join(ts.cfg.DataDir, backup.TempDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the snapshot directory is still there after the backup: %v", err)
	}

	rs := startServer(t, func(c *server.Config) { c.DataDir = dir })
	admin := adminClient(rs)
	last := map[string]uint64{} // conversation → newest seq served
	served := map[string]map[uint64]string{}
	for _, a := range before {
		if served[a.conv] != nil {
			continue
		}
		served[a.conv] = map[uint64]string{}
		var seq uint64
		for {
			page, err := admin.Messages(ctx, a.conv, seq, true, 200)
			if err != nil {
				t.Fatalf("messages of %s: %v", a.conv, err)
			}
			if len(page.Messages) == 0 {
				break
			}
			for _, msg := range page.Messages {
				if msg.Seq != seq+1 {
					t.Fatalf("%s: seq %d after %d: a gap or disorder", a.conv, msg.Seq, seq)
				}
				seq = msg.Seq
				served[a.conv][seq] = string(msg.Payload)
			}
		}
		last[a.conv] = seq
	}
	for _, a := range before {
		if got, ok := served[a.conv][a.seq]; !ok || got != a.text {
			t.Fatalf("%s seq %d: restored %q (present %v), acked %q before the backup", a.conv, a.seq, got, ok, a.text)
		}
	}

	// The old token works (secrets restored); a send continues the seqs.
	c, _ := rs.connectToken(t, tokens[0], "d", "test", transports[0])
	ack, err := c.SendText(ctx, "r0", "after the restore")
	if err != nil {
		t.Fatalf("send on the restored server: %v", err)
	}
	if want := last[ack.ConversationId] + 1; ack.Seq != want {
		t.Fatalf("send on the restored server got seq %d, want %d", ack.Seq, want)
	}

	// The index was not in the archive: the restored server builds it.
	eventually(t, "the restored server's search index to catch up", func() bool {
		res, err := admin.Search(ctx, &pb.Search{Query: "walrus0"})
		return err == nil && len(res.Hits) > 0
	})

	// Without secrets: the server refuses the directory unless told to
	// make new secrets, and then the old tokens are refused.
	shutdown(t, rs)
	dir2, m2 := backupInto(t, ts, false)
	for _, f := range m2.Files {
		if f.Path == backup.SecretsFile {
			t.Fatal("secrets.json archived without ?secrets=true")
		}
	}
	cfg := ts.cfg
	cfg.DataDir, cfg.HTTPAddr, cfg.TCPAddr = dir2, "127.0.0.1:0", "127.0.0.1:0"
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "secrets.json") {
		t.Fatalf("server on a restored directory without secrets.json: %v, want a refusal naming secrets.json", err)
	}
	ns := startServer(t, func(c *server.Config) { c.DataDir = dir2; c.NewSecrets = true })
	if _, _, err := dialRecorded(t, client.Options{Addr: ns.wsURL, Token: tokens[0], DeviceID: "d", DeviceType: "test", Codec: wire.Proto}); err == nil {
		t.Fatal("a token issued before was accepted by a server restored without secrets")
	}
	if _, _, err := dialRecorded(t, client.Options{Addr: ns.wsURL, Token: ns.mint(t, "s0"), DeviceID: "d", DeviceType: "test", Codec: wire.Proto}); err != nil {
		t.Fatalf("a token of the new secrets is refused: %v", err)
	}
	if page, err := adminClient(ns).Messages(ctx, before[0].conv, 0, true, 10); err != nil || len(page.Messages) == 0 {
		t.Fatalf("messages on the server restored without secrets: %v", err)
	}
}

// TestBackupRefused: the backup needs an admin API key (a user's token is
// not one); a backup that is given is audited.
func TestBackupRefused(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tok := ts.mint(t, "ann")
	for _, hdr := range []map[string]string{nil, {"X-Api-Key": "wrong"}, bearer(tok)} {
		code, body := httpDo(t, http.MethodPost, ts.httpBase+"/v1/admin/backup", hdr, nil)
		if code != http.StatusUnauthorized || !strings.Contains(string(body), "unauthenticated") {
			t.Fatalf("backup with %v: HTTP %d %s, want 401 unauthenticated", hdr, code, body)
		}
	}
	if code, _ := httpDo(t, http.MethodGet, ts.httpBase+"/v1/admin/backup", map[string]string{"X-Api-Key": testAPIKey}, nil); code == http.StatusOK {
		t.Fatal("GET /v1/admin/backup answered 200")
	}
	entries, _, err := adminClient(ts).AuditLog(ctx10(t), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Action == "POST /v1/admin/backup" {
			t.Fatalf("a refused backup was audited: %+v", e)
		}
	}
	backupInto(t, ts, false)
	entries, _, err = adminClient(ts).AuditLog(ctx10(t), 0, 10)
	if err != nil || len(entries) == 0 || entries[0].Action != "POST /v1/admin/backup" {
		t.Fatalf("audit log after a backup: %+v, %v", entries, err)
	}
}

// TestBackupSnapshotRemoved: the snapshot a backup keeps in the data
// directory is removed when the client goes away mid-stream, and one left
// by a crash is removed when the server starts.
func TestBackupSnapshotRemoved(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	leftover := filepath.Join(data, backup.TempDir, "store")
	if err := os.MkdirAll(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *server.Config) { c.DataDir = data })
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crashed backup's snapshot survived the start: %v", err)
	}
	// A media file larger than the sockets' buffers: the stream is cut
	// while the server is still writing it.
	big := filepath.Join(data, "media", "zz", "big")
	if err := os.MkdirAll(filepath.Dir(big), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	resp := requestBackup(t, ts, testAPIKey, false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup: HTTP %d", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away
	eventually(t, "the snapshot to be removed", func() bool {
		_, err := os.Stat(filepath.Join(data, backup.TempDir))
		return errors.Is(err, os.ErrNotExist)
	})
	// The next backup runs (the first released its lock) and holds the file.
	_, m := backupInto(t, ts, false)
	found := false
	for _, f := range m.Files {
		found = found || f.Path == "media/zz/big"
	}
	if !found {
		t.Fatal("the local media file is not in the archive")
	}
}

// TestBackupRefusedOnPostgres: on PostgreSQL the answer says to back up
// the database with its own tools (docs/backup.md).
func TestBackupRefusedOnPostgres(t *testing.T) {
	usePG := pgConfig(t)
	t.Parallel()
	ts := startServer(t, usePG)
	code, body := httpDo(t, http.MethodPost, ts.httpBase+"/v1/admin/backup", map[string]string{"X-Api-Key": testAPIKey}, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "pg_dump") {
		t.Fatalf("backup on PostgreSQL: HTTP %d %s, want 400 naming pg_dump", code, body)
	}
	if _, err := os.Stat(filepath.Join(ts.cfg.DataDir, backup.TempDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a snapshot directory was made: %v", err)
	}
}
