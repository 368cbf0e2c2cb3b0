package session

import (
	"testing"
	"time"

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

// Evict removes what a login on another node replaces; a session of
// another device type is left alone.
func TestEvict(t *testing.T) {
	r := NewRegistry(KickSameDeviceType)
	now := time.Now()
	web := &Session{ID: "1-1", UserID: "alice", DeviceID: "d1", DeviceType: "web", Conn: nopConn{}, Started: now.Add(-time.Minute)}
	ios := &Session{ID: "1-2", UserID: "alice", DeviceID: "d2", DeviceType: "ios", Conn: nopConn{}, Started: now}
	r.Add(web)
	r.Add(ios)
	newcomer := &Session{ID: "2-9", UserID: "alice", DeviceID: "d3", DeviceType: "web", Started: now}
	if kicked, stayed := r.Evict(newcomer, now, 2*time.Second); len(kicked) != 1 || kicked[0] != web || len(stayed) != 0 {
		t.Fatalf("evicted %v, stayed %v: want the web session evicted", kicked, stayed)
	}
	if r.ByID("1-1") != nil || r.Len() != 1 || len(r.Sessions("alice")) != 1 {
		t.Fatal("an evicted session is still registered")
	}
}

// Two logins of one device type on two nodes, whatever subset of their
// kicks reaches the other node and in whatever order: exactly one session
// survives, on both nodes' view the same one, the later login.
func TestEvictCrossingLogins(t *testing.T) {
	const window = 2 * time.Second
	t0 := time.Now()
	for _, tc := range []struct {
		name   string
		oStart time.Duration // O's start on node A, N's on node B, from t0
		nStart time.Duration
		oID    string
		nID    string
	}{
		{"N later", 0, 300 * time.Millisecond, "1-5", "2-5"},
		{"N earlier", 300 * time.Millisecond, 0, "1-5", "2-5"},
		{"N later, lower node", 0, 300 * time.Millisecond, "3-5", "1-5"},
		{"same instant, id decides", 0, 0, "3-5", "1-5"},
		{"same instant, counters", 0, 0, "1-10", "2-9"},
	} {
		for _, deliver := range []string{"N to A", "O to B", "both, A first", "both, B first"} {
			t.Run(tc.name+"/"+deliver, func(t *testing.T) {
				a, b := NewRegistry(KickSameDeviceType), NewRegistry(KickSameDeviceType)
				o := &Session{ID: tc.oID, UserID: "u", DeviceID: "p1", DeviceType: "phone", Conn: nopConn{}, Started: t0.Add(tc.oStart)}
				n := &Session{ID: tc.nID, UserID: "u", DeviceID: "p2", DeviceType: "phone", Conn: nopConn{}, Started: t0.Add(tc.nStart)}
				a.Add(o)
				b.Add(n)
				// A kick crossing the cluster carries only these fields.
				wireCopy := func(s *Session) *Session {
					return &Session{ID: s.ID, UserID: s.UserID, DeviceID: s.DeviceID, DeviceType: s.DeviceType,
						Started: time.Unix(0, s.Started.UnixNano())}
				}
				type kick struct {
					to *Registry
					s  *Session
				}
				var queue []kick
				switch deliver {
				case "N to A":
					queue = []kick{{a, wireCopy(n)}}
				case "O to B":
					queue = []kick{{b, wireCopy(o)}}
				case "both, A first":
					queue = []kick{{a, wireCopy(n)}, {b, wireCopy(o)}}
				case "both, B first":
					queue = []kick{{b, wireCopy(o)}, {a, wireCopy(n)}}
				}
				now := t0.Add(500 * time.Millisecond)
				for len(queue) > 0 {
					k := queue[0]
					queue = queue[1:]
					_, stayed := k.to.Evict(k.s, now, window)
					for _, s := range stayed { // announced again, to the other node
						other := a
						if k.to == a {
							other = b
						}
						queue = append(queue, kick{other, wireCopy(s)})
					}
					if len(queue) > 10 {
						t.Fatal("kicks announced again without end")
					}
				}
				left := append(append([]*Session(nil), a.Sessions("u")...), b.Sessions("u")...)
				want := o
				if n.LoginAfter(o) {
					want = n
				}
				if len(left) != 1 || left[0] != want {
					t.Fatalf("left %v, want only %s", ids(left), want.ID)
				}
			})
		}
	}
}

// A session older than the window yields to a newcomer even when the
// newcomer's node stamped an earlier start (its clock runs behind).
func TestEvictOldSessionAlwaysGoes(t *testing.T) {
	r := NewRegistry(KickSameDeviceType)
	now := time.Now()
	old := &Session{ID: "1-1", UserID: "u", DeviceID: "p1", DeviceType: "phone", Conn: nopConn{}, Started: now.Add(-5 * time.Second)}
	r.Add(old)
	behind := &Session{ID: "2-1", UserID: "u", DeviceID: "p2", DeviceType: "phone", Started: now.Add(-time.Minute)}
	if kicked, stayed := r.Evict(behind, now, 2*time.Second); len(kicked) != 1 || len(stayed) != 0 {
		t.Fatalf("kicked %v, stayed %v: want the old session kicked", ids(kicked), ids(stayed))
	}
}

func ids(list []*Session) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}
