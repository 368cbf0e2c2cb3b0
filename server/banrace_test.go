package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// staleUserStore hands one login the user record as it was before a ban,
// holding it until the ban is done: the login's check passed, the ban's
// close found no session, and only then does the session register.
type staleUserStore struct {
	store.Store
	uid     string
	once    sync.Once
	armed   chan struct{} // closed to arm the hold
	held    chan struct{} // closed when a login holds its stale record
	release chan struct{} // closed to let it go on
}

func (s *staleUserStore) GetUser(ctx context.Context, id string) (store.User, error) {
	u, err := s.Store.GetUser(ctx, id)
	if id != s.uid {
		return u, err
	}
	select {
	case <-s.armed:
	default:
		return u, err
	}
	hold := false
	s.once.Do(func() { hold = true })
	if hold {
		close(s.held)
		<-s.release
	}
	return u, err
}

// A login whose token check raced a ban (it read the user before the ban
// was stored, and registered after the ban closed the user's sessions) is
// closed too: a ban leaves no session behind.
func TestBanClosesALoginThatRacedIt(t *testing.T) {
	t.Parallel()
	st := &staleUserStore{uid: "mallory", armed: make(chan struct{}), held: make(chan struct{}), release: make(chan struct{})}
	ts := startServer(t, func(c *server.Config) {
		server.SetStoreWrapForTest(c, func(inner store.Store) store.Store { st.Store = inner; return st })
	})
	ctx := ctx10(t)
	admin := adminClient(ts)
	if _, err := admin.CreateUser(ctx, "mallory", ""); err != nil {
		t.Fatal(err)
	}
	token := ts.mint(t, "mallory")
	close(st.armed)
	type dialed struct {
		rec *recorder
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		_, rec, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: token, DeviceID: "m1", DeviceType: "phone"})
		done <- dialed{rec, err}
	}()
	<-st.held // the login has read mallory as not banned
	if _, err := admin.Ban(ctx, "mallory", "spam", 0); err != nil {
		t.Fatal(err)
	}
	close(st.release)
	d := <-done
	if d.err != nil {
		return // refused outright: nothing was left open
	}
	eventually(t, "the raced login is closed", func() bool {
		closed, err := d.rec.isClosed()
		return closed && isDisconnect(err, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED)
	})
}
