package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

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

// Sign up, or log in when the name is taken: the HTTP API's refusals test
// with the same codes as a socket's.
func ExampleRegister() {
	ctx := context.Background()
	base := "http://127.0.0.1:8080"
	creds, err := client.Register(ctx, base, "alice", "alice-secret")
	if client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		creds, err = client.Login(ctx, base, "alice", "alice-secret")
	}
	if client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
		log.Fatal("the name is taken, and this is not its password")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token for", creds.UserID, "until", creds.ExpiresAt)
}

// Sends that cannot succeed as they are fail at once with a code that says
// why, and are never resent: the app tells its user.
func ExampleIsCode() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{Addr: "ws://127.0.0.1:8080", Token: "TOKEN", DeviceID: "d1"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.SendText(ctx, "bbo", "hello")
	switch {
	case client.IsCode(err, pb.ErrorCode_ERROR_CODE_NO_SUCH_USER):
		fmt.Println("no user bbo: check the name")
	case client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE):
		fmt.Println("too long for this server: split it or send a file")
	case client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED):
		fmt.Println("not allowed")
	case err != nil && client.IsTemporary(err):
		fmt.Println("try again later with the same message")
	}
}

// An app's backend makes users and tokens and pushes to their devices with
// the admin API key (never shipped to clients).
func ExampleAdmin() {
	ctx := context.Background()
	admin := client.NewAdmin("http://127.0.0.1:8080", "ADMIN-API-KEY")
	if _, err := admin.CreateUser(ctx, "bob", ""); err != nil && !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		log.Fatal(err)
	}
	creds, err := admin.MintToken(ctx, "bob", time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("give this to bob's app:", creds.Token)
	n, err := admin.Push(ctx, client.PushTarget{UserIDs: []string{"bob"}}, 1, []byte(`{"type":"refresh"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pushed to", n, "sessions")
}
