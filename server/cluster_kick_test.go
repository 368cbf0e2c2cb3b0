package server_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// kickCase is one cell of the same-device-type kick matrix: a phone logs in
// on node first, a second phone of the same user on node second.
type kickCase struct {
	first, second int
	// how the second login follows the first: "next" right after the
	// first's AuthOk, "together" both dialled at once (their logins cross),
	// "later" once the first is older than the crossing window (the plain
	// "a newer login kicks the older").
	how string
}

func (c kickCase) name() string {
	return fmt.Sprintf("%s/node%d-then-node%d", c.how, c.first+1, c.second+1)
}

// kickPhone is one phone of a kick case and what happened to it.
type kickPhone struct {
	name string
	c    *client.Client
	o    *recorder
}

// Under kick_policy device_type exactly one phone session of a user survives
// across a cluster, whichever nodes the two logins reach, in either order and
// however close together: the older one is kicked when the order is known,
// one of the two when they cross; the survivor is the only phone session the
// cluster lists, and still receives messages. The cases share three nodes and
// run at once (a user each), so the matrix takes about as long as one case.
func TestClusterKickMatrix(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	var cases []kickCase
	for _, how := range []string{"next", "together", "later"} {
		for i := range 3 {
			for j := range 3 {
				cases = append(cases, kickCase{first: i, second: j, how: how})
			}
		}
	}

	type prepared struct {
		c          kickCase
		uid        string
		tok1, tok2 string
	}
	var all []prepared
	for n, c := range cases {
		uid := fmt.Sprintf("kick%d", n)
		all = append(all, prepared{c: c, uid: uid, tok1: nodes[0].mint(t, uid), tok2: nodes[0].mint(t, uid)})
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = make(map[string]error)
	)
	for _, p := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runKickCase(t, nodes, p.uid, p.tok1, p.tok2, p.c)
			mu.Lock()
			errs[p.c.name()] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	failed := 0
	for _, c := range cases {
		if err := errs[c.name()]; err != nil {
			failed++
			t.Errorf("%s: %v", c.name(), err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d cases failed", failed, len(cases))
	}
}

// runKickCase runs one case on its own user and returns what went wrong.
// It runs on its own goroutine, so it reports instead of failing t.
func runKickCase(t *testing.T, nodes []*testServer, uid, tok1, tok2 string, c kickCase) error {
	dial := func(node int, tok, dev string) (*kickPhone, error) {
		cl, o, err := dialRecorded(t, client.Options{Addr: nodes[node].wsURL, Token: tok, DeviceID: dev, DeviceType: "phone"})
		if err != nil {
			return nil, fmt.Errorf("dial %s on node %d: %w", dev, node+1, err)
		}
		return &kickPhone{name: fmt.Sprintf("%s (node %d, session %s)", dev, node+1, cl.AuthOk().SessionId), c: cl, o: o}, nil
	}
	var p1, p2 *kickPhone
	var err1, err2 error
	switch c.how {
	case "together":
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); p1, err1 = dial(c.first, tok1, "phone-1") }()
		go func() { defer wg.Done(); p2, err2 = dial(c.second, tok2, "phone-2") }()
		wg.Wait()
	default:
		p1, err1 = dial(c.first, tok1, "phone-1")
		if err1 == nil {
			if c.how == "later" {
				// Older than the crossing window (2 s): not a pass/fail
				// timing, the case being set up.
				time.Sleep(2500 * time.Millisecond)
			}
			p2, err2 = dial(c.second, tok2, "phone-2")
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		return err
	}

	// One of the two is kicked.
	deadline := time.Now().Add(10 * time.Second)
	var loser, winner *kickPhone
	for loser == nil {
		s1, s2 := p1.o.snapshot(), p2.o.snapshot()
		switch {
		case s1.closed && s2.closed:
			return fmt.Errorf("both phones were closed: %v / %v", s1.closeErr, s2.closeErr)
		case s1.closed:
			loser, winner = p1, p2
		case s2.closed:
			loser, winner = p2, p1
		case time.Now().After(deadline):
			return fmt.Errorf("both phones stayed connected: %s and %s", p1.name, p2.name)
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
	if s := loser.o.snapshot(); !isDisconnect(s.closeErr, pb.DisconnectCode_DISCONNECT_CODE_KICKED) {
		return fmt.Errorf("%s closed with %v, want KICKED", loser.name, s.closeErr)
	}
	if c.how != "together" && loser != p1 {
		return fmt.Errorf("the newer login %s was kicked, the older %s stayed", p2.name, p1.name)
	}

	// The cluster lists the survivor as the user's only phone session.
	want := winner.c.AuthOk().SessionId
	asker := adminClient(nodes[(c.second+1)%3])
	var listed []client.SessionInfo
	for {
		list, err := asker.Sessions(context.Background(), uid)
		if err == nil && len(list) == 1 && list[0].SessionID == want {
			break
		}
		listed = list
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster lists %+v (err %v), want only %s", listed, err, winner.name)
		}
		if winner.o.snapshot().closed {
			return fmt.Errorf("%s was kicked too, after %s", winner.name, loser.name)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The survivor still receives messages, sent through another node.
	payload := "to the survivor " + uid
	if _, err := asker.Send(context.Background(), client.Message{From: uid + "-friend", To: uid, ClientMsgID: "m1",
		ContentType: "text/plain", Payload: []byte(payload)}); err != nil {
		return fmt.Errorf("send to %s: %w", uid, err)
	}
	for {
		got := false
		for _, m := range winner.o.snapshot().msgs {
			got = got || string(m.Payload) == payload
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never received the message sent after the kick", winner.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := winner.o.snapshot(); s.closed {
		return fmt.Errorf("%s was closed too: %v", winner.name, s.closeErr)
	}
	return nil
}
