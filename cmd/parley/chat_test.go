package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/server"
)

// syncBuffer is the chat's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// chatProc is one running `parley chat`.
type chatProc struct {
	in   *io.PipeWriter
	out  *syncBuffer
	done chan error
}

func startChat(t *testing.T, ctx context.Context, args ...string) *chatProc {
	t.Helper()
	r, w := io.Pipe()
	p := &chatProc{in: w, out: &syncBuffer{}, done: make(chan error, 1)}
	go func() { p.done <- runChat(ctx, args, r, p.out) }()
	p.waitFor(t, "type a line")
	return p
}

func (p *chatProc) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *chatProc) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %q; the chat printed:\n%s", text, p.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *chatProc) quit(t *testing.T) {
	t.Helper()
	p.in.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("chat ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chat did not end on end of input")
	}
}

// `parley chat` as the README runs it: a restart prints only what is new,
// messages of other conversations say which, two chats of one user with
// different --device names run side by side, and one that is replaced by
// the same device says so and ends.
func TestChatCommand(t *testing.T) {
	srv, err := server.New(server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := []string{"-a", srv.HTTPAddr(), "--password", "password-123"}
	args := func(extra ...string) []string { return append(append([]string{}, a...), extra...) }

	bob := startChat(t, ctx, args("--user", "bob", "--register", "--to", "alice")...)
	alice := startChat(t, ctx, args("--user", "alice", "--register", "--to", "bob")...)
	alice.say(t, "first message")
	bob.waitFor(t, "alice: first message")
	// Bob's device acknowledges what it printed; the server stores that
	// cursor a moment later. (A person restarting takes longer than that.)
	waitDelivered(t, ctx, "http://"+srv.HTTPAddr(), "ws://"+srv.HTTPAddr()+"/ws", "bob", 1)
	bob.quit(t)

	alice.say(t, "while bob was away")
	bob = startChat(t, ctx, args("--user", "bob", "--to", "alice")...)
	bob.waitFor(t, "alice: while bob was away")
	if strings.Contains(bob.out.String(), "first message") {
		t.Fatalf("the restarted chat printed what it had already shown:\n%s", bob.out.String())
	}

	// Another conversation's message says where it is from.
	if _, err := client.Register(ctx, "http://"+srv.HTTPAddr(), "carol", "password-123"); err != nil {
		t.Fatal(err)
	}
	carol := startChat(t, ctx, args("--user", "carol", "--to", "bob")...)
	carol.say(t, "hi from carol")
	bob.waitFor(t, "in p:bob:carol] carol: hi from carol")

	// A second device of bob's runs beside the first.
	laptop := startChat(t, ctx, args("--user", "bob", "--to", "alice", "--device", "laptop")...)
	alice.say(t, "to both of bob's")
	bob.waitFor(t, "to both of bob's")
	laptop.waitFor(t, "to both of bob's")

	// The same device again replaces the older one, which says why and ends.
	again := startChat(t, ctx, args("--user", "bob", "--to", "alice", "--device", "laptop")...)
	laptop.waitFor(t, "replaced this one")
	select {
	case <-laptop.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the replaced chat did not end:\n%s", laptop.out.String())
	}
	// A chat with a user who has no account says so at the first line and ends.
	nobody := startChat(t, ctx, args("--user", "carol", "--to", "nosuchuser", "--device", "typo")...)
	nobody.say(t, "anyone there?")
	nobody.waitFor(t, `no such user "nosuchuser"`)
	select {
	case err := <-nobody.done:
		if err == nil || !strings.Contains(err.Error(), "no such user") {
			t.Fatalf("the chat with nobody ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the chat with nobody did not end:\n%s", nobody.out.String())
	}
	for _, p := range []*chatProc{again, bob, alice, carol} {
		p.quit(t)
	}
}

// waitDelivered waits until uid's delivered cursor in their conversation
// list reaches seq, read through a device of its own.
func waitDelivered(t *testing.T, ctx context.Context, base, ws, uid string, seq uint64) {
	t.Helper()
	creds, err := client.Login(ctx, base, uid, "password-123")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{Addr: ws, Token: creds.Token, DeviceID: "probe", DeviceType: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		convs, err := c.AllConversations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(convs) > 0 && convs[0].DeliveredSeq >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's delivered cursor did not reach %d: %v", uid, seq, convs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
