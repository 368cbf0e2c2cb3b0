package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

type mode struct {
	name, scheme string
	codec        wire.Codec
}

// modes are the transports and codecs every protocol test runs over.
func modes() []mode {
	return []mode{
		{"ws-proto", "ws", wire.Proto},
		{"ws-json", "ws", wire.JSON},
		{"tcp", "tcp", wire.Proto},
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, s *fakeServer, scheme string, codec wire.Codec, user string, mod func(*Options)) *Client {
	t.Helper()
	o := Options{Addr: s.addr(scheme), Token: user, DeviceID: user + "-dev", DeviceType: "test", Codec: codec}
	if mod != nil {
		mod(&o)
	}
	c, err := Dial(testCtx(t), o)
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestMultiplexing pipelines many concurrent requests on one connection and
// checks every reply reaches its caller, including replies that come back
// out of order.
func TestMultiplexing(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			s := newFakeServer(t)
			ctx := testCtx(t)
			var mu sync.Mutex
			var got []uint64
			bob := dial(t, s, m.scheme, m.codec, "bob", func(o *Options) {
				o.OnMessage = func(msg *pb.Message) {
					mu.Lock()
					got = append(got, msg.Seq)
					mu.Unlock()
				}
			})
			alice := dial(t, s, m.scheme, m.codec, "alice", nil)
			if alice.UserID() != "alice" || bob.AuthOk().GetHeartbeatSeconds() != 30 {
				t.Fatalf("auth ok: %v", alice.AuthOk())
			}

			// A slow request answered after a later fast one.
			slowDone := make(chan *pb.SendAck)
			go func() {
				ack, err := alice.Send(ctx, &pb.Send{To: "bob", ContentType: "slow", ClientMsgId: "slow-1"})
				if err != nil {
					t.Error(err)
				}
				slowDone <- ack
			}()
			time.Sleep(10 * time.Millisecond)
			fast, err := alice.Ping(ctx)
			if err != nil || fast.ServerTime != 1 {
				t.Fatalf("ping: %v %v", fast, err)
			}
			select {
			case <-slowDone:
				t.Fatal("slow reply arrived before the fast one")
			default:
			}
			if ack := <-slowDone; ack.ClientMsgId != "slow-1" {
				t.Fatalf("slow ack: %v", ack)
			}

			const workers, each = 20, 25
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("w%d-%d", w, i)
						ack, err := alice.Send(ctx, &pb.Send{To: "bob", ContentType: "text", Payload: []byte(id), ClientMsgId: id})
						if err != nil || ack.ClientMsgId != id || ack.Seq == 0 {
							t.Errorf("send %s: %v %v", id, ack, err)
							return
						}
						if i%5 == 0 {
							if _, err := alice.Ping(ctx); err != nil {
								t.Error(err)
							}
						}
					}
				})
			}
			wg.Wait()
			total := uint64(1 + workers*each)
			waitFor(t, "pushes", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == int(total)
			})
			for i, seq := range got {
				if seq != uint64(i+1) {
					t.Fatalf("push %d has seq %d", i, seq)
				}
			}
			// A frame far larger than the read buffers, both ways.
			big := make([]byte, 300<<10)
			for i := range big {
				big[i] = byte(i)
			}
			bigAck, err := alice.Send(ctx, &pb.Send{To: "bob", ContentType: "bin", Payload: big})
			if err != nil {
				t.Fatal(err)
			}
			total++
			bp, err := bob.SyncMessages(ctx, "alice:bob", bigAck.Seq-1, 1)
			if err != nil || len(bp.Messages) != 1 || !bytes.Equal(bp.Messages[0].Payload, big) {
				t.Fatalf("big payload did not round-trip: %v", err)
			}
			page, err := bob.SyncMessages(ctx, "alice:bob", total-10, 5)
			if err != nil || len(page.Messages) != 5 || page.Messages[0].Seq != total-9 || !page.HasMore {
				t.Fatalf("sync: %v %v", page, err)
			}
			all, err := bob.AllConversations(ctx)
			if err != nil || len(all) != 1 || all[0].LastSeq != total {
				t.Fatalf("conversations: %v %v", all, err)
			}
			if err := bob.MarkRead(ctx, "alice:bob", total); err != nil {
				t.Fatal(err)
			}
			// An unknown frame type comes back as a typed error.
			_, err = bob.History(ctx, "alice:bob", 0, 10)
			if !IsCode(err, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME) {
				t.Fatalf("history on the fake: %v", err)
			}
		})
	}
}

// TestSendRetry: UNAVAILABLE and lost replies are retried under the same
// client_msg_id, and the message is stored once.
func TestSendRetry(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			s := newFakeServer(t)
			ctx := testCtx(t)
			alice := dial(t, s, m.scheme, m.codec, "alice", func(o *Options) { o.RequestTimeout = 100 * time.Millisecond })

			s.with(func() { s.unavailable = 2 })
			ack, err := alice.SendText(ctx, "bob", "one")
			if err != nil || ack.Seq != 1 || ack.Duplicate {
				t.Fatalf("send: %v %v", ack, err)
			}
			s.with(func() { s.dropReply = 1 })
			ack2, err := alice.SendText(ctx, "bob", "two")
			if err != nil || ack2.Seq != 2 || !ack2.Duplicate {
				t.Fatalf("send after a lost reply: %v %v", ack2, err)
			}
			s.with(func() {
				if n := s.attempts[ack.ClientMsgId]; n != 3 {
					t.Errorf("first send: %d attempts, want 3", n)
				}
				if n := s.attempts[ack2.ClientMsgId]; n != 2 {
					t.Errorf("second send: %d attempts, want 2", n)
				}
				if n := len(s.convs["alice:bob"]); n != 2 {
					t.Errorf("stored %d messages, want 2", n)
				}
			})

			// Retries stop at MaxSendAttempts with the typed error.
			s.with(func() { s.unavailable = 100 })
			alice.opts.MaxSendAttempts = 2
			_, err = alice.SendText(ctx, "bob", "three")
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_UNAVAILABLE || !pe.Temporary() {
				t.Fatalf("want UNAVAILABLE, got %v", err)
			}
		})
	}
}

// TestSession: reconnect, resend under the same client_msg_id, catch-up sync
// after the cursor, gap fill, de-duplication and coalesced delivered acks.
func TestSession(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			s := newFakeServer(t)
			ctx := testCtx(t)
			var mu sync.Mutex
			var got []uint64
			var disconnects int
			bob, err := NewSession(SessionOptions{
				Options: Options{Token: "bob", DeviceID: "bob-1", Codec: m.codec, AutoDeliveredAck: true,
					OnMessage: func(msg *pb.Message) {
						mu.Lock()
						got = append(got, msg.Seq)
						mu.Unlock()
					}},
				Addrs:        []string{s.addr(m.scheme), s.addr(m.scheme)},
				MinBackoff:   5 * time.Millisecond,
				MaxBackoff:   20 * time.Millisecond,
				OnDisconnect: func(error) { disconnects++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer bob.Close()
			if err := bob.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			alice := dial(t, s, m.scheme, m.codec, "alice", nil)
			seqs := func() []uint64 {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(got)
			}
			upTo := func(n uint64) []uint64 {
				var w []uint64
				for i := uint64(1); i <= n; i++ {
					w = append(w, i)
				}
				return w
			}
			send := func(text string) {
				if _, err := alice.SendText(ctx, "bob", text); err != nil {
					t.Fatal(err)
				}
			}
			expect := func(n uint64) {
				t.Helper()
				waitFor(t, fmt.Sprintf("seq %d at bob", n), func() bool { return bob.Cursor("alice:bob") == n })
				if g := seqs(); !slices.Equal(g, upTo(n)) {
					t.Fatalf("bob got %v, want 1..%d once each, in order", g, n)
				}
			}

			for i := range 3 {
				send(fmt.Sprint("live ", i))
			}
			expect(3)

			// Offline while 3 more arrive: the reconnect catches up by sync.
			s.with(func() { s.refuse["bob"] = true })
			s.drop("bob", 0)
			waitFor(t, "bob offline", func() bool { return bob.Client() == nil })
			for i := range 3 {
				send(fmt.Sprint("offline ", i))
			}
			s.with(func() { s.refuse["bob"] = false })
			expect(6)
			if err := bob.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}

			// A lost push (7) is fetched when 8 arrives; 8's duplicate is dropped.
			s.with(func() { s.skipPush[7] = true; s.dupPush = true })
			send("gap")
			send("after gap")
			expect(8)
			s.with(func() { s.dupPush = false })

			// The link dies after the server stored bob's message but before
			// the ack: the session resends it under the same id.
			s.with(func() { s.killOnStore = 1 })
			ack, err := bob.SendText(ctx, "alice", "reply")
			if err != nil || ack.Seq != 9 || !ack.Duplicate {
				t.Fatalf("resent send: %v %v", ack, err)
			}
			s.with(func() {
				if n := s.attempts[ack.ClientMsgId]; n != 2 {
					t.Errorf("bob's send seen %d times, want 2", n)
				}
			})
			// Bob's own message moves his cursor. It is handed back to him
			// only if the reconnect's catch-up sync read it before the resend
			// was acked; either way each seq comes once, in order.
			waitFor(t, "cursor 9", func() bool { return bob.Cursor("alice:bob") == 9 })
			if g := seqs(); !slices.Equal(g, upTo(8)) && !slices.Equal(g, upTo(9)) {
				t.Fatalf("bob got %v, want 1..8 or 1..9 once each, in order", g)
			}
			// The server moves a sender's own cursors on send, so the last
			// delivered ack is for what bob received: 8 (or 9, see above).
			waitFor(t, "delivered ack 8", func() bool {
				var last uint64
				s.with(func() {
					if d := s.delivered["bob"]; len(d) > 0 {
						last = d[len(d)-1]
					}
				})
				return last >= 8
			})
			s.with(func() {
				if s.syncs["bob"] == 0 {
					t.Error("bob never synced")
				}
			})
			if c := bob.Cursors(); c["alice:bob"] != 9 || bob.Pending() != 0 {
				t.Fatalf("cursors %v, pending %d", c, bob.Pending())
			}

			// Kicked by another login: the session ends instead of fighting back.
			if err := bob.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			s.drop("bob", pb.DisconnectCode_DISCONNECT_CODE_KICKED)
			select {
			case <-bob.Done():
			case <-ctx.Done():
				t.Fatal("session survived a kick")
			}
			var de *DisconnectError
			if err := bob.Err(); !errors.As(err, &de) || de.Code != pb.DisconnectCode_DISCONNECT_CODE_KICKED || !errors.Is(err, ErrClosed) {
				t.Fatalf("session error %v", err)
			}
			if _, err := bob.SendText(ctx, "alice", "x"); !errors.Is(err, ErrClosed) {
				t.Fatalf("send on an ended session: %v", err)
			}
			if disconnects < 3 {
				t.Fatalf("OnDisconnect called %d times", disconnects)
			}
		})
	}
}

// TestAutoDeliveredAck: a burst of pushes is acknowledged with a few
// cumulative acks, not one per message.
func TestAutoDeliveredAck(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			s := newFakeServer(t)
			var n int
			var mu sync.Mutex
			dial(t, s, m.scheme, m.codec, "bob", func(o *Options) {
				o.AutoDeliveredAck = true
				o.OnMessage = func(*pb.Message) { mu.Lock(); n++; mu.Unlock() }
			})
			var frames []*pb.ServerFrame
			for i := range 200 {
				frames = append(frames, &pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{
					ConversationId: "c", Seq: uint64(i + 1), Payload: []byte("hello")}}})
			}
			s.pushAll("bob", frames)
			var acks []uint64
			waitFor(t, "ack of 200", func() bool {
				s.with(func() { acks = slices.Clone(s.delivered["bob"]) })
				return len(acks) > 0 && acks[len(acks)-1] == 200
			})
			if len(acks) > 20 || !slices.IsSorted(acks) {
				t.Fatalf("200 messages acked with %d acks: %v", len(acks), acks)
			}
		})
	}
}

func TestHeartbeatAndClose(t *testing.T) {
	s := newFakeServer(t)
	var closeErr error
	closed := make(chan struct{})
	c := dial(t, s, "ws", wire.Proto, "alice", func(o *Options) {
		o.Heartbeat = 20 * time.Millisecond
		o.OnClose = func(err error) { closeErr = err; close(closed) }
	})
	waitFor(t, "heartbeat pings", func() bool {
		var n int
		s.with(func() { n = s.pings })
		return n >= 3
	})
	s.drop("alice", pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN)
	<-closed
	var de *DisconnectError
	if !errors.As(closeErr, &de) || de.Code != pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN || !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("close reason %v / %v", closeErr, c.Err())
	}
	if _, err := c.Ping(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("ping after close: %v", err)
	}

	c2 := dial(t, s, "tcp", wire.Proto, "bob", nil)
	c2.Close()
	if _, err := c2.SendText(testCtx(t), "alice", "x"); err != ErrClosed {
		t.Fatalf("send after Close: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	s := newFakeServer(t)
	ctx := testCtx(t)
	_, err := Dial(ctx, Options{Addr: s.addr("ws"), Token: "bad"})
	if !IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := Dial(ctx, Options{Addr: s.addr("tcp"), Token: "a", Codec: wire.JSON}); err == nil {
		t.Fatal("JSON over TCP accepted")
	}
	if _, err := Dial(ctx, Options{Addr: "http://x", Token: "a"}); err == nil {
		t.Fatal("http scheme accepted")
	}
	sess, err := NewSession(SessionOptions{Options: Options{Addr: s.addr("tcp"), Token: "bad"}, MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.WaitReady(ctx); !IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
		t.Fatalf("session with a bad token: %v", err)
	}
}

func TestHTTP(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/register" && body["username"] == "taken":
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":{"code":"username_taken","message":"username is taken"}}`)
		case r.URL.Path == "/v1/register":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"user_id":"u1","token":"t1","expires_at":%q}`, exp.Format(time.RFC3339))
		case r.URL.Path == "/v1/logout" && r.Header.Get("Authorization") == "Bearer t1":
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/v1/admin/tokens" && r.Header.Get("X-Api-Key") == "k" && body["ttl_seconds"] == 60.0:
			fmt.Fprintf(w, `{"user_id":%q,"token":"t2","expires_at":%q}`, body["user_id"], exp.Format(time.RFC3339))
		default:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthenticated","message":"no"}}`)
		}
	}))
	defer srv.Close()
	ctx := testCtx(t)
	cr, err := Register(ctx, srv.URL, "alice", "pw")
	if err != nil || cr.UserID != "u1" || cr.Token != "t1" || !cr.ExpiresAt.Equal(exp) {
		t.Fatalf("register: %+v %v", cr, err)
	}
	_, err = Register(ctx, srv.URL, "taken", "pw")
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 409 || he.Code != "username_taken" {
		t.Fatalf("register taken: %v", err)
	}
	if err := Logout(ctx, srv.URL, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := Logout(ctx, srv.URL, "nope"); !errors.As(err, &he) || he.Code != "unauthenticated" {
		t.Fatalf("logout: %v", err)
	}
	mt, err := MintToken(ctx, srv.URL+"/", "k", "u9", time.Minute)
	if err != nil || mt.UserID != "u9" || mt.Token != "t2" {
		t.Fatalf("mint: %+v %v", mt, err)
	}
}

// BenchmarkSend measures pipelined sends on one connection (against the
// in-test server, so it bounds the SDK's overhead only loosely).
func BenchmarkSend(b *testing.B) {
	for _, m := range modes() {
		b.Run(m.name, func(b *testing.B) {
			s := newFakeServerTB(b)
			c, err := Dial(context.Background(), Options{Addr: s.addr(m.scheme), Token: "alice", Codec: m.codec})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			payload := []byte("hello, benchmark")
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb_ *testing.PB) {
				for pb_.Next() {
					if _, err := c.Send(context.Background(), &pb.Send{To: "bob", ContentType: "text", Payload: payload}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// A session keeps paging while has_more is set, however few messages a
// page holds (the server bounds pages by bytes), and retries a sync the
// server refused as busy (TOO_MANY_REQUESTS) instead of skipping the
// conversation.
func TestSessionShortPagesAndBusyServer(t *testing.T) {
	s := newFakeServer(t)
	ctx := testCtx(t)
	alice := dial(t, s, "tcp", wire.Proto, "alice", nil)
	const n = 20
	for i := range n {
		if _, err := alice.SendText(ctx, "bob", fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.with(func() { s.pageMax, s.busySyncs = 3, 2 })
	var mu sync.Mutex
	var got []uint64
	bob, err := NewSession(SessionOptions{
		Options: Options{Token: "bob", DeviceID: "bob-1", OnMessage: func(m *pb.Message) {
			mu.Lock()
			got = append(got, m.Seq)
			mu.Unlock()
		}},
		Addrs:      []string{s.addr("tcp")},
		MinBackoff: 5 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	waitFor(t, "every message at bob", func() bool { return bob.Cursor("alice:bob") == n })
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("bob got %v, want 1..%d in order", got, n)
		}
	}
}
