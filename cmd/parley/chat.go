package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/chat"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// chatCmd is a line-based chat client: every line typed is sent to --to, and
// every message received (including those missed while offline) is printed.
func chatCmd(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runChat(ctx, args, os.Stdin, os.Stdout)
}

// runChat is chatCmd reading lines from in and printing to out.
func runChat(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	httpAddr := fs.String("a", "127.0.0.1:8080", "server HTTP address (accounts; WebSocket at /ws)")
	tcpAddr := fs.String("tcp", "127.0.0.1:7070", "server TCP address (with --transport tcp)")
	transport := fs.String("transport", "ws", "ws (JSON frames), ws-proto, or tcp")
	user := fs.String("user", "", "username")
	password := fs.String("password", "", "password (or PARLEY_PASSWORD)")
	register := fs.Bool("register", false, "register the user first")
	to := fs.String("to", "", "the user to talk to")
	device := fs.String("device", "", "device name (default cli-TRANSPORT); a second chat of the same user with the same device replaces the first")
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, "usage: parley chat --user NAME --password PW --to PEER [--register] [--transport ws|ws-proto|tcp]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *password == "" {
		*password = os.Getenv("PARLEY_PASSWORD")
	}
	if *user == "" || *password == "" || *to == "" {
		fs.Usage()
		return errors.New("chat: --user, --password and --to are required")
	}
	base := "http://" + *httpAddr
	var creds *client.Credentials
	var err error
	if *register {
		creds, err = client.Register(ctx, base, *user, *password)
	} else {
		creds, err = client.Login(ctx, base, *user, *password)
	}
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	opts := client.Options{Token: creds.Token}
	switch *transport {
	case "ws":
		opts.Addr, opts.Codec = "ws://"+*httpAddr+"/ws", wire.JSON
	case "ws-proto":
		opts.Addr = "ws://" + *httpAddr + "/ws"
	case "tcp":
		opts.Addr = "tcp://" + *tcpAddr
	default:
		return fmt.Errorf("chat: unknown transport %q", *transport)
	}
	// The device is also the device type: the server keeps one session
	// per user and device type, so chats with different --device names
	// run side by side and the same name replaces the older one.
	opts.DeviceID = *device
	if opts.DeviceID == "" {
		opts.DeviceID = "cli-" + *transport
	}
	opts.DeviceType = opts.DeviceID
	opts.AutoDeliveredAck = true
	var mu sync.Mutex // out is written from the session's goroutines and this one
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, a...)
		mu.Unlock()
	}
	peer := chat.DirectID(creds.UserID, *to) // messages of other conversations say which
	opts.OnMessage = func(m *pb.Message) {
		who := m.From
		if who == creds.UserID {
			who = "me"
		}
		where := ""
		if m.ConversationId != peer {
			where = " in " + m.ConversationId
		}
		say("[%s #%d%s] %s: %s\n", time.UnixMilli(m.ServerTime).Format("15:04:05"), m.Seq, where, who, m.Payload)
	}
	opts.OnReceipt = func(r *pb.Receipt) {
		if r.UserId != creds.UserID && r.ReadSeq == 0 {
			say("  (%s received up to #%d)\n", r.UserId, r.DeliveredSeq)
		}
	}
	sess, err := client.NewSession(client.SessionOptions{
		Options: opts,
		// Each start prints only what this user's devices have not
		// received yet (the server's delivered cursor), not whole histories.
		ResumeFromServer: true,
		OnConnect:        func(a *pb.AuthOk) { say("connected as %s (%s, device %s)\n", a.UserId, *transport, opts.DeviceID) },
		OnDisconnect: func(err error) {
			var d *client.DisconnectError
			if errors.As(err, &d) && d.Code == pb.DisconnectCode_DISCONNECT_CODE_KICKED {
				say("another chat of %s signed in as device %s and replaced this one (give each its own --device)\n", *user, opts.DeviceID)
				return
			}
			say("disconnected: %v; reconnecting\n", err)
		},
	})
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := sess.WaitReady(ctx); err != nil {
		return err
	}
	say("type a line and press enter to send it to %s; Ctrl-D or Ctrl-C to quit\n", *to)

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			if errors.Is(sess.Err(), client.ErrClosed) {
				return nil
			}
			return sess.Err()
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			ack, err := sess.Send(ctx, &pb.Send{To: *to, ContentType: "text", Payload: []byte(line)})
			var perr *client.Error
			if errors.As(err, &perr) && perr.Code == pb.ErrorCode_ERROR_CODE_NO_SUCH_USER {
				// Every further line would be refused the same way.
				say("  (not sent: no such user %q here; check --to)\n", *to)
				return fmt.Errorf("chat: no such user %q", *to)
			}
			if err != nil {
				say("  (not sent: %v)\n", err)
				continue
			}
			say("  (stored as #%d)\n", ack.Seq)
		}
	}
}
