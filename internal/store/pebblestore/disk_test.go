package pebblestore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func timeIn(hours int) time.Time { return time.Now().Add(time.Duration(hours) * time.Hour) }

func filesWithSuffix(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkGapFree asserts conv holds seqs 1..n and returns n.
func checkGapFree(t *testing.T, s *Store, conv string) uint64 {
	t.Helper()
	got, err := s.Messages(context.Background(), conv, 0, 1<<30)
	if err != nil {
		t.Fatalf("Messages(%q): %v", conv, err)
	}
	for i, m := range got {
		if m.Seq != uint64(i+1) {
			t.Fatalf("%s: position %d holds seq %d", conv, i, m.Seq)
		}
	}
	return uint64(len(got))
}

// TestTornWALTail: a WAL cut short after its bytes were synced (a lost
// tail of acknowledged writes, not a crash mid-write) is refused at Open
// with ErrDataLoss; with AcceptDataLoss the store opens, what survives is a
// gap-free prefix, appends continue from it, and the next Open is clean.
func TestTornWALTail(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	for b := 0; b < 20; b++ {
		mustAppend(t, s, message("c1", "alice", "bob", fmt.Sprint(b)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs := filesWithSuffix(t, dir, ".log")
	if len(logs) == 0 {
		t.Fatal("no WAL file found")
	}
	wal := logs[len(logs)-1]
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, fi.Size()-100); err != nil {
		t.Fatal(err)
	}

	if s, err := Open(dir, Options{Logger: quiet}); !errors.Is(err, ErrDataLoss) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open after cutting synced bytes off the WAL: %v, want ErrDataLoss", err)
	}
	s, err = Open(dir, Options{Logger: quiet, AcceptDataLoss: true})
	if err != nil {
		t.Fatalf("Open with AcceptDataLoss: %v", err)
	}
	n := checkGapFree(t, s, "c1")
	if n == 0 || n >= 20 {
		t.Fatalf("after cutting the WAL tail %d messages remain; want some but not all 20", n)
	}
	res := mustAppend(t, s, message("c1", "alice", "bob", "new"))
	if res[0].Msg.Seq != n+1 {
		t.Fatalf("append after torn tail: seq %d, want %d", res[0].Msg.Seq, n+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir) // the accepted state is the new baseline
	defer s.Close()
	if got := checkGapFree(t, s, "c1"); got != n+1 {
		t.Fatalf("after reopening: %d messages, want %d", got, n+1)
	}
}

// TestMissingWALIsRefused: a store whose WAL (still holding writes not yet
// in tables) was deleted is refused with ErrDataLoss, not opened without
// them. An older WAL deleted beside a newer one is the same case to the
// check: any WAL recorded with synced bytes that is gone.
func TestMissingWALIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	for b := 0; b < 10; b++ {
		mustAppend(t, s, message("c1", "alice", "bob", fmt.Sprint("a", b)))
	}
	s.Close()
	logs := filesWithSuffix(t, dir, ".log")
	if len(logs) == 0 {
		t.Fatal("no WAL")
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir, Options{Logger: quiet})
	if err == nil {
		n := checkGapFree(t, s, "c1")
		s.Close()
		t.Fatalf("Open after deleting the WAL succeeded (c1 holds %d of 10)", n)
	}
	if !errors.Is(err, ErrDataLoss) || !strings.Contains(err.Error(), filepath.Base(logs[0])+" is missing") {
		t.Fatalf("Open after deleting the WAL: %v, want ErrDataLoss naming %s", err, filepath.Base(logs[0]))
	}
}

// TestWALGuardNoFalseAlarms: many opens and closes, memtable flushes that
// retire WALs, and WAL recycling never make Open report a loss.
func TestWALGuardNoFalseAlarms(t *testing.T) {
	dir := t.TempDir()
	payload := make([]byte, 60<<10)
	for round := 0; round < 4; round++ {
		s := openAt(t, dir)
		// ~40 MiB per round rotates the 32 MiB memtable: a WAL is retired
		// (removed or recycled) while the store runs.
		for b := 0; b < 700; b++ {
			m := message("c1", "alice", "bob", fmt.Sprint(round, "-", b))
			m.Payload = payload
			mustAppend(t, s, m)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := openAt(t, dir)
	defer s.Close()
	if n := checkGapFree(t, s, "c1"); n != 4*700 {
		t.Fatalf("%d messages, want %d", n, 4*700)
	}
}

// TestCorruptTableBlock: a flipped bit inside a table file is caught by a
// checksum; the store opens, reads touching the bad block return ErrCorrupt,
// appends continue the conversation's seqs, and conversations stored
// elsewhere are served.
func TestCorruptTableBlock(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	// c1: 20 incompressible 1 KiB messages, then the marker as the newest;
	// c5 (20 KiB more) sorts between c1 and c9, so the marker's data block
	// (~4 KiB) cannot hold c9's keys.
	filler := func(conv string) (out []*pb.Message) {
		for i := 0; i < 20; i++ {
			m := message(conv, "alice", "bob", conv+fmt.Sprint(i))
			m.Payload = make([]byte, 1024)
			_, _ = rand.Read(m.Payload)
			out = append(out, m)
		}
		return out
	}
	mustAppend(t, s, filler("c5")...)
	in := filler("c1")
	marker := make([]byte, 64)
	_, _ = rand.Read(marker) // incompressible, so stored verbatim and findable
	m := message("c1", "alice", "bob", "marker")
	m.Payload = marker
	mustAppend(t, s, append(in, m)...)
	mustAppend(t, s, message("c9", "carol", "", "1"))
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for _, f := range filesWithSuffix(t, dir, ".sst") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, marker); i >= 0 {
			data[i+10] ^= 0x01
			if err := os.WriteFile(f, data, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped++
		}
	}
	if flipped != 1 {
		t.Fatalf("payload found in %d table files, want 1", flipped)
	}

	s = openAt(t, dir)
	defer s.Close()
	ctx := context.Background()
	got, err := s.Messages(ctx, "c1", 0, 100)
	if !errors.Is(err, store.ErrCorrupt) || got != nil {
		t.Fatalf("Messages over a corrupt block = %d messages, %v; want none, ErrCorrupt", len(got), err)
	}
	// The newest seq comes from its own record, so c1 continues at 22
	// rather than failing or restarting.
	if res := mustAppend(t, s, message("c1", "alice", "bob", "new")); res[0].Msg.Seq != 22 {
		t.Fatalf("Append to c1: seq %d, want 22", res[0].Msg.Seq)
	}
	if got, err := s.Messages(ctx, "c9", 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("Messages(c9) = %v, %v", got, err)
	}
	res := mustAppend(t, s, message("c9", "carol", "", "2"))
	if res[0].Msg.Seq != 2 {
		t.Fatalf("Append to c9: seq %d, want 2", res[0].Msg.Seq)
	}
}

const crashDirEnv = "PEBBLESTORE_CRASH_DIR"

// TestCrashChild is the process TestKill9DuringBurst kills. It appends
// until killed, printing each acknowledged message after Append returns.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9DuringBurst")
	}
	s, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	convs := []string{"c0", "c1", "c2", "c3"}
	for b := 0; ; b++ {
		var in []*pb.Message
		for i := 0; i < 16; i++ {
			id := fmt.Sprintf("%d-%d", b, i)
			if i == 15 && b > 0 {
				id = fmt.Sprintf("%d-%d", b-1, 3) // a resend now and then
			}
			in = append(in, message(convs[(b+i)%len(convs)], "alice", "", id))
		}
		res, err := s.Append(context.Background(), in)
		if err != nil {
			fmt.Println("append:", err)
			os.Exit(2)
		}
		var out strings.Builder
		for _, r := range res {
			fmt.Fprintf(&out, "ack %s %d %s\n", r.Msg.ConversationId, r.Msg.Seq, r.Msg.ClientMsgId)
		}
		os.Stdout.WriteString(out.String())
	}
}

// TestKill9DuringBurst (reliability case 1): SIGKILL a process in the middle
// of durable appends, reopen, and check that every acknowledged message is
// there with its seq, seqs are gap-free, and resends are de-duplicated.
func TestKill9DuringBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		conv string
		seq  uint64
	}
	acked := map[string]ack{} // client id → where it was acknowledged
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		var a ack
		var id string
		if _, err := fmt.Sscanf(sc.Text(), "ack %s %d %s", &a.conv, &a.seq, &id); err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		if prev, ok := acked[id]; ok && prev != a {
			t.Fatalf("%s acknowledged as %v and %v", id, prev, a)
		}
		acked[id] = a
		if len(acked) >= 3000 && !killed {
			_ = cmd.Process.Kill() // SIGKILL; lines already written are still read
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child exited on its own after %d acks", len(acked))
	}

	s := openAt(t, dir)
	defer s.Close()
	ctx := context.Background()
	stored := map[string]ack{}
	for _, c := range []string{"c0", "c1", "c2", "c3"} {
		checkGapFree(t, s, c)
		msgs, err := s.Messages(ctx, c, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if _, dup := stored[m.ClientMsgId]; dup {
				t.Fatalf("%s stored twice", m.ClientMsgId)
			}
			stored[m.ClientMsgId] = ack{m.ConversationId, m.Seq}
		}
	}
	var resend []*pb.Message
	for id, a := range acked {
		if stored[id] != a {
			t.Fatalf("acknowledged %s at %v, after restart found %v", id, a, stored[id])
		}
		resend = append(resend, message(a.conv, "alice", "", id))
	}
	res, err := s.Append(ctx, resend)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Duplicate || r.Msg.Seq != acked[resend[i].ClientMsgId].seq {
			t.Fatalf("resend of %s after crash: seq %d duplicate %v", resend[i].ClientMsgId, r.Msg.Seq, r.Duplicate)
		}
	}
	t.Logf("%d acknowledged before SIGKILL, %d stored", len(acked), len(stored))
}
