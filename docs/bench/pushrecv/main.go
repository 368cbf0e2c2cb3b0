// pushrecv is the receiving end of the ab push benchmark (run-push.sh): it
// connects as one user with the Go SDK, counts the pushes it gets, and
// exits printing the count once it has -n of them or after -wait.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func main() {
	addr := flag.String("addr", "tcp://127.0.0.1:17070", "server address")
	httpBase := flag.String("http", "http://127.0.0.1:18080", "server HTTP base, to mint the token")
	key := flag.String("key", "", "admin API key")
	user := flag.String("user", "u123", "user id to receive as")
	n := flag.Int64("n", 20000, "pushes to wait for")
	wait := flag.Duration("wait", 120*time.Second, "give up after this long")
	ready := flag.String("ready", "", "file to create once connected")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	cred, err := client.MintToken(ctx, *httpBase, *key, *user, time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mint:", err)
		os.Exit(1)
	}
	var got atomic.Int64
	done := make(chan struct{})
	c, err := client.Dial(ctx, client.Options{Addr: *addr, Token: cred.Token, DeviceID: "pushrecv", DeviceType: "bench",
		OnPush: func(p *pb.Push) {
			if got.Add(1) == *n {
				close(done)
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer c.Close()
	if *ready != "" {
		os.WriteFile(*ready, nil, 0o600)
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-c.Done():
		fmt.Fprintln(os.Stderr, "connection ended:", c.Err())
	}
	fmt.Printf("pushes received: %d of %d\n", got.Load(), *n)
	if got.Load() != *n {
		os.Exit(1)
	}
}
