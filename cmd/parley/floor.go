package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyim/parley/internal/bench"
)

// floorHelp describes `parley bench floor` (also in `parley bench -h`).
const floorHelp = `floor: not a load but a relay to measure the server against, on Parley's own gateway (the
same sockets, per-connection queues and coalesced writes, the same frame encoding) with only maps in
memory behind it: tokens minted without signing, a seq per conversation, each message ACKed and
pushed to every online session of its conversation but the sender's; no storage, de-dup, rate
limits, cursors or group events. Runs until interrupted; point user, group, send-rate, fanout,
login or conns at it with -a/--tcp and --api-key (docs/benchmarks.md, "Floor").`

// benchFloor is `parley bench floor`: it serves until interrupted.
func benchFloor(args []string) error {
	fs := flag.NewFlagSet("bench floor", flag.ContinueOnError)
	httpAddr := fs.String("http", "127.0.0.1:8080", "token minting (POST /v1/admin/tokens) and WebSocket (/ws) address")
	tcpAddr := fs.String("tcp", "127.0.0.1:7070", "raw TCP address")
	apiKey := fs.String("api-key", "floor", "the key token minting asks for (parley bench ... --api-key)")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: parley bench floor [flags]\n\n%s\n\nflags:\n", floorHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench floor: unexpected arguments %q", fs.Args())
	}
	if *apiKey == "" {
		return errors.New("bench floor: --api-key must not be empty")
	}
	f, err := bench.StartFloor(*httpAddr, *tcpAddr, *apiKey)
	if err != nil {
		return fmt.Errorf("bench floor: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "bench floor: http://%s (WebSocket /ws), tcp://%s; run e.g.\n  parley bench user -a %s --tcp %s --api-key %s --transport tcp\n",
		f.HTTPAddr(), f.TCPAddr(), f.HTTPAddr(), f.TCPAddr(), *apiKey)
	<-ctx.Done()
	return f.Close()
}
