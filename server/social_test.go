package server_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// barrier returns once every frame queued for c before the call was handled
// by its hooks (a Pong is queued behind them and read in order).
func barrier(t *testing.T, c *client.Client) {
	t.Helper()
	if _, err := c.Ping(ctx10(t)); err != nil {
		t.Fatal(err)
	}
}

// wantContactEvent waits for rec's n-th contact event (1-based) and checks it.
func wantContactEvent(t *testing.T, rec *recorder, n int, uid string, state pb.ContactState, note string) {
	t.Helper()
	eventually(t, "contact event", func() bool { return len(rec.contactEvents()) >= n })
	ev := rec.contactEvents()[n-1].GetContact()
	if ev.GetUserId() != uid || ev.GetState() != state || ev.GetNote() != note || ev.GetUpdatedAt() == 0 {
		t.Fatalf("contact event %d = %v, want %s %v %q", n, ev, uid, state, note)
	}
}

// wantContacts checks c's contact list (states by user id) and block list.
func wantContacts(t *testing.T, c *client.Client, want map[string]pb.ContactState, blocked ...string) {
	t.Helper()
	l, err := c.Contacts(ctx10(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pb.ContactState{}
	for _, ct := range l.Contacts {
		got[ct.UserId] = ct.State
	}
	if len(got) != len(want) || strings.Join(l.Blocked, ",") != strings.Join(blocked, ",") {
		t.Fatalf("%s: contacts %v blocked %v, want %v blocked %v", c.UserID(), got, l.Blocked, want, blocked)
	}
	for u, s := range want {
		if got[u] != s {
			t.Fatalf("%s: contacts %v, want %v", c.UserID(), got, want)
		}
	}
}

const (
	friend   = pb.ContactState_CONTACT_STATE_FRIEND
	sent     = pb.ContactState_CONTACT_STATE_REQUEST_SENT
	received = pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED
	removed  = pb.ContactState_CONTACT_STATE_UNSPECIFIED
)

// Request, accept, remove, decline and crossing requests between users on
// different transports; each change reaches the other user's devices and the
// actor's other devices.
func TestFriendsAcrossTransports(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	for i, ta := range transports {
		tb := transports[(i+1)%len(transports)]
		t.Run(ta.name+"_"+tb.name, func(t *testing.T) {
			ua, ub := "fa-"+ta.name, "fb-"+tb.name
			ctx := ctx10(t)
			alice, recA := ts.connect(t, ua, "a1", "phone", ta)
			_, recA2 := ts.connect(t, ua, "a2", "desktop", tb) // alice's other device
			bob, recB := ts.connect(t, ub, "b1", "phone", tb)

			// Request with a note.
			if err := alice.FriendRequest(ctx, ub, "it's alice"); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recB, 1, ua, received, "it's alice")
			wantContactEvent(t, recA2, 1, ub, sent, "it's alice")
			wantContacts(t, alice, map[string]pb.ContactState{ub: sent})
			wantContacts(t, bob, map[string]pb.ContactState{ua: received})

			// Accept.
			if err := bob.RespondFriend(ctx, ua, true); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recA, 1, ub, friend, "")
			wantContactEvent(t, recA2, 2, ub, friend, "")
			wantContacts(t, alice, map[string]pb.ContactState{ub: friend})
			wantContacts(t, bob, map[string]pb.ContactState{ua: friend})
			if err := bob.RespondFriend(ctx, ua, true); err != nil { // a retry is harmless
				t.Fatal(err)
			}

			// Remove.
			if err := alice.RemoveFriend(ctx, ub); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recB, 2, ua, removed, "")
			wantContactEvent(t, recA2, 3, ub, removed, "")
			wantContacts(t, alice, nil)
			wantContacts(t, bob, nil)

			// Decline.
			if err := bob.FriendRequest(ctx, ua, ""); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recA, 2, ub, received, "")
			wantContactEvent(t, recA2, 4, ub, received, "")
			if err := alice.RespondFriend(ctx, ub, false); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recB, 3, ua, removed, "")
			wantContactEvent(t, recA2, 5, ub, removed, "")
			wantContacts(t, alice, nil)
			wantContacts(t, bob, nil)
			wantCode(t, alice.RespondFriend(ctx, ub, true), pb.ErrorCode_ERROR_CODE_CONFLICT)

			// Crossing requests make friends.
			if err := alice.FriendRequest(ctx, ub, "again"); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recB, 4, ua, received, "again")
			if err := bob.FriendRequest(ctx, ua, ""); err != nil {
				t.Fatal(err)
			}
			wantContactEvent(t, recA, 3, ub, friend, "")
			wantContactEvent(t, recA2, 7, ub, friend, "")
			wantContacts(t, alice, map[string]pb.ContactState{ub: friend})
			wantContacts(t, bob, map[string]pb.ContactState{ua: friend})

			// No stray events: the actor's own session is never told.
			for _, c := range []*client.Client{alice, bob} {
				barrier(t, c)
			}
			if n := len(recA.contactEvents()); n != 3 {
				t.Fatalf("alice's first device got %d contact events, want 3", n)
			}
			if n := len(recB.contactEvents()); n != 4 {
				t.Fatalf("bob got %d contact events, want 4", n)
			}
		})
	}
}

func TestContactBadInput(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bad := pb.ErrorCode_ERROR_CODE_BAD_REQUEST
	wantCode(t, alice.FriendRequest(ctx, "alice", ""), bad)
	wantCode(t, alice.FriendRequest(ctx, "not a user", ""), bad)
	wantCode(t, alice.FriendRequest(ctx, "", ""), bad)
	wantCode(t, alice.FriendRequest(ctx, "bob", strings.Repeat("n", 257)), pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	wantCode(t, alice.RespondFriend(ctx, "alice", true), bad)
	wantCode(t, alice.RespondFriend(ctx, "bob", true), pb.ErrorCode_ERROR_CODE_CONFLICT)
	wantCode(t, alice.RemoveFriend(ctx, "a:b"), bad)
	wantCode(t, alice.Block(ctx, "alice"), bad)
	wantCode(t, alice.Unblock(ctx, "x/y"), bad)
	if err := alice.FriendRequest(ctx, "bob", strings.Repeat("n", 256)); err != nil {
		t.Fatal(err)
	}
	if err := alice.RemoveFriend(ctx, "carol"); err != nil { // nothing to remove: still ok
		t.Fatal(err)
	}
	wantContacts(t, alice, map[string]pb.ContactState{"bob": sent})
}

// A blocked user's sends are refused with a generic PERMISSION_DENIED; their
// friend request and typing look accepted but reach nobody; unblocking
// restores messaging.
func TestBlock(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[1])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[2])

	ack, err := alice.SendText(ctx, "bob", "before")
	if err != nil {
		t.Fatal(err)
	}
	conv := ack.ConversationId
	if err := bob.Block(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Block(ctx, "alice"); err != nil { // twice is harmless
		t.Fatal(err)
	}
	_, err = alice.SendText(ctx, "bob", "after")
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = alice.SendToConversation(ctx, conv, "text", []byte("by id"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	wantContacts(t, bob, nil, "alice")

	// Blocking is one way.
	if _, err := bob.SendText(ctx, "alice", "I can still write"); err != nil {
		t.Fatal(err)
	}

	// A friend request looks accepted, but bob is not told and keeps no record.
	if err := alice.FriendRequest(ctx, "bob", "please"); err != nil {
		t.Fatal(err)
	}
	wantContacts(t, alice, map[string]pb.ContactState{"bob": sent})
	// Typing is acknowledged and dropped.
	if err := alice.Typing(ctx, conv); err != nil {
		t.Fatal(err)
	}
	barrier(t, bob)
	if _, typing, _, contacts := recB.counts(); typing != 0 || contacts != 0 {
		t.Fatalf("bob got %d typing and %d contact events from a blocked user", typing, contacts)
	}
	wantContacts(t, bob, nil, "alice")
	barrier(t, alice)
	if got := recA.contactEvents(); len(got) != 0 {
		t.Fatalf("the blocked user was told %v", got)
	}

	// Unblock: messages flow again.
	if err := bob.Unblock(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	wantContacts(t, bob, nil)
	if _, err := alice.SendText(ctx, "bob", "again"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the message", func() bool {
		m, _, _, _ := recB.counts()
		return m == 2
	})
	if m := recB.messages(); string(m[0].Payload) != "before" || string(m[1].Payload) != "again" {
		t.Fatalf("bob got %v", m)
	}
}

// With DenyStrangers, a stranger's send and a blocked friend's send get the
// same refusal; friendship opens the conversation.
func TestDenyStrangers(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.DenyStrangers = true })
	ctx := ctx10(t)
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[0])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])

	_, errStranger := carol.SendText(ctx, "bob", "hi stranger")
	wantCode(t, errStranger, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	if err := carol.Typing(ctx, "p:bob:carol"); err != nil { // dropped, not refused
		t.Fatal(err)
	}
	if _, err := carol.SendText(ctx, "carol", "a note to self"); err != nil {
		t.Fatal(err)
	}

	if err := carol.FriendRequest(ctx, "bob", "hi"); err != nil {
		t.Fatal(err)
	}
	_, err := carol.SendText(ctx, "bob", "still a stranger")
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	if err := bob.RespondFriend(ctx, "carol", true); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendText(ctx, "bob", "friends now"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.SendText(ctx, "carol", "yes"); err != nil {
		t.Fatal(err)
	}

	if err := bob.Block(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	_, errBlocked := carol.SendText(ctx, "bob", "blocked")
	var e1, e2 *client.Error
	if !errors.As(errStranger, &e1) || !errors.As(errBlocked, &e2) || *e1 != *e2 {
		t.Fatalf("stranger got %v, blocked friend got %v: they must look the same", errStranger, errBlocked)
	}

	if err := bob.Unblock(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendText(ctx, "bob", "unblocked"); err != nil {
		t.Fatal(err)
	}
	if err := carol.RemoveFriend(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = carol.SendText(ctx, "bob", "not friends any more")
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	eventually(t, "bob's messages", func() bool { m, _, _, _ := recB.counts(); return m == 2 })
	if got, _, _, _ := recB.counts(); got != 2 {
		t.Fatalf("bob got %d messages", got)
	}
}

// Typing reaches the peer (1:1) and the other members (group), is limited to
// one per user and conversation per 2 s, and is refused to non-members.
func TestTyping(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[2])
	carol, recC := ts.connect(t, "carol", "c1", "phone", transports[1])
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[1])

	ack, err := alice.SendText(ctx, "bob", "hi")
	if err != nil {
		t.Fatal(err)
	}
	conv := ack.ConversationId
	start := time.Now()
	if err := alice.Typing(ctx, conv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob sees alice typing", func() bool { return len(recB.typings()) == 1 })
	if ev := recB.typings()[0]; ev.ConversationId != conv || ev.UserId != "alice" {
		t.Fatalf("typing event %v", ev)
	}
	// More within 2 s: acknowledged, not forwarded.
	for range 5 {
		if err := alice.Typing(ctx, conv); err != nil {
			t.Fatal(err)
		}
	}
	within := time.Since(start) < 2*time.Second
	// A message sent after them arrives after anything they caused.
	if _, err := alice.SendText(ctx, "bob", "barrier"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the message", func() bool { m, _, _, _ := recB.counts(); return m == 2 })
	if n := len(recB.typings()); within && n != 1 {
		t.Fatalf("bob got %d typing events within 2 s, want 1", n)
	}
	// Once the interval has passed, the next one is forwarded.
	eventually(t, "the next typing event after 2 s", func() bool {
		if err := alice.Typing(ctx, conv); err != nil {
			t.Fatal(err)
		}
		barrier(t, bob)
		return len(recB.typings()) >= 2
	})
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("second typing event forwarded after %v", d)
	}
	barrier(t, alice)
	if n := len(recA.typings()); n != 0 {
		t.Fatalf("alice got %d of her own typing events", n)
	}

	// Group: the other members are told.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "typists", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.Typing(ctx, g.ConversationId); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*recorder{"alice": recA, "carol": recC} {
		eventually(t, name+" sees bob typing in the group", func() bool {
			for _, ev := range r.typings() {
				if ev.ConversationId == g.ConversationId && ev.UserId == "bob" {
					return true
				}
			}
			return false
		})
	}
	barrier(t, bob)
	for _, ev := range recB.typings() {
		if ev.UserId == "bob" {
			t.Fatalf("bob was sent his own typing event %v", ev)
		}
	}

	// Outsiders are refused, whether or not the conversation exists.
	denied := pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	wantCode(t, dave.Typing(ctx, g.ConversationId), denied)
	wantCode(t, dave.Typing(ctx, conv), denied)
	wantCode(t, dave.Typing(ctx, "g:0000000000000000"), denied)
	wantCode(t, dave.Typing(ctx, "nonsense"), denied)
	// A member who left may read the group but not type in it.
	if err := carol.LeaveGroup(ctx, g.ConversationId); err != nil {
		t.Fatal(err)
	}
	wantCode(t, carol.Typing(ctx, g.ConversationId), denied)
}

// Presence: a subscriber sees users it shares something with (1:1
// conversation, friendship, group) and is told when they go offline (with
// last seen) and come back; strangers and users who blocked it are left out.
func TestPresence(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[0])
	alice2, recA2 := ts.connect(t, "alice", "a2", "desktop", transports[1])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[2])
	bobDesk, _ := ts.connect(t, "bob", "b2", "desktop", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[1]) // a stranger
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[2])   // a friend
	erin, _ := ts.connect(t, "erin", "e1", "phone", transports[0])   // in a group with alice

	if _, err := bob.SendText(ctx, "alice", "hi"); err != nil {
		t.Fatal(err)
	}
	if err := alice.FriendRequest(ctx, "dave", ""); err != nil {
		t.Fatal(err)
	}
	if err := dave.RespondFriend(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"erin"}}); err != nil {
		t.Fatal(err)
	}
	dave.Close()

	byUser := func(l *pb.PresenceList) map[string]*pb.Presence {
		m := map[string]*pb.Presence{}
		for _, p := range l.Users {
			m[p.UserId] = p
		}
		return m
	}
	var got map[string]*pb.Presence
	eventually(t, "dave offline with a last seen", func() bool {
		l, err := alice.SubscribePresence(ctx, "bob", "carol", "dave", "erin", "nobody")
		if err != nil {
			t.Fatal(err)
		}
		got = byUser(l)
		return got["dave"].GetLastSeen() > 0 && !got["dave"].GetOnline()
	})
	if len(got) != 3 || !got["bob"].GetOnline() || !got["erin"].GetOnline() || got["dave"].GetOnline() {
		t.Fatalf("presence %v", got)
	}
	if l, err := alice2.SubscribePresence(ctx, "bob"); err != nil || len(l.Users) != 1 || !l.Users[0].Online {
		t.Fatalf("alice2 presence %v, %v", l, err)
	}
	// A stranger learns nothing, not even of an online user.
	if l, err := carol.SubscribePresence(ctx, "alice", "bob"); err != nil || len(l.Users) != 0 {
		t.Fatalf("stranger's presence %v, %v", l, err)
	}

	// Closing one of two sessions changes nothing.
	sessions := ts.Stats().Sessions
	bobDesk.Close()
	eventually(t, "bob's desktop session ends", func() bool { return ts.Stats().Sessions == sessions-1 })
	if l, err := alice.SubscribePresence(ctx, "bob"); err != nil || !l.Users[0].Online {
		t.Fatalf("bob with one session left: %v, %v", l, err)
	}
	barrier(t, alice)
	if n := len(recA.presencesOf("bob")); n != 0 {
		t.Fatalf("presence events %v", recA.presences())
	}

	// The last one: offline, with last seen.
	if err := alice.UnsubscribePresence(ctx, "bob"); err != nil { // alice2 stays subscribed
		t.Fatal(err)
	}
	closedAt := time.Now()
	bob.Close()
	eventually(t, "bob goes offline", func() bool { return len(recA2.presencesOf("bob")) == 1 })
	off := recA2.presencesOf("bob")[0]
	if off.UserId != "bob" || off.Online || off.LastSeen < closedAt.Add(-time.Second).UnixMilli() {
		t.Fatalf("offline event %v", off)
	}
	if l, err := alice2.SubscribePresence(ctx, "bob"); err != nil || l.Users[0].Online || l.Users[0].LastSeen != off.LastSeen {
		t.Fatalf("bob after he left: %v, %v (event %v)", l, err, off)
	}

	// Back online.
	ts.connect(t, "bob", "b1", "phone", transports[2])
	eventually(t, "bob comes back", func() bool { return len(recA2.presencesOf("bob")) == 2 })
	if on := recA2.presencesOf("bob")[1]; !on.Online {
		t.Fatalf("online event %v", on)
	}
	barrier(t, alice)
	if n := len(recA.presencesOf("bob")); n != 0 {
		t.Fatalf("alice unsubscribed but got %v", recA.presences())
	}

	// A user who blocks the subscriber disappears from its presence.
	if err := erin.Block(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if l, err := alice.SubscribePresence(ctx, "erin"); err != nil || len(l.Users) != 0 {
		t.Fatalf("presence of a user who blocked alice: %v, %v", l, err)
	}

	// Bad input.
	_, err := alice.SubscribePresence(ctx, "bob", "no such id!")
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	many := make([]string, 1001)
	for i := range many {
		many[i] = "u" + strings.Repeat("x", i%50) + string(rune('a'+i%26))
	}
	_, err = alice.SubscribePresence(ctx, many...)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	wantCode(t, alice.UnsubscribePresence(ctx, "a b"), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	if err := alice.UnsubscribePresence(ctx); err != nil {
		t.Fatal(err)
	}
}
