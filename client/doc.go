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
//
// # Errors
//
// A request the server refuses fails with an [*Error] over a socket and an
// [*HTTPError] over the HTTP API; both carry the protocol's codes (the table
// in package errcode and docs/protocol.md, section 4), so one test holds
// either way: [IsCode](err, pb.ErrorCode_ERROR_CODE_CONFLICT) after a
// Register, [IsCode](err, pb.ErrorCode_ERROR_CODE_NO_SUCH_USER) after a send
// to a user id without an account. [IsTemporary] says whether the same
// request may get through later (a send retried with the same client message
// id). A request larger than the server's frame limit (AuthOk.max_frame_bytes)
// fails at once with ERROR_CODE_TOO_LARGE before it reaches the socket, and the
// connection goes on; a [Session] does not queue or resend it. Other errors
// are not refusals: [ErrClosed] (the link went before the reply),
// [ErrTimeout], a [*DisconnectError] (the server said why it closed), or the
// caller's context.
package client
