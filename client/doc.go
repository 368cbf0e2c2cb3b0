// Package client is the Go SDK for Parley: a connection-level [Client] that
// multiplexes requests over one WebSocket or TCP link, a reconnecting
// [Session] that resends unacknowledged messages and catches up on what was
// missed (in seq order, without duplicates), and helpers for the HTTP account
// and admin API ([Register], [Login], [MintToken], ...).
//
// A Client is cheap enough for a load generator: it runs two goroutines per
// connection (a reader and a writer), reuses its encode buffers and writes
// every frame queued while the previous write was in progress with one
// syscall.
//
//	c, err := client.Dial(ctx, client.Options{
//		Addr:      "ws://127.0.0.1:8080",
//		Token:     creds.Token,
//		DeviceID:  "laptop-1",
//		OnMessage: func(m *pb.Message) { ... },
//	})
//	ack, err := c.SendText(ctx, "bob", "hello")
//
// Apps that must not lose messages across network failures use [NewSession]
// instead, which wraps a Client with reconnects, resends and sync.
package client
