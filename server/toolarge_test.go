package server_test

import (
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// A send larger than the server's frame limit fails at once in the SDK
// with TOO_LARGE, before it reaches the socket: the server would close the
// connection for it, and a resend would close the next one. The
// connection (and a reconnecting Session) goes on working.
func TestOversizedSendFailsInTheSDK(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.MaxFrameBytes = 16 << 10 })
	ctx := ctx10(t)
	big := make([]byte, 20<<10)
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			c, rec := ts.connect(t, "alice", "a-"+tc.name, tc.name, tc)
			start := time.Now()
			_, err := c.Send(ctx, &pb.Send{To: "bob", ContentType: "bin", Payload: big})
			if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE) {
				t.Fatalf("an oversized send: %v, want TOO_LARGE", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("the refusal took %v", d)
			}
			if _, err := c.SendText(ctx, "bob", "small"); err != nil {
				t.Fatalf("the next send: %v", err)
			}
			if closed, _ := rec.isClosed(); closed {
				t.Fatal("the connection was closed")
			}
		})
	}
	s, err := client.NewSession(client.SessionOptions{
		Options: client.Options{Token: ts.mint(t, "carol"), DeviceID: "c1", DeviceType: "phone"},
		Addrs:   []string{"tcp://" + ts.tcpAddr},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Send(ctx, &pb.Send{To: "bob", ContentType: "bin", Payload: big}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE) {
		t.Fatalf("a Session's oversized send: %v, want TOO_LARGE", err)
	}
	if _, err := s.SendText(ctx, "bob", "after"); err != nil {
		t.Fatalf("the Session after it: %v", err)
	}
}
