package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/faultfs"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// smallDisk is a data directory on a small volume the test can fill and
// free: a real tmpfs when the test runs as root, else a fault-injecting
// filesystem under the store with a byte budget.
type smallDisk struct {
	dir     string
	mod     func(*server.Config) // hands the store its filesystem (fault FS only)
	free    func(t *testing.T)   // frees fillerBytes, once per call
	squeeze func(t *testing.T)   // fills the volume from outside the store
}

const (
	diskBytes   = 64 << 20
	fillerBytes = 16 << 20
	fillers     = 2
)

func newSmallDisk(t *testing.T, tmpfs bool) *smallDisk {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if tmpfs {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", diskBytes)); err == nil {
			t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
			// Fillers take space now so the test can free it later.
			for i := range fillers {
				name := filepath.Join(dir, fmt.Sprintf("filler-%d", i))
				if err := os.WriteFile(name, make([]byte, fillerBytes), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			next := 0
			return &smallDisk{dir: dir, free: func(t *testing.T) {
				if err := os.Remove(filepath.Join(dir, fmt.Sprintf("filler-%d", next))); err != nil {
					t.Fatal(err)
				}
				next++
			}, squeeze: func(t *testing.T) {
				f, err := os.Create(filepath.Join(dir, "squeeze"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := f.Write(buf); err != nil {
						return // ENOSPC: the volume is full
					}
				}
			}}
		} else {
			t.Logf("mount tmpfs: %v; using the fault-injecting filesystem", err)
		}
	}
	budget := int64(diskBytes - fillers*fillerBytes)
	fs := faultfs.New(nil, budget)
	return &smallDisk{dir: dir, mod: func(c *server.Config) { server.SetStoreFSForTest(c, fs) }, free: func(*testing.T) {
		budget += fillerBytes
		fs.SetBudget(budget)
	}, squeeze: func(*testing.T) {
		budget = fs.Used()
		fs.SetBudget(budget)
	}}
}

type ackedMsg struct {
	seq     uint64
	payload []byte
}

// fillUntilRefused sends 60 KiB messages from c to "bob" until one is
// refused with UNAVAILABLE while /readyz says the disk is full (the store
// may accept writes again for a moment when a flush or compaction frees
// space). It returns the conversation, the ACKed messages and how many
// sends were refused.
func fillUntilRefused(t *testing.T, ts *testServer, c *client.Client, tag string) (string, []ackedMsg, int) {
	t.Helper()
	var conv string
	var acked []ackedMsg
	refused := 0
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatalf("%s: 10000 sends of 60 KiB on a %d MiB volume were never refused", tag, diskBytes>>20)
		}
		p := make([]byte, 60<<10)
		_, _ = rand.Read(p)
		ack, err := c.Send(context.Background(), &pb.Send{To: "bob", ContentType: "bin", Payload: p, ClientMsgId: fmt.Sprintf("%s-%d", tag, i)})
		if client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
			refused++
			if len(acked) == 0 {
				t.Fatalf("%s: the first send was refused", tag)
			}
			if code, _ := adminGet(t, ts.httpBase+"/readyz"); code == http.StatusServiceUnavailable {
				t.Logf("%s: %d sends ACKed, %d refused: %v", tag, len(acked), refused, err)
				return conv, acked, refused
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: send %d: %v (want an ACK or UNAVAILABLE)", tag, i, err)
		}
		conv = ack.ConversationId
		acked = append(acked, ackedMsg{seq: ack.Seq, payload: p})
	}
}

// checkAllReadable syncs and pages history of conv as bob and checks every
// ACKed message is there with its payload.
func checkAllReadable(t *testing.T, ts *testServer, bobToken, conv string, acked []ackedMsg) {
	t.Helper()
	bob, _ := ts.connectToken(t, bobToken, "bob-"+strconv.Itoa(len(acked)), "desktop", transports[2])
	ctx := ctx10(t)
	got := map[uint64][]byte{}
	for after := uint64(0); ; {
		page, err := bob.SyncMessages(ctx, conv, after, 16)
		if err != nil {
			t.Fatalf("sync after %d: %v", after, err)
		}
		for _, m := range page.Messages {
			got[m.Seq] = m.Payload
			after = m.Seq
		}
		if !page.HasMore || len(page.Messages) == 0 {
			break
		}
	}
	lost := 0
	for _, a := range acked {
		if !bytes.Equal(got[a.seq], a.payload) {
			lost++
		}
	}
	if lost != 0 {
		t.Fatalf("%d of %d ACKed messages missing or different in sync", lost, len(acked))
	}
	// History serves them too: the page before the newest ACKed one's
	// successor ends with it.
	last := acked[len(acked)-1]
	page, err := bob.History(ctx, conv, last.seq+1, 4)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if n := len(page.Messages); n == 0 || page.Messages[n-1].Seq != last.seq || !bytes.Equal(page.Messages[n-1].Payload, last.payload) {
		t.Fatalf("history does not serve the last ACKed message (seq %d)", last.seq)
	}
}

// storeRefusals: store writes refused for lack of space or failed (both reasons).
func storeRefusals(t *testing.T, ts *testServer) refusals {
	t.Helper()
	_, body := adminGet(t, ts.httpBase+"/metrics")
	return refusals{
		full:   metricValue(t, body, `parley_store_writes_refused_total{reason="disk_full"}`),
		failed: metricValue(t, body, `parley_store_writes_refused_total{reason="write_failed"}`),
	}
}

type refusals struct{ full, failed float64 }

func (r refusals) String() string {
	return fmt.Sprintf("%v disk_full + %v write_failed", r.full, r.failed)
}

func diskMetric(t *testing.T, ts *testServer, series string) float64 {
	t.Helper()
	_, body := adminGet(t, ts.httpBase+"/metrics")
	return metricValue(t, body, series)
}

// checkFullDiskState: alive, not ready with the reason, refusals counted.
func checkFullDiskState(t *testing.T, ts *testServer) {
	t.Helper()
	if code, _ := adminGet(t, ts.httpBase+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	waitFor(t, "/readyz 503 naming the disk", func() (bool, string) {
		code, body := adminGet(t, ts.httpBase+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "disk"), fmt.Sprint(code, " ", body)
	})
	// Refused at the floor (disk_full), or failed inside the store and
	// recovered (write_failed): either way counted.
	if n := storeRefusals(t, ts); n.full+n.failed < 1 {
		t.Fatalf("parley_store_writes_refused_total = %v, want >= 1", n)
	}
	diskMetric(t, ts, `parley_store_disk_free_bytes`)
}

// sendsRecover polls until a send is ACKed again and /readyz is 200.
func sendsRecover(t *testing.T, ts *testServer, c *client.Client, tag string) {
	t.Helper()
	i := 0
	began := time.Now()
	defer func() { t.Logf("%s: recovered %v after space was freed", tag, time.Since(began)) }()
	waitFor(t, "a send ACKed after space was freed", func() (bool, string) {
		i++
		_, err := c.Send(context.Background(), &pb.Send{To: "bob", ContentType: "text", Payload: []byte("back"), ClientMsgId: fmt.Sprintf("%s-back-%d", tag, i)})
		return err == nil, fmt.Sprint(err)
	})
	waitFor(t, "/readyz 200 after space was freed", func() (bool, string) {
		code, body := adminGet(t, ts.httpBase+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
}

// The disk fills up: sends are refused with UNAVAILABLE, the process lives,
// every ACKed message stays readable, /readyz and /metrics say why, and it
// recovers without a restart when space is freed. A server started on the
// full disk serves sync and reports not ready, then recovers the same way.
func TestDiskFullRefusesSendsAndRecovers(t *testing.T) {
	// A real small volume needs root (mount); the fault-injecting
	// filesystem variant below runs everywhere.
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; TestDiskFullFaultFS covers the same case")
	}
	testDiskFull(t, newSmallDisk(t, true))
}

// The same case on a fault-injecting filesystem under the store.
func TestDiskFullFaultFS(t *testing.T) {
	testDiskFull(t, newSmallDisk(t, false))
}

func testDiskFull(t *testing.T, disk *smallDisk) {
	start := func() *testServer {
		return startServer(t, func(c *server.Config) {
			c.DataDir = disk.dir
			c.UserSendRate = -1
			c.UserRequestRate = -1
			if testing.Verbose() {
				c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
			if disk.mod != nil {
				disk.mod(c)
			}
		})
	}
	ts := start()
	// Tokens minted before the disk fills (minting may write a user record).
	aliceToken, bobToken := ts.mint(t, "alice"), ts.mint(t, "bob")
	alice := dialOnce(t, ts, aliceToken, "a1")

	conv, acked, refused := fillUntilRefused(t, ts, alice, "one")
	began := time.Now()
	checkFullDiskState(t, ts)
	checkAllReadable(t, ts, bobToken, conv, acked)
	t.Logf("checks took %v", time.Since(began))

	disk.free(t)
	sendsRecover(t, ts, alice, "one")

	_, more, refused2 := fillUntilRefused(t, ts, alice, "two")
	refused += refused2
	acked = append(acked, more...)
	checkFullDiskState(t, ts)
	failed1 := diskMetric(t, ts, "parley_messages_failed_total")
	refusals1 := storeRefusals(t, ts)
	// The sends refused here, and any refused while polling for recovery.
	if failed1 < float64(refused) {
		t.Fatalf("parley_messages_failed_total = %v, want >= the %d sends refused", failed1, refused)
	}

	// Restart on a disk filled to the last byte (from outside the store).
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Logf("shutdown on a full disk: %v", err)
	}
	disk.squeeze(t)
	ts2 := start()
	alice2 := dialOnce(t, ts2, aliceToken, "a2")
	if _, err := alice2.Send(context.Background(), &pb.Send{To: "bob", ContentType: "text", Payload: []byte("x")}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
		t.Fatalf("send after a restart on a full disk: %v, want UNAVAILABLE", err)
	}
	checkFullDiskState(t, ts2)
	checkAllReadable(t, ts2, bobToken, conv, acked)
	disk.free(t)
	sendsRecover(t, ts2, alice2, "two")
	checkAllReadable(t, ts2, bobToken, conv, acked)
	t.Logf("figures: %d sends of 60 KiB ACKed, all %d readable after recovery and restart (0 lost); "+
		"sends answered UNAVAILABLE: %v before the restart, %v after; store writes refused for disk space: %v before, %v after",
		len(acked), len(acked), failed1, diskMetric(t, ts2, "parley_messages_failed_total"),
		refusals1, storeRefusals(t, ts2))
}

// waitFor polls cond until it holds; on timeout it reports cond's last detail.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, detail)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A per-user storage quota: sends past it are refused with the permanent
// QUOTA_EXCEEDED (HTTP 507 quota_exceeded on /v1/rpc), counted in /metrics,
// other users are not affected, and the count survives a restart.
func TestUserStorageQuota(t *testing.T) {
	dir := t.TempDir()
	start := func() *testServer {
		return startServer(t, func(c *server.Config) {
			c.DataDir = dir
			c.UserStorageQuotaBytes = 10 << 10
		})
	}
	ts := start()
	aliceToken := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, aliceToken, "a1", "desktop", transports[2])
	bob, _ := ts.connect(t, "bob", "b1", "desktop", transports[0])
	ctx := ctx10(t)
	send := func(c *client.Client, to string, n int) error {
		_, err := c.Send(ctx, &pb.Send{To: to, ContentType: "bin", Payload: make([]byte, n)})
		return err
	}
	for i := range 2 {
		if err := send(alice, "bob", 4<<10); err != nil {
			t.Fatalf("send %d under the quota: %v", i, err)
		}
	}
	err := send(alice, "bob", 4<<10)
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED) {
		t.Fatalf("send past the quota: %v, want QUOTA_EXCEEDED", err)
	}
	var ce *client.Error
	if errors.As(err, &ce) && ce.Temporary() {
		t.Fatal("QUOTA_EXCEEDED is reported as temporary: clients would retry it forever")
	}
	if err := send(alice, "bob", 2<<10); err != nil { // exactly up to the quota
		t.Fatalf("send filling the quota exactly: %v", err)
	}
	if err := send(bob, "alice", 8<<10); err != nil {
		t.Fatalf("another user's send: %v", err)
	}
	var out map[string]any
	code := post(t, ts.httpBase+"/v1/rpc", map[string]string{"Authorization": "Bearer " + aliceToken},
		map[string]any{"send": map[string]any{"to": "bob", "contentType": "text", "payload": "eA==", "clientMsgId": "http-1"}}, &out)
	if code != http.StatusInsufficientStorage || !strings.Contains(fmt.Sprint(out), "quota_exceeded") {
		t.Fatalf("/v1/rpc send past the quota: HTTP %d %v, want 507 quota_exceeded", code, out)
	}
	if n := diskMetric(t, ts, "parley_quota_refused_total"); n != 2 {
		t.Fatalf("parley_quota_refused_total = %v, want 2", n)
	}

	shutdown(t, ts)
	ts = start()
	alice, _ = ts.connectToken(t, aliceToken, "a2", "desktop", transports[2])
	if err := send(alice, "bob", 1); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED) {
		t.Fatalf("send past the quota after a restart: %v, want QUOTA_EXCEEDED", err)
	}
}

// dialOnce connects over TCP with an SDK that does not retry refused sends,
// so the test sees each refusal at once.
func dialOnce(t *testing.T, ts *testServer, token, device string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx10(t), client.Options{Addr: "tcp://" + ts.tcpAddr, Token: token, DeviceID: device, DeviceType: "desktop", MaxSendAttempts: 1})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
