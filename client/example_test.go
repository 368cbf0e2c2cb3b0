package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A reconnecting session: messages reach OnMessage in seq order per
// conversation, once each, across network failures.
func ExampleNewSession() {
	ctx := context.Background()
	creds, err := client.Login(ctx, "http://127.0.0.1:8080", "alice", "secret")
	if err != nil {
		log.Fatal(err)
	}
	s, err := client.NewSession(client.SessionOptions{
		Options: client.Options{
			Token:            creds.Token,
			DeviceID:         "alice-laptop",
			DeviceType:       "desktop",
			AutoDeliveredAck: true,
			OnMessage: func(m *pb.Message) {
				fmt.Printf("%s #%d from %s: %s\n", m.ConversationId, m.Seq, m.From, m.Payload)
			},
		},
		Addrs:   []string{"ws://127.0.0.1:8080", "ws://127.0.0.1:8081"},
		Cursors: map[string]uint64{ /* loaded from the app's storage */ },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	ack, err := s.SendText(ctx, "bob", "hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored as", ack.ConversationId, ack.Seq)
}

// One connection without reconnects, as a load generator uses it: Send is
// safe from many goroutines and pipelines on the one link.
func ExampleDial() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{
		Addr:     "tcp://127.0.0.1:9090",
		Token:    "TOKEN",
		DeviceID: "bench-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SendText(ctx, "bob", "hi"); client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		fmt.Println("bob blocks alice")
	}
}
