package bench

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/notify/fcm"
	"github.com/parleyim/parley/internal/notify/provider"
)

// PushFloor is push-offline's floor: the same notifications a run would
// make (-c messages, one to each of the -m-1 offline members of their
// group), sent from this process straight to the stand-in through the FCM
// client a Parley server uses, Workers in flight as a server's push_workers.
// Nothing is stored, decided or coalesced: it is the rate the platform
// requests alone reach on this machine (Go's HTTP/2 client and TLS on one
// side, the stand-in's HTTP/2 server and checks on the other), the ceiling
// a server's push-offline figure is measured against.
type PushFloor struct {
	Provider      *PushProvider
	Notifications int
	Workers       int
}

// PushFloorReport is what a floor run measured.
type PushFloorReport struct {
	Notifications uint64  `json:"notifications"` // accepted by the stand-in
	Failed        uint64  `json:"failed"`        // answered other than 200
	Seconds       float64 `json:"seconds"`
	PerSec        float64 `json:"notifications_per_sec"`
	// CPUPercent is this process's CPU (sender and stand-in together) over
	// the run; 100 is one core.
	CPUPercent float64  `json:"cpu_percent"`
	Violations []string `json:"violations,omitempty"`
}

// Run sends the notifications and waits for their answers.
func (f PushFloor) Run(ctx context.Context) (*PushFloorReport, error) {
	p := f.Provider
	if f.Notifications <= 0 || f.Workers <= 0 {
		return nil, errors.New("push floor: notifications and workers must be positive")
	}
	ca, err := os.ReadFile(p.CAFile())
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("push floor: no certificate in %s", p.CAFile())
	}
	creds, err := os.ReadFile(p.CredentialsFile())
	if err != nil {
		return nil, err
	}
	c, err := fcm.New(fcm.Config{CredentialsJSON: creds, Endpoint: p.Endpoint(), RootCAs: roots})
	if err != nil {
		return nil, err
	}
	// One request first: the access token is fetched once, as a server's
	// first notification does, outside the timed part.
	warm := floorNotification(0)
	if r := c.Send(ctx, provider.Target{Kind: provider.FCM, Token: "bench-floor-warm"}, &warm); !r.OK() {
		return nil, fmt.Errorf("push floor: the stand-in refused the first request: %d %s %v", r.Status, r.Reason, r.Err)
	}
	var next, failed atomic.Int64
	accepted := p.FCM.Count()
	cpu0, _, err := procUsage(os.Getpid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range f.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(f.Notifications) {
					return
				}
				n := floorNotification(i)
				t := provider.Target{Kind: provider.FCM, Token: "bench-floor-" + strconv.FormatInt(i, 10)}
				if r := c.Send(ctx, t, &n); !r.OK() {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu1, _, err := procUsage(os.Getpid())
	if err != nil {
		return nil, err
	}
	r := &PushFloorReport{Notifications: uint64(p.FCM.Count() - accepted), Failed: uint64(failed.Load()),
		Seconds: took.Seconds(), CPUPercent: 100 * (cpu1 - cpu0).Seconds() / took.Seconds(),
		Violations: p.FCM.Violations()}
	r.PerSec = float64(r.Notifications) / r.Seconds
	return r, ctx.Err()
}

// floorNotification is what a server sends for one push-offline message
// (a sender's name, a text preview, the badge, the conversation).
func floorNotification(i int64) provider.Notification {
	conv := "g:bench-floor-" + strconv.FormatInt(i%40, 10)
	return provider.Notification{Title: "bench-g0-m0", Body: "push bench 0/" + strconv.FormatInt(i, 10), Badge: 1,
		ConversationID: conv, Seq: uint64(i), Count: 1, CollapseID: "bench-floor-" + strconv.FormatInt(i%40, 10),
		ThreadID: conv, TTL: 24 * time.Hour}
}

// Print writes the report as text.
func (r *PushFloorReport) Print(w io.Writer) {
	fmt.Fprintf(w, "Push floor (FCM client → stand-in, no server):\n")
	fmt.Fprintf(w, "  Notifications/sec:\t%.1f\n", r.PerSec)
	fmt.Fprintf(w, "  Notifications:\t%d accepted in %.3f secs, %d failed\n", r.Notifications, r.Seconds, r.Failed)
	fmt.Fprintf(w, "  CPU (this process: sender and stand-in):\t%.1f%% (100%% = one core)\n", r.CPUPercent)
	fmt.Fprintf(w, "  Requests not as FCM documents them:\t%d\n", len(r.Violations))
}
