package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// testShadowMuted: the flag round-trips through CreateUser, UpdateUser,
// GetUser and UserByName, independently of Disabled.
func testShadowMuted(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	u := store.User{ID: "Mallory", NameKey: "mallory", PasswordHash: "h", ShadowMuted: true, CreatedAt: created}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, u)
	if got, err := s.UserByName(ctx, "mallory"); err != nil || !got.ShadowMuted || got.Disabled {
		t.Fatalf("UserByName = %+v, %v; want shadow-muted, not disabled", got, err)
	}
	for _, flags := range []struct{ disabled, muted bool }{{true, true}, {true, false}, {false, false}, {false, true}} {
		u.Disabled, u.ShadowMuted = flags.disabled, flags.muted
		if err := s.UpdateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		checkUser(t, s, u)
		if got, err := s.UserByName(ctx, "mallory"); err != nil || got.ShadowMuted != u.ShadowMuted || got.Disabled != u.Disabled {
			t.Fatalf("UserByName after UpdateUser(%+v) = %+v, %v", flags, got, err)
		}
	}
	// A user created without it is not muted.
	plain := store.User{ID: "bob", CreatedAt: created}
	if err := s.CreateUser(ctx, plain); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, plain)
}

// sameReport reports whether got equals want field by field (the message
// with proto.Equal, times with Equal).
func sameReport(got, want store.Report) bool {
	msgOK := (got.Message == nil) == (want.Message == nil) && (want.Message == nil || proto.Equal(got.Message, want.Message))
	g, w := got, want
	g.Message, w.Message = nil, nil
	g.CreatedAt, w.CreatedAt, g.ClosedAt, w.ClosedAt = normTime(g.CreatedAt), normTime(w.CreatedAt), normTime(g.ClosedAt), normTime(w.ClosedAt)
	return msgOK && g == w
}

func checkReport(t *testing.T, s store.Store, want store.Report) {
	t.Helper()
	got, err := s.GetReport(context.Background(), want.ID)
	if err != nil {
		t.Fatalf("GetReport(%s): %v", want.ID, err)
	}
	if !sameReport(got, want) {
		t.Fatalf("GetReport(%s) = %+v, want %+v", want.ID, got, want)
	}
}

func reportIDs(t *testing.T, s store.Store, status store.ReportStatus, after string, limit int) []string {
	t.Helper()
	rs, err := s.Reports(context.Background(), status, after, limit)
	if err != nil {
		t.Fatalf("Reports(%d, %q, %d): %v", status, after, limit, err)
	}
	ids := []string{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func putReport(t *testing.T, s store.Store, r store.Report, wantID string, wantCreated bool) {
	t.Helper()
	id, created, err := s.PutReport(context.Background(), r)
	if err != nil || id != wantID || created != wantCreated {
		t.Fatalf("PutReport(%s) = %q, %v, %v; want %q, %v", r.ID, id, created, err, wantID, wantCreated)
	}
}

// testReports: a report round-trips every field, its message as it was
// when reported; a reporter reports a message once; reports are listed in
// id order, all or by status, paged by after and limit; a report closes
// once.
func testReports(t *testing.T, s store.Store) {
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 678000, time.UTC)
	evidence := msg("d:alice:mallory", "mallory", "alice", "m1")
	evidence.Seq = 7
	stored := proto.Clone(evidence).(*pb.Message)
	r1 := store.Report{ID: "r01", Reporter: "alice", ConversationID: "d:alice:mallory", Seq: 7, Reason: "spam",
		Note: "they keep sending this", Message: evidence, CreatedAt: t0, Status: store.ReportOpen}
	r2 := store.Report{ID: "r02", Reporter: "bob", ConversationID: "d:alice:mallory", Seq: 7, Reason: "abuse",
		Message: evidence, CreatedAt: t0.Add(time.Second), Status: store.ReportOpen}
	r3 := store.Report{ID: "r03", Reporter: "alice", ConversationID: "g:1", Seq: 3, Reason: "other",
		CreatedAt: t0.Add(2 * time.Second), Status: store.ReportOpen} // no message
	r4 := store.Report{ID: "r04", Reporter: "carol", ConversationID: "g:1", Seq: 4, Reason: "spam",
		Message: &pb.Message{ConversationId: "g:1", Seq: 4, From: "mallory", Payload: []byte{0, 1, 0xff}}, CreatedAt: t0.Add(3 * time.Second),
		Status: store.ReportOpen}
	if _, err := s.GetReport(ctx, "r01"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetReport before any: %v, want ErrNotFound", err)
	}
	if got := reportIDs(t, s, 0, "", 10); len(got) != 0 {
		t.Fatalf("Reports of an empty store = %v", got)
	}
	for _, r := range []store.Report{r1, r2, r3, r4} {
		putReport(t, s, r, r.ID, true)
	}
	// The stored message is a snapshot: the caller's copy changing later
	// (an edit, a recall) does not reach it.
	evidence.Payload, evidence.Recalled = nil, true
	r1.Message, r2.Message = stored, stored
	for _, r := range []store.Report{r1, r2, r3, r4} {
		checkReport(t, s, r)
	}

	// A second report of a message by the same reporter writes nothing,
	// whatever it says, and answers the first report's id; so does a resend.
	again := store.Report{ID: "r05", Reporter: "alice", ConversationID: "d:alice:mallory", Seq: 7, Reason: "abuse",
		Note: "again", CreatedAt: t0.Add(time.Hour), Status: store.ReportOpen}
	putReport(t, s, again, "r01", false)
	putReport(t, s, r1, "r01", false)
	if _, err := s.GetReport(ctx, "r05"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a repeated report was stored: %v", err)
	}
	checkReport(t, s, r1)
	// An id another report has is refused; a report must start open.
	if _, _, err := s.PutReport(ctx, store.Report{ID: "r02", Reporter: "dave", ConversationID: "c", Seq: 1, Status: store.ReportOpen}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("PutReport with a taken id: %v, want ErrExists", err)
	}
	if _, _, err := s.PutReport(ctx, store.Report{ID: "r09", Reporter: "dave", ConversationID: "c", Seq: 1, Status: store.ReportResolved}); err == nil {
		t.Fatal("PutReport of a report that is not open succeeded")
	}
	checkReport(t, s, r2)
	if got := reportIDs(t, s, 0, "", 10); !slices.Equal(got, []string{"r01", "r02", "r03", "r04"}) {
		t.Fatalf("Reports = %v after refused puts", got)
	}

	// Listing and paging, in byte order of the ids.
	for _, c := range []struct {
		status store.ReportStatus
		after  string
		limit  int
		want   []string
	}{
		{0, "", 2, []string{"r01", "r02"}},
		{0, "r02", 2, []string{"r03", "r04"}},
		{0, "r04", 2, []string{}},
		{0, "r015", 10, []string{"r02", "r03", "r04"}},
		{0, "R", 1, []string{"r01"}},
		{0, "", 0, []string{}},
		{store.ReportOpen, "", 10, []string{"r01", "r02", "r03", "r04"}},
		{store.ReportOpen, "r01", 2, []string{"r02", "r03"}},
		{store.ReportResolved, "", 10, []string{}},
	} {
		if got := reportIDs(t, s, c.status, c.after, c.limit); !slices.Equal(got, c.want) {
			t.Fatalf("Reports(%d, %q, %d) = %v, want %v", c.status, c.after, c.limit, got, c.want)
		}
	}
	rs, err := s.Reports(ctx, 0, "r03", 1)
	if err != nil || len(rs) != 1 || !sameReport(rs[0], r4) {
		t.Fatalf("Reports(after r03) = %+v, %v; want [%+v]", rs, err, r4)
	}

	// Closing.
	t1 := t0.Add(24 * time.Hour)
	if err := s.CloseReport(ctx, "r02", store.ReportResolved, "mod-key", "mallory banned", t1); err != nil {
		t.Fatalf("CloseReport(r02): %v", err)
	}
	if err := s.CloseReport(ctx, "r03", store.ReportDismissed, "mod-key", "", t1.Add(time.Minute)); err != nil {
		t.Fatalf("CloseReport(r03): %v", err)
	}
	r2.Status, r2.ClosedBy, r2.Resolution, r2.ClosedAt = store.ReportResolved, "mod-key", "mallory banned", t1
	r3.Status, r3.ClosedBy, r3.ClosedAt = store.ReportDismissed, "mod-key", t1.Add(time.Minute)
	checkReport(t, s, r2)
	checkReport(t, s, r3)
	if err := s.CloseReport(ctx, "r02", store.ReportDismissed, "other-key", "no", t1.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CloseReport of a closed report: %v, want ErrConflict", err)
	}
	checkReport(t, s, r2)
	if err := s.CloseReport(ctx, "r99", store.ReportResolved, "mod-key", "", t1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CloseReport of a missing report: %v, want ErrNotFound", err)
	}
	if err := s.CloseReport(ctx, "r01", store.ReportOpen, "mod-key", "", t1); err == nil {
		t.Fatal("CloseReport to the open status succeeded")
	}
	checkReport(t, s, r1)
	for _, c := range []struct {
		status store.ReportStatus
		after  string
		limit  int
		want   []string
	}{
		{0, "", 10, []string{"r01", "r02", "r03", "r04"}},
		{store.ReportOpen, "", 10, []string{"r01", "r04"}},
		{store.ReportOpen, "", 1, []string{"r01"}},
		{store.ReportOpen, "r01", 1, []string{"r04"}},
		{store.ReportResolved, "", 10, []string{"r02"}},
		{store.ReportResolved, "r02", 10, []string{}},
		{store.ReportDismissed, "", 10, []string{"r03"}},
	} {
		if got := reportIDs(t, s, c.status, c.after, c.limit); !slices.Equal(got, c.want) {
			t.Fatalf("after closing: Reports(%d, %q, %d) = %v, want %v", c.status, c.after, c.limit, got, c.want)
		}
	}
	if rs, err := s.Reports(ctx, store.ReportResolved, "", 10); err != nil || len(rs) != 1 || !sameReport(rs[0], r2) {
		t.Fatalf("Reports(resolved) = %+v, %v; want [%+v]", rs, err, r2)
	}
	// A closed report still counts: the reporter cannot report it again.
	putReport(t, s, store.Report{ID: "r06", Reporter: "alice", ConversationID: "g:1", Seq: 3, Status: store.ReportOpen}, "r03", false)
}

// testConcurrentReports: of concurrent reports of one message by one
// reporter, exactly one is stored and every call answers its id.
func testConcurrentReports(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 8
	for round := range 4 {
		ids := make([]string, n)
		created := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i], created[i], errs[i] = s.PutReport(ctx, store.Report{ID: fmt.Sprintf("r%d-%02d", round, i), Reporter: "alice",
					ConversationID: "g:1", Seq: uint64(round + 1), Reason: "spam", Status: store.ReportOpen})
			}()
		}
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: PutReport %d: %v", round, i, errs[i])
			}
			if created[i] {
				if winner >= 0 {
					t.Fatalf("round %d: reports %d and %d were both created", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no report created", round)
		}
		want := fmt.Sprintf("r%d-%02d", round, winner)
		for i, id := range ids {
			if id != want {
				t.Fatalf("round %d: call %d answered %q, want the stored %q", round, i, id, want)
			}
		}
		if got := reportIDs(t, s, 0, fmt.Sprintf("r%d-", round), n+1); !slices.Equal(got, []string{want}) {
			t.Fatalf("round %d: stored %v, want [%s]", round, got, want)
		}
	}
}

func appendAudit(t *testing.T, s store.Store, e store.AuditEntry) uint64 {
	t.Helper()
	id, err := s.AppendAudit(context.Background(), e)
	if err != nil {
		t.Fatalf("AppendAudit(%s): %v", e.Action, err)
	}
	return id
}

func auditLog(t *testing.T, s store.Store, before uint64, limit int) []store.AuditEntry {
	t.Helper()
	es, err := s.AuditLog(context.Background(), before, limit)
	if err != nil {
		t.Fatalf("AuditLog(%d, %d): %v", before, limit, err)
	}
	return es
}

func auditIDs(es []store.AuditEntry) []uint64 {
	ids := []uint64{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// testAuditLog: entries get increasing ids (the one passed is ignored),
// round-trip every field and are listed newest first, paged by before.
// Concurrent appends get distinct ids.
func testAuditLog(t *testing.T, s store.Store) {
	t0 := time.Date(2025, 2, 3, 4, 5, 6, 789000, time.UTC)
	if got := auditLog(t, s, 0, 10); len(got) != 0 {
		t.Fatalf("AuditLog of an empty store = %+v", got)
	}
	var want []store.AuditEntry
	for i, e := range []store.AuditEntry{
		{ID: 1 << 40, Actor: "ops-key", Action: "user.ban", Target: "mallory", Detail: `{"days":7}`},
		{Actor: "ops-key", Action: "message.delete", Target: "g:1/3"},
		{Actor: "mod-key", Action: "report.resolve", Target: "r02", Detail: `{"note":"ünïcode"}`},
		{Actor: "system", Action: "user.unban", Target: "mallory", Detail: "{}"},
		{Actor: "mod-key", Action: "setting.put", Target: "motd"},
	} {
		e.Time = t0.Add(time.Duration(i) * time.Minute)
		e.ID = appendAudit(t, s, e)
		if e.ID == 0 || e.ID == 1<<40 || (i > 0 && e.ID <= want[i-1].ID) {
			t.Fatalf("AppendAudit %d gave id %d after %v", i, e.ID, auditIDs(want))
		}
		want = append(want, e)
	}
	ids := auditIDs(want)
	same := func(got []store.AuditEntry, want ...store.AuditEntry) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			g, w := got[i], want[i]
			g.Time, w.Time = normTime(g.Time), normTime(w.Time)
			if g != w {
				return false
			}
		}
		return true
	}
	if got := auditLog(t, s, 0, 10); !same(got, want[4], want[3], want[2], want[1], want[0]) {
		t.Fatalf("AuditLog = %+v, want newest first %+v", got, want)
	}
	for _, c := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 2, []uint64{ids[4], ids[3]}},
		{ids[3], 2, []uint64{ids[2], ids[1]}},
		{ids[1], 2, []uint64{ids[0]}},
		{ids[0], 10, []uint64{}},
		{ids[4] + 1000, 1, []uint64{ids[4]}},
		{0, 0, []uint64{}},
	} {
		if got := auditIDs(auditLog(t, s, c.before, c.limit)); !slices.Equal(got, c.want) {
			t.Fatalf("AuditLog(%d, %d) = %v, want %v", c.before, c.limit, got, c.want)
		}
	}

	const writers, each = 4, 10
	got := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id, err := s.AppendAudit(context.Background(), store.AuditEntry{Time: t0, Actor: fmt.Sprint("w", w), Action: "x", Target: fmt.Sprint(i)})
				if err != nil {
					t.Errorf("concurrent AppendAudit: %v", err)
					return
				}
				got[w] = append(got[w], id)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[uint64]bool{}
	for w, ws := range got {
		for i, id := range ws {
			if seen[id] || id <= ids[4] || (i > 0 && id <= ws[i-1]) {
				t.Fatalf("writer %d got ids %v (others %v)", w, ws, got)
			}
			seen[id] = true
		}
	}
	all := auditLog(t, s, 0, 1000)
	if len(all) != len(want)+writers*each {
		t.Fatalf("AuditLog holds %d entries, want %d", len(all), len(want)+writers*each)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("AuditLog not newest first at %d: %v", i, auditIDs(all))
		}
	}
}

// testSettings: unset is ErrNotFound; PutSetting sets and replaces; values
// of a few MiB and empty ones round-trip.
func testSettings(t *testing.T, s store.Store) {
	ctx := context.Background()
	get := func(key string) []byte {
		t.Helper()
		v, err := s.GetSetting(ctx, key)
		if err != nil {
			t.Fatalf("GetSetting(%s): %v", key, err)
		}
		return v
	}
	put := func(key string, v []byte) {
		t.Helper()
		if err := s.PutSetting(ctx, key, v); err != nil {
			t.Fatalf("PutSetting(%s): %v", key, err)
		}
	}
	if _, err := s.GetSetting(ctx, "motd"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSetting of an unset key: %v, want ErrNotFound", err)
	}
	v := []byte("hello")
	put("motd", v)
	v[0] = 'j' // the store keeps its own copy
	if got := get("motd"); string(got) != "hello" {
		t.Fatalf("GetSetting(motd) = %q, want hello", got)
	}
	put("motd", []byte("bye"))
	if got := get("motd"); string(got) != "bye" {
		t.Fatalf("GetSetting(motd) after replacing = %q, want bye", got)
	}
	if _, err := s.GetSetting(ctx, "motd2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSetting(motd2): %v, want ErrNotFound", err)
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	put("filters", big)
	if got := get("filters"); !bytes.Equal(got, big) {
		t.Fatalf("GetSetting(filters): %d bytes back, want the %d put", len(got), len(big))
	}
	put("filters", []byte(`{"words":[]}`))
	if got := get("filters"); string(got) != `{"words":[]}` {
		t.Fatalf("GetSetting(filters) after shrinking = %q", got)
	}
	put("empty", nil)
	if got := get("empty"); len(got) != 0 {
		t.Fatalf("GetSetting(empty) = %q", got)
	}
	if got := get("motd"); string(got) != "bye" {
		t.Fatalf("GetSetting(motd) = %q after other keys, want bye", got)
	}
}

// testSwapSetting: old nil swaps only an unset key; a set key swaps only
// from its current value, and a stale old leaves it; an empty value and an
// unset key are told apart.
func testSwapSetting(t *testing.T, s store.Store) {
	ctx := context.Background()
	swap := func(key string, old, v []byte, want bool) {
		t.Helper()
		got, err := s.SwapSetting(ctx, key, old, v)
		if err != nil {
			t.Fatalf("SwapSetting(%s, %q, %q): %v", key, old, v, err)
		}
		if got != want {
			t.Fatalf("SwapSetting(%s, %q, %q) = %v, want %v", key, old, v, got, want)
		}
	}
	check := func(key, want string) {
		t.Helper()
		if v, err := s.GetSetting(ctx, key); err != nil || string(v) != want {
			t.Fatalf("GetSetting(%s) = %q, %v; want %q", key, v, err, want)
		}
	}
	unset := func(key string) {
		t.Helper()
		if v, err := s.GetSetting(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetSetting(%s) = %q, %v; want ErrNotFound", key, v, err)
		}
	}

	swap("motd", []byte("x"), []byte("a"), false) // unset matches only old nil
	swap("motd", []byte{}, []byte("a"), false)
	unset("motd")
	swap("motd", nil, []byte("a"), true)
	check("motd", "a")
	swap("motd", nil, []byte("b"), false)
	check("motd", "a")
	swap("motd", []byte("a"), []byte("b"), true)
	check("motd", "b")
	swap("motd", []byte("a"), []byte("c"), false) // stale
	check("motd", "b")
	if err := s.PutSetting(ctx, "motd", []byte("d")); err != nil {
		t.Fatal(err)
	}
	swap("motd", []byte("b"), []byte("e"), false) // a put came first
	check("motd", "d")

	// Empty is set: it matches an empty non-nil old, never nil.
	swap("empty", nil, nil, true)
	check("empty", "")
	swap("empty", nil, []byte("x"), false)
	swap("empty", []byte{}, []byte("x"), true)
	check("empty", "x")
	swap("empty", []byte("x"), []byte{}, true)
	check("empty", "")
	if err := s.PutSetting(ctx, "empty2", nil); err != nil {
		t.Fatal(err)
	}
	swap("empty2", nil, []byte("y"), false)
	swap("empty2", []byte{}, []byte("y"), true)
	check("empty2", "y")
	unset("other")
}

// testConcurrentSwapSetting: of concurrent swaps from one old value (unset
// included) exactly one wins, and its value is the one stored.
func testConcurrentSwapSetting(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 16
	var old []byte
	for round := range 4 {
		swapped := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				swapped[i], errs[i] = s.SwapSetting(ctx, "k", old, fmt.Appendf(nil, "r%d-%02d", round, i))
			}()
		}
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: SwapSetting %d: %v", round, i, errs[i])
			}
			if swapped[i] {
				if winner >= 0 {
					t.Fatalf("round %d: swaps %d and %d both won", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no swap won", round)
		}
		want := fmt.Appendf(nil, "r%d-%02d", round, winner)
		if got, err := s.GetSetting(ctx, "k"); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: GetSetting = %q, %v; want the winner's %q", round, got, err, want)
		}
		old = want
	}
}

// testRestartModeration: reports, the audit log, settings and shadow muting
// survive a restart, and audit ids continue after it, never reused.
func testRestartModeration(t *testing.T, open func() store.Store) {
	ctx := context.Background()
	s := openStore(t, open)
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 8000, time.UTC)
	m := msg("g:1", "mallory", "", "m1")
	m.Seq = 5
	r1 := store.Report{ID: "r1", Reporter: "alice", ConversationID: "g:1", Seq: 5, Reason: "spam", Note: "n", Message: m,
		CreatedAt: t0, Status: store.ReportOpen}
	r2 := store.Report{ID: "r2", Reporter: "bob", ConversationID: "g:1", Seq: 5, Reason: "spam", CreatedAt: t0, Status: store.ReportOpen}
	putReport(t, s, r1, "r1", true)
	putReport(t, s, r2, "r2", true)
	if err := s.CloseReport(ctx, "r2", store.ReportDismissed, "mod-key", "fine", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	r2.Status, r2.ClosedBy, r2.Resolution, r2.ClosedAt = store.ReportDismissed, "mod-key", "fine", t0.Add(time.Hour)
	var ids []uint64
	for i := range 3 {
		ids = append(ids, appendAudit(t, s, store.AuditEntry{Time: t0, Actor: "ops-key", Action: "a", Target: fmt.Sprint(i)}))
	}
	if err := s.PutSetting(ctx, "motd", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	u := store.User{ID: "mallory", ShadowMuted: true, CreatedAt: t0}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, open)

	checkReport(t, s, r1)
	checkReport(t, s, r2)
	if got := reportIDs(t, s, store.ReportOpen, "", 10); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("open reports after restart = %v", got)
	}
	if got := reportIDs(t, s, store.ReportDismissed, "", 10); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("dismissed reports after restart = %v", got)
	}
	putReport(t, s, store.Report{ID: "r3", Reporter: "alice", ConversationID: "g:1", Seq: 5, Status: store.ReportOpen}, "r1", false)
	if got := auditIDs(auditLog(t, s, 0, 10)); !slices.Equal(got, []uint64{ids[2], ids[1], ids[0]}) {
		t.Fatalf("AuditLog after restart = %v, want %v newest first", got, ids)
	}
	for round := range 2 {
		id := appendAudit(t, s, store.AuditEntry{Time: t0, Actor: "ops-key", Action: "after restart"})
		if id <= ids[len(ids)-1] {
			t.Fatalf("round %d: AppendAudit after restart gave %d, after %v", round, id, ids)
		}
		ids = append(ids, id)
		s = reopen(t, s, open)
	}
	if got := auditIDs(auditLog(t, s, 0, 10)); !slices.Equal(got, []uint64{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Fatalf("AuditLog after restarts = %v, appended %v", got, ids)
	}
	if v, err := s.GetSetting(ctx, "motd"); err != nil || string(v) != "hi" {
		t.Fatalf("GetSetting after restart = %q, %v", v, err)
	}
	checkUser(t, s, u)
}
