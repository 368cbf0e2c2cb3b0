package presence

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/contacts"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// conn records the frames sent to a session.
type conn struct {
	mu     sync.Mutex
	frames []*pb.ServerFrame
	sent   chan struct{} // when set, told of every frame
}

func (c *conn) Send(o *wire.Outbound) bool {
	c.mu.Lock()
	c.frames = append(c.frames, o.Frame())
	c.mu.Unlock()
	if c.sent != nil {
		c.sent <- struct{}{}
	}
	return true
}
func (c *conn) SendHeld(o *wire.Outbound, _ *wire.Hold) bool { return c.Send(o) }
func (c *conn) Close(pb.DisconnectCode, string)              {}

// events returns the presence events received since the last call.
func (c *conn) events() []*pb.Presence {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*pb.Presence
	for _, f := range c.frames {
		if e := f.GetPresenceEvent(); e != nil {
			out = append(out, e.Presence)
		}
	}
	c.frames = nil
	return out
}

// circles is a fixed view of conversations: 1:1 peers per user, and groups
// with their members (a group missing from members is gone).
type circles struct {
	peers   map[string][]string
	groups  map[string][]string
	members map[string]map[string]store.Member
}

func (c *circles) Conversations(_ context.Context, uid string) ([]string, []string, error) {
	return c.peers[uid], c.groups[uid], nil
}

func (c *circles) GroupMembers(_ context.Context, conv string) (map[string]store.Member, error) {
	m, ok := c.members[conv]
	if !ok {
		return nil, reqerr.Denied
	}
	return m, nil
}

type fixture struct {
	st      store.Store
	book    *contacts.Book
	reg     *session.Registry
	circles *circles
	hub     *Hub

	mu       sync.Mutex
	watched  []string // "+uid" / "-uid" in call order
	sessions int      // sessions opened, for their ids
}

// cluster answers OnlineElsewhere from a fixed map of users to nodes.
type cluster struct {
	mu    sync.Mutex
	nodes map[string]string // guarded by mu
	heard []string          // guarded by mu
}

func (c *cluster) OnlineElsewhere(_ context.Context, uid string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[uid], nil
}

func (c *cluster) HeardFrom(node string) {
	c.mu.Lock()
	c.heard = append(c.heard, node)
	c.mu.Unlock()
}

func (c *cluster) set(uid, node string) {
	c.mu.Lock()
	c.nodes[uid] = node
	c.mu.Unlock()
}

func newFixture(t *testing.T) *fixture {
	return newClusterFixture(t, nil)
}

func newClusterFixture(t *testing.T, cl Cluster) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{
		st:      st,
		book:    contacts.New(st, contacts.Config{}, func(context.Context, string, store.Contact, string) {}),
		reg:     session.NewRegistry(session.KickNone),
		circles: &circles{peers: map[string][]string{}, groups: map[string][]string{}, members: map[string]map[string]store.Member{}},
	}
	f.hub = New(Config{Store: st, Contacts: f.book, Sessions: f.reg, Circles: f.circles, Cluster: cl, Log: log,
		Watch: func(uid string, on bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if on {
				f.watched = append(f.watched, "+"+uid)
			} else {
				f.watched = append(f.watched, "-"+uid)
			}
		}})
	return f
}

// open adds a session of uid to the registry, as a login does.
func (f *fixture) open(uid string) (*session.Session, *conn) {
	f.sessions++
	c := &conn{}
	s := &session.Session{ID: fmt.Sprint("s", f.sessions), UserID: uid, DeviceID: "d", DeviceType: "phone", Conn: c}
	f.reg.Add(s)
	f.hub.Opened(uid)
	return s, c
}

func (f *fixture) close(s *session.Session) {
	f.reg.Remove(s)
	f.hub.Closed(s)
}

// subscribe returns the users of the PresenceList answered, or the error.
func (f *fixture) subscribe(t *testing.T, s *session.Session, ids ...string) ([]*pb.Presence, error) {
	t.Helper()
	var got *pb.PresenceList
	err := f.hub.Subscribe(context.Background(), s, ids, func(l *pb.PresenceList) { got = l })
	if err != nil {
		if got != nil {
			t.Fatalf("a failed subscription answered %v", got)
		}
		return nil, err
	}
	return got.Users, nil
}

func (f *fixture) befriend(t *testing.T, a, b string) {
	t.Helper()
	ctx := context.Background()
	if err := f.book.Request(ctx, a, b, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.book.Respond(ctx, b, a, true, ""); err != nil {
		t.Fatal(err)
	}
}

func userIDs(ps []*pb.Presence) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.UserId)
	}
	return ids
}

// A user may follow themself, friends, 1:1 peers and members of their
// groups, in the order asked, never someone who blocked them; strangers,
// members of others' groups and groups that are gone are left out.
func TestVisible(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.befriend(t, "alice", "bob")
	f.befriend(t, "alice", "gina")
	if err := f.book.SetBlocked(ctx, "gina", "alice", true); err != nil {
		t.Fatal(err)
	}
	f.circles.peers["alice"] = []string{"carol"}
	f.circles.groups["alice"] = []string{"g:gone", "g:team", "g:left"}
	f.circles.members["g:team"] = map[string]store.Member{"alice": {UserID: "alice"}, "dave": {UserID: "dave"}}
	f.circles.members["g:left"] = map[string]store.Member{"frank": {UserID: "frank"}} // alice is no longer in it

	ask := []string{"erin", "dave", "alice", "gina", "frank", "carol", "bob"}
	got, err := f.hub.Visible(ctx, "alice", ask)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dave", "alice", "carol", "bob"}; !slices.Equal(got, want) {
		t.Fatalf("visible %v, want %v", got, want)
	}

	// The block is one way: gina still sees alice.
	got, err = f.hub.Visible(ctx, "gina", []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("the blocker sees %v, want [alice]", got)
	}
}

// A subscriber gets the current state in its answer, then every change:
// online at the first session, offline (with last seen) when the last one
// closes, and nothing while another session remains.
func TestEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.befriend(t, "alice", "bob")
	alice, ac := f.open("alice")

	list, err := f.subscribe(t, alice, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].UserId != "bob" || list[0].Online || list[0].LastSeen != 0 {
		t.Fatalf("answer %v, want bob offline, never seen", list)
	}
	if !slices.Equal(f.watched, []string{"+bob"}) {
		t.Fatalf("watched %v, want [+bob]", f.watched)
	}

	b1, _ := f.open("bob")
	b2, _ := f.open("bob")
	if ev := ac.events(); len(ev) != 1 || !ev[0].Online {
		t.Fatalf("events %v, want one online", ev)
	}
	before := time.Now().UnixMilli()
	f.close(b1)
	if ev := ac.events(); len(ev) != 0 {
		t.Fatalf("events %v while bob has a session left, want none", ev)
	}
	f.close(b2)
	ev := ac.events()
	if len(ev) != 1 || ev[0].Online || ev[0].LastSeen < before {
		t.Fatalf("events %v, want one offline with last seen", ev)
	}
	seen, err := f.hub.LastSeen(ctx, "bob")
	if err != nil || seen.UnixMilli() != ev[0].LastSeen {
		t.Fatalf("LastSeen %v, %v; want the event's %d", seen, err, ev[0].LastSeen)
	}

	// A new subscription answers with the last-seen time.
	alice2, _ := f.open("alice")
	list, err = f.subscribe(t, alice2, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Online || list[0].LastSeen != ev[0].LastSeen {
		t.Fatalf("answer %v, want bob offline, last seen %d", list, ev[0].LastSeen)
	}

	// Closing a subscriber's session ends its subscriptions; the watch ends
	// with the last one.
	f.close(alice)
	f.close(alice2)
	if !slices.Equal(f.watched, []string{"+bob", "-bob"}) {
		t.Fatalf("watched %v, want [+bob -bob]", f.watched)
	}
	f.open("bob")
	if ev := ac.events(); len(ev) != 0 {
		t.Fatalf("a closed session got %v", ev)
	}
}

// Blocking a follower ends their subscriptions at once; unsubscribing by
// name or with an empty list ends them too.
func TestDropAndUnsubscribe(t *testing.T) {
	f := newFixture(t)
	f.befriend(t, "alice", "bob")
	f.befriend(t, "alice", "carol")
	alice, ac := f.open("alice")
	if _, err := f.subscribe(t, alice, "bob", "carol"); err != nil {
		t.Fatal(err)
	}

	f.hub.DropSubscriber("bob", "alice")
	f.open("bob")
	if ev := ac.events(); len(ev) != 0 {
		t.Fatalf("a dropped subscriber got %v", ev)
	}
	f.open("carol")
	if ev := ac.events(); len(ev) != 1 || ev[0].UserId != "carol" {
		t.Fatalf("events %v, want carol's", ev)
	}

	f.hub.Unsubscribe(alice, nil)
	if !slices.Equal(f.watched, []string{"+bob", "+carol", "-bob", "-carol"}) {
		t.Fatalf("watched %v", f.watched)
	}
}

// A session follows at most MaxSubscriptions users; a subscription past it
// fails and changes nothing, while users already followed do not count
// again.
func TestSubscriptionLimit(t *testing.T) {
	f := newFixture(t)
	var peers []string
	for i := range MaxSubscriptions + 1 {
		peers = append(peers, fmt.Sprint("u", i))
	}
	f.circles.peers["alice"] = peers
	alice, _ := f.open("alice")

	if _, err := f.subscribe(t, alice, peers[:MaxSubscriptions]...); err != nil {
		t.Fatal(err)
	}
	if _, err := f.subscribe(t, alice, peers[0], peers[MaxSubscriptions]); err != reqerr.TooLarge {
		t.Fatalf("one past the limit: %v, want TOO_LARGE", err)
	}
	if list, err := f.subscribe(t, alice, peers[:10]...); err != nil || len(list) != 10 {
		t.Fatalf("users already followed: %d, %v", len(list), err)
	}
	f.hub.Unsubscribe(alice, peers[:1])
	if _, err := f.subscribe(t, alice, peers[MaxSubscriptions]); err != nil {
		t.Fatalf("after one unsubscribe: %v", err)
	}
	// Another session of the same user has its own allowance.
	other, _ := f.open("alice")
	if _, err := f.subscribe(t, other, peers[0]); err != nil {
		t.Fatal(err)
	}
}

// In a cluster a subscription answers with what the other nodes say; a
// user goes offline here only when no node holds them, and a node taken for
// dead takes the users only it held offline with it.
func TestClusterPresence(t *testing.T) {
	cl := &cluster{nodes: map[string]string{"bob": "n2"}}
	f := newClusterFixture(t, cl)
	f.befriend(t, "alice", "bob")
	f.befriend(t, "alice", "carol")
	alice, ac := f.open("alice")
	list, err := f.subscribe(t, alice, "bob", "carol")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !list[0].Online || list[1].Online {
		t.Fatalf("answer %v, want bob online (on n2), carol offline", list)
	}

	// carol logs in on n3 and out of it again: offline once no node holds her.
	f.hub.Remote("carol", "n3", true)
	if ev := ac.events(); len(ev) != 1 || ev[0].UserId != "carol" || !ev[0].Online {
		t.Fatalf("events %v, want carol online", ev)
	}
	ac.sent = make(chan struct{}, 1)
	f.hub.Remote("carol", "n3", false) // asks the cluster on its own goroutine
	<-ac.sent
	if ev := ac.events(); len(ev) != 1 || ev[0].UserId != "carol" || ev[0].Online {
		t.Fatalf("events %v, want carol offline", ev)
	}

	// n2 dies without a word: bob, held only there, goes offline.
	cl.set("bob", "")
	f.hub.NodesGone([]string{"n2"})
	<-ac.sent
	if ev := ac.events(); len(ev) != 1 || ev[0].UserId != "bob" || ev[0].Online {
		t.Fatalf("events %v, want bob offline", ev)
	}
}

// One typing indicator per user and conversation passes per interval.
func TestTypingLimiter(t *testing.T) {
	var l TypingLimiter
	t0 := time.Unix(1000, 0)
	if !l.Allow("alice", "c1", t0) {
		t.Fatal("the first indicator was dropped")
	}
	if l.Allow("alice", "c1", t0.Add(TypingInterval-time.Millisecond)) {
		t.Fatal("a second indicator within the interval passed")
	}
	if !l.Allow("alice", "c2", t0) || !l.Allow("bob", "c1", t0) {
		t.Fatal("another conversation or user was limited")
	}
	if !l.Allow("alice", "c1", t0.Add(TypingInterval)) {
		t.Fatal("an indicator after the interval was dropped")
	}
}
