package session

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

type nopConn struct{}

func (nopConn) Send(*wire.Outbound) bool                 { return true }
func (nopConn) SendHeld(*wire.Outbound, *wire.Hold) bool { return true }
func (nopConn) Close(pb.DisconnectCode, string)          {}

// The id index follows Add, kicks and Remove.
func TestByIDIndex(t *testing.T) {
	r := NewRegistry(KickSameDeviceType)
	a := &Session{ID: "0-1", UserID: "alice", DeviceID: "d1", DeviceType: "web", Conn: nopConn{}}
	b := &Session{ID: "0-2", UserID: "alice", DeviceID: "d2", DeviceType: "ios", Conn: nopConn{}}
	r.Add(a)
	r.Add(b)
	if r.ByID("0-1") != a || r.ByID("0-2") != b || r.ByID("0-3") != nil {
		t.Fatal("ByID after Add")
	}
	a2 := &Session{ID: "0-3", UserID: "alice", DeviceID: "d3", DeviceType: "web", Conn: nopConn{}}
	if kicked := r.Add(a2); len(kicked) != 1 || kicked[0] != a {
		t.Fatalf("kicked = %v", kicked)
	}
	if r.ByID("0-1") != nil || r.ByID("0-3") != a2 {
		t.Fatal("kicked session still indexed")
	}
	if r.Remove(a) { // already kicked
		t.Fatal("Remove of kicked session")
	}
	n := 0
	r.ForEach(func(*Session) { n++ })
	if n != 2 || r.Len() != 2 {
		t.Fatalf("ForEach saw %d, Len %d", n, r.Len())
	}
	r.Remove(b)
	if r.ByID("0-2") != nil {
		t.Fatal("removed session still indexed")
	}
}

// Kept counts the user's sessions a login would leave in place: those the
// kick policy replaces are not counted, other users' never are.
func TestKept(t *testing.T) {
	for _, tc := range []struct {
		policy KickPolicy
		want   int
	}{{KickSameDeviceType, 1}, {KickSameDevice, 2}, {KickNone, 3}} {
		r := NewRegistry(tc.policy)
		r.Add(&Session{ID: "0-1", UserID: "alice", DeviceID: "d1", DeviceType: "web", Conn: nopConn{}})
		r.Add(&Session{ID: "0-2", UserID: "alice", DeviceID: "d2", DeviceType: "ios", Conn: nopConn{}})
		r.Add(&Session{ID: "0-3", UserID: "alice", DeviceID: "d3", DeviceType: "mac", Conn: nopConn{}})
		r.Add(&Session{ID: "0-4", UserID: "bob", DeviceID: "d9", DeviceType: "web", Conn: nopConn{}})
		held := len(r.Sessions("alice"))
		// A newcomer with d1's id and d2's type: the device_type policy
		// replaces d1 and d2, the device policy d1 only.
		n := &Session{ID: "0-5", UserID: "alice", DeviceID: "d1", DeviceType: "ios"}
		if got := r.Kept(n); got != tc.want {
			t.Fatalf("policy %d: Kept = %d with %d held, want %d", tc.policy, got, held, tc.want)
		}
		if got := held + 1 - len(r.Add(n)); got != tc.want+1 {
			t.Fatalf("policy %d: Add left %d, Kept said %d + the newcomer", tc.policy, got, tc.want)
		}
		if fresh := (&Session{ID: "0-6", UserID: "carol", DeviceID: "d1", DeviceType: "web"}); r.Kept(fresh) != 0 {
			t.Fatal("Kept counted another user's sessions")
		}
	}
}

// Evict removes what a login on another node replaces, except what keep spares.
func TestEvict(t *testing.T) {
	r := NewRegistry(KickSameDeviceType)
	web := &Session{ID: "1-1", UserID: "alice", DeviceID: "d1", DeviceType: "web", Conn: nopConn{}}
	ios := &Session{ID: "1-2", UserID: "alice", DeviceID: "d2", DeviceType: "ios", Conn: nopConn{}}
	r.Add(web)
	r.Add(ios)
	newcomer := &Session{ID: "2-9", UserID: "alice", DeviceID: "d3", DeviceType: "web"}
	if kicked := r.Evict(newcomer, func(*Session) bool { return true }); len(kicked) != 0 {
		t.Fatalf("keep spared nothing: %v", kicked)
	}
	if kicked := r.Evict(newcomer, nil); len(kicked) != 1 || kicked[0] != web {
		t.Fatalf("evicted %v, want the web session", kicked)
	}
	if r.ByID("1-1") != nil || r.Len() != 1 || len(r.Sessions("alice")) != 1 {
		t.Fatal("an evicted session is still registered")
	}
}
