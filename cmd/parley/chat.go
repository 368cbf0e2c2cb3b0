package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// chatCmd is a line-based chat client: every line typed is sent to --to, and
// every message received (including those missed while offline) is printed.
func chatCmd(args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	httpAddr := fs.String("a", "127.0.0.1:8080", "server HTTP address (accounts; WebSocket at /ws)")
	tcpAddr := fs.String("tcp", "127.0.0.1:7070", "server TCP address (with --transport tcp)")
	transport := fs.String("transport", "ws", "ws (JSON frames), ws-proto, or tcp")
	user := fs.String("user", "", "username")
	password := fs.String("password", "", "password (or PARLEY_PASSWORD)")
	register := fs.Bool("register", false, "register the user first")
	to := fs.String("to", "", "the user to talk to")
	device := fs.String("device", "", "device id (default: the transport name)")
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

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
	opts := client.Options{Token: creds.Token, DeviceType: "cli-" + *transport}
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
	opts.DeviceID = *device
	if opts.DeviceID == "" {
		opts.DeviceID = "cli-" + *transport
	}
	opts.AutoDeliveredAck = true
	opts.OnMessage = func(m *pb.Message) {
		who := m.From
		if who == creds.UserID {
			who = "me"
		}
		fmt.Printf("[%s #%d] %s: %s\n", time.UnixMilli(m.ServerTime).Format("15:04:05"), m.Seq, who, m.Payload)
	}
	opts.OnReceipt = func(r *pb.Receipt) {
		if r.UserId != creds.UserID && r.ReadSeq == 0 {
			fmt.Printf("  (%s received up to #%d)\n", r.UserId, r.DeliveredSeq)
		}
	}
	sess, err := client.NewSession(client.SessionOptions{
		Options:      opts,
		OnConnect:    func(a *pb.AuthOk) { fmt.Printf("connected as %s (%s)\n", a.UserId, *transport) },
		OnDisconnect: func(err error) { fmt.Printf("disconnected: %v; reconnecting\n", err) },
	})
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := sess.WaitReady(ctx); err != nil {
		return err
	}
	fmt.Printf("type a line and press enter to send it to %s; Ctrl-D or Ctrl-C to quit\n", *to)

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return sess.Err()
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			ack, err := sess.Send(ctx, &pb.Send{To: *to, ContentType: "text", Payload: []byte(line)})
			if err != nil {
				fmt.Printf("  (not sent: %v)\n", err)
				continue
			}
			fmt.Printf("  (stored as #%d)\n", ack.Seq)
		}
	}
}
