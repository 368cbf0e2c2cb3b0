package contacts

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

const (
	friend   = pb.ContactState_CONTACT_STATE_FRIEND
	sent     = pb.ContactState_CONTACT_STATE_REQUEST_SENT
	received = pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED
	none     = pb.ContactState_CONTACT_STATE_UNSPECIFIED
)

// event is one call of Notify.
type event struct {
	owner, about string
	state        pb.ContactState
	except       string
}

type fixture struct {
	st     store.Store
	book   *Book
	mu     sync.Mutex
	events []event
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st}
	f.book = New(st, cfg, func(_ context.Context, owner string, c store.Contact, except string) {
		f.mu.Lock()
		f.events = append(f.events, event{owner, c.UserID, c.State, except})
		f.mu.Unlock()
	})
	return f
}

// took returns the events since the last call.
func (f *fixture) took() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := f.events
	f.events = nil
	return ev
}

func (f *fixture) wantEvents(t *testing.T, want ...event) {
	t.Helper()
	got := f.took()
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

// state returns owner's record about uid as the store has it.
func (f *fixture) state(t *testing.T, owner, uid string) pb.ContactState {
	t.Helper()
	c, err := f.st.GetContact(context.Background(), owner, uid)
	if err == store.ErrNotFound {
		return none
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.State
}

func (f *fixture) wantStates(t *testing.T, a, b string, ab, ba pb.ContactState) {
	t.Helper()
	if got := f.state(t, a, b); got != ab {
		t.Fatalf("%s's record of %s: %v, want %v", a, b, got, ab)
	}
	if got := f.state(t, b, a); got != ba {
		t.Fatalf("%s's record of %s: %v, want %v", b, a, got, ba)
	}
}

// A request leaves sent/received records (with the note), told to both
// sides but not to the requesting session; accepting makes both friends;
// accepting again is a harmless retry; a second request between friends
// changes nothing.
func TestRequestAndAccept(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.Request(ctx, "alice", "bob", "hi", "s-alice"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", sent, received)
	if c, err := f.st.GetContact(ctx, "bob", "alice"); err != nil || c.Note != "hi" {
		t.Fatalf("bob's record: %+v, %v; want the note", c, err)
	}
	f.wantEvents(t, event{"alice", "bob", sent, "s-alice"}, event{"bob", "alice", received, ""})

	if err := f.book.Respond(ctx, "bob", "alice", true, "s-bob"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", friend, friend)
	f.wantEvents(t, event{"bob", "alice", friend, "s-bob"}, event{"alice", "bob", friend, ""})

	if err := f.book.Respond(ctx, "bob", "alice", true, "s-bob"); err != nil {
		t.Fatalf("accepting again: %v", err)
	}
	if err := f.book.Request(ctx, "alice", "bob", "again", "s-alice"); err != nil {
		t.Fatalf("a request between friends: %v", err)
	}
	f.wantEvents(t)
	f.wantStates(t, "alice", "bob", friend, friend)
}

// Two users asking each other become friends on the second request.
func TestCrossedRequestsMakeFriends(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.Request(ctx, "alice", "bob", "", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Request(ctx, "bob", "alice", "", "s2"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", friend, friend)
}

// Declining removes both records and tells both sides; a request that is
// not there cannot be answered; removing a friendship removes both records.
func TestDeclineAndRemove(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.Respond(ctx, "bob", "alice", true, "s-bob"); err != reqerr.Conflict {
		t.Fatalf("answering no request: %v, want CONFLICT", err)
	}
	if err := f.book.Request(ctx, "alice", "bob", "", "s-alice"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Respond(ctx, "alice", "bob", true, "s-alice"); err != reqerr.Conflict {
		t.Fatalf("the requester accepting their own request: %v, want CONFLICT", err)
	}
	f.took()
	if err := f.book.Respond(ctx, "bob", "alice", false, "s-bob"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", none, none)
	f.wantEvents(t, event{"bob", "alice", none, "s-bob"}, event{"alice", "bob", none, ""})

	if err := f.book.Request(ctx, "alice", "bob", "", "s-alice"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Respond(ctx, "bob", "alice", true, "s-bob"); err != nil {
		t.Fatal(err)
	}
	f.took()
	if err := f.book.Remove(ctx, "bob", "alice", "s-bob"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", none, none)
	f.wantEvents(t, event{"bob", "alice", none, "s-bob"}, event{"alice", "bob", none, ""})
	if err := f.book.Remove(ctx, "bob", "alice", "s-bob"); err != nil {
		t.Fatalf("removing nothing: %v", err)
	}
	f.wantEvents(t)
}

// Requests name another valid user and carry a short note.
func TestRequestChecks(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	for _, other := range []string{"alice", "", "no spaces"} {
		if err := f.book.Request(ctx, "alice", other, "", "s"); err != reqerr.BadRequest {
			t.Fatalf("request to %q: %v, want BAD_REQUEST", other, err)
		}
		if err := f.book.SetBlocked(ctx, "alice", other, true); err != reqerr.BadRequest {
			t.Fatalf("block of %q: %v, want BAD_REQUEST", other, err)
		}
	}
	if err := f.book.Request(ctx, "alice", "bob", strings.Repeat("x", MaxNote+1), "s"); err != reqerr.TooLarge {
		t.Fatalf("a long note: %v, want TOO_LARGE", err)
	}
	if err := f.book.Request(ctx, "alice", "bob", strings.Repeat("x", MaxNote), "s"); err != nil {
		t.Fatalf("a note of MaxNote bytes: %v", err)
	}
}

// A request to a user who blocked the requester looks sent to the requester,
// but the other side keeps no record and hears nothing.
func TestRequestToBlocker(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.SetBlocked(ctx, "bob", "alice", true); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Request(ctx, "alice", "bob", "please", "s-alice"); err != nil {
		t.Fatal(err)
	}
	f.wantStates(t, "alice", "bob", sent, none)
	f.wantEvents(t, event{"alice", "bob", sent, "s-alice"})
	l, err := f.book.List(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Contacts) != 0 || len(l.Blocked) != 1 || l.Blocked[0] != "alice" {
		t.Fatalf("bob's list: %v", l)
	}
}

// A block stops the blocked user's messages to the blocker, not the
// blocker's to them (blocking is one way); unblocking lets them through at
// once. Notes to oneself always pass.
func TestBlockIsOneWay(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != nil {
		t.Fatal(err) // cached now: the block below must replace it
	}
	if err := f.book.SetBlocked(ctx, "bob", "alice", true); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != reqerr.Denied {
		t.Fatalf("the blocked user writing: %v, want PERMISSION_DENIED", err)
	}
	if err := f.book.MayMessage(ctx, "bob", "alice"); err != nil {
		t.Fatalf("the blocker writing: %v", err)
	}
	if err := f.book.MayMessage(ctx, "alice", "alice"); err != nil {
		t.Fatalf("a note to self: %v", err)
	}
	if err := f.book.SetBlocked(ctx, "bob", "alice", false); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != nil {
		t.Fatalf("after unblocking: %v", err)
	}
}

// With DenyStrangers only friends may write, and a blocked friend gets the
// same refusal as a stranger. Friendship made and ended through the Book
// takes effect at once, cached relation or not.
func TestDenyStrangers(t *testing.T) {
	f := newFixture(t, Config{DenyStrangers: true})
	ctx := context.Background()
	if err := f.book.MayMessage(ctx, "carol", "bob"); err != reqerr.Denied {
		t.Fatalf("a stranger: %v, want PERMISSION_DENIED", err)
	}
	if err := f.book.MayMessage(ctx, "carol", "carol"); err != nil {
		t.Fatalf("a note to self: %v", err)
	}
	if err := f.book.Request(ctx, "carol", "bob", "", "s"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "carol", "bob"); err != reqerr.Denied {
		t.Fatalf("a request not yet accepted: %v, want PERMISSION_DENIED", err)
	}
	if err := f.book.Respond(ctx, "bob", "carol", true, "s"); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{"carol", "bob"}, {"bob", "carol"}} {
		if err := f.book.MayMessage(ctx, p[0], p[1]); err != nil {
			t.Fatalf("friends %s to %s: %v", p[0], p[1], err)
		}
	}
	if err := f.book.SetBlocked(ctx, "bob", "carol", true); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "carol", "bob"); err != reqerr.Denied {
		t.Fatalf("a blocked friend: %v, want PERMISSION_DENIED", err)
	}
	if err := f.book.SetBlocked(ctx, "bob", "carol", false); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Remove(ctx, "carol", "bob", "s"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "bob", "carol"); err != reqerr.Denied {
		t.Fatalf("after the friendship ended: %v, want PERMISSION_DENIED", err)
	}
}

// The cache answers for RelationTTL: a change written to the store behind
// the Book's back (as another node of a cluster does) is seen only after
// Invalidate, which every change through the Book calls.
func TestRelationCacheInvalidate(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetBlocked(ctx, "bob", "alice", true); err != nil {
		t.Fatal(err)
	}
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != nil {
		t.Fatalf("a cached relation: %v, want the cached answer", err)
	}
	f.book.Invalidate("bob", "alice") // either order names the pair
	if err := f.book.MayMessage(ctx, "alice", "bob"); err != reqerr.Denied {
		t.Fatalf("after Invalidate: %v, want PERMISSION_DENIED", err)
	}
}

// Friends lists only accepted friendships.
func TestFriends(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	for _, req := range [][2]string{{"alice", "bob"}, {"carol", "alice"}, {"alice", "dave"}} {
		if err := f.book.Request(ctx, req[0], req[1], "", "s"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.book.Respond(ctx, "bob", "alice", true, "s"); err != nil {
		t.Fatal(err)
	}
	got, err := f.book.Friends(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "bob" {
		t.Fatalf("alice's friends %v, want [bob]", got)
	}
}
