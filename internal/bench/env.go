package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/wire"
)

// Env is what a scenario works with in one process: its share of the
// config, the metrics, the request budget, and helpers to make users and
// connections.
type Env struct {
	Cfg Config
	M   *Metrics

	http     client.HTTPClient
	issued   atomic.Uint64 // requests taken from the budget
	start    time.Time     // when the timed phase began
	end      atomic.Int64  // unix ns the scenario says its timed work ended (0: when Run returned)
	ipNext   atomic.Uint64
	nodeNext atomic.Uint64 // the next cluster node to connect to
	notes    sync.Map      // string → struct{}
}

func newEnv(cfg Config) *Env {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = setupParallel
	return &Env{Cfg: cfg, M: newMetrics(), http: client.HTTPClient{BaseURL: cfg.HTTPBase, Client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}}
}

// setupParallel bounds concurrent token mints and connection setups.
const setupParallel = 64

// Take claims one request from the budget; false when -c requests were
// claimed or ctx (the timed phase) has ended.
func (e *Env) Take(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if e.Cfg.Count == 0 {
		return true
	}
	return e.issued.Add(1) <= uint64(e.Cfg.Count)
}

// MarkEnd records that the timed work ended now (for scenarios, like
// conns, whose Run goes on after it).
func (e *Env) MarkEnd() { e.end.Store(time.Now().UnixNano()) }

// Note adds a caveat to the report.
func (e *Env) Note(s string) { e.notes.Store(s, struct{}{}) }

// UserID names user i of a role in this run.
func (e *Env) UserID(role string, i int) string { return e.Cfg.Prefix + role + strconv.Itoa(i) }

// MintTokens returns a token per user id, minted through the admin API.
func (e *Env) MintTokens(ctx context.Context, ids []string) ([]string, error) {
	toks := make([]string, len(ids))
	err := parallel(ctx, len(ids), setupParallel, func(ctx context.Context, i int) error {
		c, err := e.http.MintToken(ctx, e.Cfg.APIKey, ids[i], 2*time.Hour)
		if err != nil {
			return fmt.Errorf("mint token for %s: %w", ids[i], err)
		}
		toks[i] = c.Token
		return nil
	})
	return toks, err
}

// ClientOptions are the SDK options of every connection of the run.
func (e *Env) ClientOptions(token, deviceID string) client.Options {
	ws, tcp := e.nodeAddrs()
	o := client.Options{
		Addr: ws, Token: token, DeviceID: deviceID, DeviceType: "bench",
		// One attempt per request: the bench counts failures instead of
		// hiding them behind retries.
		MaxSendAttempts: 1,
		LocalAddr:       e.localAddr(),
	}
	if e.Cfg.Transport == "tcp" {
		o.Addr = tcp
	}
	if e.Cfg.Codec == "json" {
		o.Codec = wire.JSON
	}
	return o
}

// nodeAddrs returns the WebSocket and TCP address of the node the next
// connection goes to: the server's, or each cluster node's in turn.
func (e *Env) nodeAddrs() (ws, tcp string) {
	if n := uint64(len(e.Cfg.WSAddrs)); n > 0 {
		i := (e.nodeNext.Add(1) - 1) % n
		return e.Cfg.WSAddrs[i], e.Cfg.TCPAddrs[i]
	}
	return e.Cfg.WSAddr, e.Cfg.TCPAddr
}

// Dial opens an authenticated SDK connection.
func (e *Env) Dial(ctx context.Context, o client.Options) (*client.Client, error) {
	c, err := client.Dial(ctx, o)
	if err == nil {
		e.M.connected.Add(1)
	}
	return c, err
}

// Close closes an SDK connection opened with Dial.
func (e *Env) Close(c *client.Client) {
	if c != nil {
		c.Close()
		e.M.connected.Add(-1)
	}
}

// localAddr returns the next source address for a connection (nil: the
// kernel's choice).
func (e *Env) localAddr() net.Addr {
	if len(e.Cfg.SourceIPs) == 0 {
		return nil
	}
	ip := e.Cfg.SourceIPs[(e.ipNext.Add(1)-1)%uint64(len(e.Cfg.SourceIPs))]
	return &net.TCPAddr{IP: net.ParseIP(ip)}
}

// parallel runs f(i) for i in [0, n) on at most limit goroutines and returns
// the first error (after which no new calls start).
func parallel(parent context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(n, limit) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = parent.Err()
	}
	return first
}
