package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// Every pairing of transports and codecs chats both ways, with the two-step ACK.
func TestTwoUsersChatAcrossTransports(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	for _, ta := range transports {
		for _, tb := range transports {
			t.Run(ta.name+"_to_"+tb.name, func(t *testing.T) {
				ua, ub := "a-"+ta.name+"-"+tb.name, "b-"+ta.name+"-"+tb.name
				alice, recA := ts.connect(t, ua, "a1", "phone", ta)
				bob, recB := ts.connect(t, ub, "b1", "phone", tb)
				ctx := ctx10(t)
				ack, err := alice.SendText(ctx, ub, "hello bob")
				if err != nil {
					t.Fatal(err)
				}
				if ack.Seq != 1 || ack.ConversationId == "" || ack.MessageId == 0 || ack.ServerTime == 0 {
					t.Fatalf("ack = %v", ack)
				}
				eventually(t, "bob receives", func() bool { return recB.count() == 1 })
				m := recB.messages()[0]
				if string(m.Payload) != "hello bob" || m.From != ua || m.To != ub || m.Seq != 1 || m.MessageId != ack.MessageId {
					t.Fatalf("bob got %v", m)
				}
				if err := bob.MarkDelivered(ctx, m.ConversationId, m.Seq); err != nil {
					t.Fatal(err)
				}
				eventually(t, "alice gets the delivery receipt", func() bool {
					rs := recA.snapshot().receipts
					return len(rs) == 1 && rs[0].UserId == ub && rs[0].DeliveredSeq == 1
				})
				back, err := bob.SendText(ctx, ua, "hi alice")
				if err != nil || back.Seq != 2 || back.ConversationId != ack.ConversationId {
					t.Fatalf("reply ack %v, %v", back, err)
				}
				eventually(t, "alice receives the reply", func() bool { return recA.count() == 1 })
				if recA.count() != 1 || recB.count() != 1 {
					t.Fatal("a sender must not be pushed its own message on the sending device")
				}
			})
		}
	}
}

func TestFanOutToEveryDevice(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	a1, recA1 := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, recA2 := ts.connect(t, "alice", "a2", "desktop", transports[2])
	var bobs []*recorder
	for i, tc := range transports {
		_, r := ts.connect(t, "bob", fmt.Sprintf("b%d", i), fmt.Sprintf("type%d", i), tc)
		bobs = append(bobs, r)
	}
	const n = 50
	ctx := ctx10(t)
	for i := 0; i < n; i++ {
		if _, err := a1.SendText(ctx, "bob", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range append(bobs, recA2) {
		eventually(t, fmt.Sprintf("device %d gets all", i), func() bool { return r.count() == n })
		for j, m := range r.messages() {
			if m.Seq != uint64(j+1) || string(m.Payload) != fmt.Sprint(j) {
				t.Fatalf("device %d message %d = seq %d %q", i, j, m.Seq, m.Payload)
			}
		}
	}
	if recA1.count() != 0 {
		t.Fatalf("the sending device was pushed %d of its own messages", recA1.count())
	}
}

func TestSecondLoginOfSameDeviceTypeKicksTheFirst(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	_, old := ts.connect(t, "bob", "phone-1", "phone", transports[1])
	_, other := ts.connect(t, "bob", "laptop-1", "desktop", transports[2])
	newer, recNew := ts.connect(t, "bob", "phone-2", "phone", transports[0])
	eventually(t, "old phone is kicked", func() bool { closed, _ := old.isClosed(); return closed })
	if _, err := old.isClosed(); !isDisconnect(err, pb.DisconnectCode_DISCONNECT_CODE_KICKED) {
		t.Fatalf("old session ended with %v, want a KICKED disconnect", err)
	}
	// The desktop and the new phone still receive.
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	if _, err := alice.SendText(ctx10(t), "bob", "still there?"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new phone receives", func() bool { return recNew.count() == 1 })
	eventually(t, "desktop receives", func() bool { return other.count() == 1 })
	if _, err := newer.Ping(ctx10(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRetryWithSameClientMsgIDIsStoredOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			alice, _ := ts.connect(t, "alice-"+tc.name, "a1", "phone", tc)
			_, recB := ts.connect(t, "bob-"+tc.name, "b1", "phone", tc)
			ctx := ctx10(t)
			send := &pb.Send{ClientMsgId: "same-id", To: "bob-" + tc.name, ContentType: "text", Payload: []byte("once")}
			first, err := alice.Send(ctx, send)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				again, err := alice.Send(ctx, &pb.Send{ClientMsgId: "same-id", To: "bob-" + tc.name, ContentType: "text", Payload: []byte("once")})
				if err != nil {
					t.Fatal(err)
				}
				if !again.Duplicate || again.Seq != first.Seq || again.MessageId != first.MessageId || again.ServerTime != first.ServerTime {
					t.Fatalf("retry ack %v, first %v", again, first)
				}
			}
			page, err := alice.History(ctx, first.ConversationId, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Messages) != 1 || page.LastSeq != 1 {
				t.Fatalf("history has %d messages (last seq %d), want 1", len(page.Messages), page.LastSeq)
			}
			eventually(t, "one delivery", func() bool { return recB.count() == 1 })
			time.Sleep(50 * time.Millisecond) // a duplicate delivery would be right behind
			if recB.count() != 1 {
				t.Fatalf("bob received %d copies", recB.count())
			}
		})
	}
}

// Both members send at once; every receiver sees one gap-free total order.
func TestOrderingUnderConcurrentSenders(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[2])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[0])
	_, recA2 := ts.connect(t, "alice", "a2", "web", transports[1])
	const each = 300
	var wg sync.WaitGroup
	acks := make([][]*pb.SendAck, 2)
	for i, c := range []*client.Client{alice, bob} {
		to := map[int]string{0: "bob", 1: "alice"}[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Several goroutines per sender, so sends are in flight together.
			var mu sync.Mutex
			var inner sync.WaitGroup
			for g := 0; g < 4; g++ {
				inner.Add(1)
				go func() {
					defer inner.Done()
					for k := 0; k < each/4; k++ {
						ack, err := c.SendText(context.Background(), to, fmt.Sprintf("%d-%d-%d", i, g, k))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						acks[i] = append(acks[i], ack)
						mu.Unlock()
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, list := range acks {
		for _, a := range list {
			if seen[a.Seq] {
				t.Fatalf("seq %d assigned twice", a.Seq)
			}
			seen[a.Seq] = true
		}
	}
	for s := uint64(1); s <= 2*each; s++ {
		if !seen[s] {
			t.Fatalf("seq %d missing: sequence has a gap", s)
		}
	}
	// alice's first device receives bob's messages, bob receives alice's,
	// alice's second device receives all: each in increasing seq order.
	for name, want := range map[*recorder]int{recA: each, recB: each, recA2: 2 * each} {
		eventually(t, "all deliveries", func() bool { return name.count() == want })
		var last uint64
		for _, m := range name.messages() {
			if m.Seq <= last {
				t.Fatalf("out of order: seq %d after %d", m.Seq, last)
			}
			last = m.Seq
		}
	}
}

// A user who was offline gets everything on return: the conversation list
// with the last message and unread count, then every message once, in order.
func TestOfflineUserSyncsEverything(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	ctx := ctx10(t)
	const n = 250
	for i := 0; i < n; i++ {
		if _, err := alice.SendText(ctx, "bob", fmt.Sprint("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := carol.SendText(ctx, "bob", "from carol"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			bob, rec := ts.connect(t, "bob", "b-"+tc.name, tc.name, tc)
			convs, err := bob.AllConversations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(convs) != 2 {
				t.Fatalf("bob has %d conversations, want 2", len(convs))
			}
			if convs[0].Peer != "carol" || string(convs[0].LastMessage.GetPayload()) != "from carol" || convs[0].UnreadCount != 1 {
				t.Fatalf("newest conversation = %v", convs[0])
			}
			if convs[1].Peer != "alice" || convs[1].LastSeq != n || convs[1].UnreadCount != n {
				t.Fatalf("alice conversation = %v", convs[1])
			}
			var got []*pb.Message
			after := uint64(0)
			for {
				page, err := bob.SyncMessages(ctx, convs[1].ConversationId, after, 100)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page.Messages...)
				if !page.HasMore {
					break
				}
				after = page.Messages[len(page.Messages)-1].Seq
			}
			if len(got) != n {
				t.Fatalf("synced %d messages, want %d", len(got), n)
			}
			for i, m := range got {
				if m.Seq != uint64(i+1) || string(m.Payload) != fmt.Sprint("a", i) {
					t.Fatalf("message %d = seq %d %q", i, m.Seq, m.Payload)
				}
			}
			if rec.count() != 0 {
				t.Fatalf("stored messages were pushed again on connect (%d)", rec.count())
			}
			// History pages backwards from any device.
			h, err := bob.History(ctx, convs[1].ConversationId, 101, 20)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Messages) != 20 || h.Messages[0].Seq != 81 || h.Messages[19].Seq != 100 || !h.HasMore {
				t.Fatalf("history page: %d messages from %d, more=%v", len(h.Messages), h.Messages[0].Seq, h.HasMore)
			}
		})
	}
	// Reading moves the unread count for every device of bob.
	bob, _ := ts.connect(t, "bob", "b-read", "reader", transports[0])
	conv := "p:alice:bob"
	if err := bob.MarkRead(ctx, conv, 200); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unread count drops to 50", func() bool {
		convs, err := bob.AllConversations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range convs {
			if c.ConversationId == conv {
				return c.UnreadCount == 50 && c.ReadSeq == 200
			}
		}
		return false
	})
}

// The SDK's Session reconnects after the server goes away and comes back on
// the same data, resends what was not ACKed and catches up, in order, once.
func TestSessionResumesAcrossRestart(t *testing.T) {
	// Not parallel: the restarted server takes the first one's TCP port again.
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	bobTok := ts.mint(t, "bob")
	aliceTok := ts.mint(t, "alice")
	var mu sync.Mutex
	var got []*pb.Message
	sess, err := client.NewSession(client.SessionOptions{
		Options: client.Options{Token: bobTok, DeviceID: "b1", DeviceType: "phone",
			OnMessage: func(m *pb.Message) { mu.Lock(); got = append(got, m); mu.Unlock() }},
		Addrs:      []string{"tcp://" + ts.tcpAddr},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.WaitReady(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	alice, _ := ts.connectToken(t, aliceTok, "a1", "phone", transports[2])
	for i := 0; i < 10; i++ {
		if _, err := alice.SendText(ctx10(t), "bob", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "first 10", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 10 })

	tcpAddr := ts.tcpAddr
	shutdown(t, ts)
	// While the server is down and back up on the same address, alice sends more.
	ts2 := startServer(t, func(c *server.Config) { c.DataDir = dir; c.TCPAddr = tcpAddr })
	alice2, _ := ts2.connectToken(t, aliceTok, "a1", "phone", transports[2])
	for i := 10; i < 30; i++ {
		if _, err := alice2.SendText(ctx10(t), "bob", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "all 30 after reconnect", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 30 })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 30 {
		t.Fatalf("got %d messages, want exactly 30", len(got))
	}
	for i, m := range got {
		if m.Seq != uint64(i+1) || string(m.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d: seq %d %q", i, m.Seq, m.Payload)
		}
	}
}

func shutdown(t *testing.T, ts *testServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
