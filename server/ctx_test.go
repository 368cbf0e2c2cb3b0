package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// stallingStore is the real store, except that reading the conversation
// settings of conversation conv waits until the caller's context is done,
// as a store that stopped answering would (a statement stuck on a lock, a
// database behind a stalled network). It reports each such call as it
// begins (entered) and as it returns (left, with its context's error).
type stallingStore struct {
	store.Store
	conv    string
	entered chan struct{}
	left    chan error
}

func (s *stallingStore) GetConversationSettings(ctx context.Context, uid, conv string) (store.ConversationSettings, error) {
	if conv != s.conv {
		return s.Store.GetConversationSettings(ctx, uid, conv)
	}
	s.entered <- struct{}{}
	<-ctx.Done()
	s.left <- ctx.Err()
	return store.ConversationSettings{}, ctx.Err()
}

// startStalling starts a server whose store stalls reads of conv's settings
// (a history read of conv stalls).
func startStalling(t *testing.T, conv string) (*testServer, *stallingStore) {
	st := &stallingStore{conv: conv, entered: make(chan struct{}, 4), left: make(chan error, 4)}
	ts := startServer(t, func(c *server.Config) {
		server.SetStoreWrapForTest(c, func(inner store.Store) store.Store { st.Store = inner; return st })
	})
	return ts, st
}

// waitStalled waits for a stalled store call to begin (step names it in a failure).
func waitStalled(t *testing.T, st *stallingStore, step string) {
	t.Helper()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the history read never reached the store", step)
	}
}

// waitReleased waits for the stalled store call to return: it must end
// once nobody waits for its answer, not hold on for as long as the store
// does not answer (forever here).
func waitReleased(t *testing.T, st *stallingStore, why string) {
	t.Helper()
	select {
	case err := <-st.left:
		if err == nil {
			t.Fatalf("the stalled store call returned without its context being done")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the stalled store call still runs after %s", why)
	}
}

// A slow store read for a socket client stops when the connection closes
// (here: an admin kicks the session while its history read hangs in the
// store), instead of holding the store call for as long as the store takes.
func TestStalledReadEndsWithItsConnection(t *testing.T) {
	t.Parallel()
	conv := "p:alice:bob"
	ts, st := startStalling(t, conv)
	alice := ts.dialOnly(t, "alice", "phone-1", "phone")
	done := make(chan error, 1)
	go func() {
		_, err := alice.History(context.Background(), conv, 0, 10)
		done <- err
	}()
	waitStalled(t, st, "socket")
	if _, err := adminClient(ts).Kick(ctx10(t), "alice", alice.AuthOk().SessionId); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, st, "its connection closed")
	if err := <-done; err == nil {
		t.Fatal("the kicked session's history read succeeded")
	}
}

// A slow store read for POST /v1/rpc stops when the HTTP client goes away.
func TestStalledRPCEndsWithItsRequest(t *testing.T) {
	t.Parallel()
	conv := "p:alice:bob"
	ts, st := startStalling(t, conv)
	body, err := protojson.Marshal(&pb.ClientFrame{Body: &pb.ClientFrame_History{History: &pb.History{ConversationId: conv, Limit: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.httpBase+"/v1/rpc", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.mint(t, "alice"))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitStalled(t, st, "rpc")
	cancel() // the client gives up and closes its connection
	<-done
	waitReleased(t, st, "its HTTP client went away")
}
