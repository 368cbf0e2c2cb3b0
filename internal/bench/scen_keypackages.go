package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
)

// keyPackagesScenario measures MLS KeyPackage claims (docs/e2ee.md): -t
// claimers each claim one package of an owner's device at a time, cycling
// over the owners, -c claims in all (or for --duration). Each owner is a
// user with one device holding 200 one-time packages and a last resort,
// published in Setup; there are enough owners for every claim to get a
// one-time package when -c is set. Verified: no one-time package is handed
// out twice, and every claim gets a package.
type keyPackagesScenario struct {
	owners   []string
	claimers []*client.Client
	mu       sync.Mutex
	seen     map[string]int
	oneTime  atomic.Uint64
	last     atomic.Uint64
	empty    atomic.Uint64
}

// keyPackagesPerOwner is what a device may hold (e2ee.MaxKeyPackagesPerDevice).
const keyPackagesPerOwner = 200

// benchKeyPackage is a KeyPackage as the server checks it (an MLSMessage
// with wire format mls_key_package), made unique by id.
func benchKeyPackage(id string) []byte {
	b := []byte{0, 1, 0, 5, 0, 1, 0, 1} // mls10, key package, mls10, suite 1
	init := []byte("init-key-" + id)
	b = append(b, byte(len(init)))
	b = append(b, init...)
	rest := make([]byte, 200) // about a classic suite's leaf node and signature
	binary.BigEndian.PutUint64(rest, uint64(len(id)))
	return append(append(b, 0x40|byte(len(rest)>>8), byte(len(rest))), rest...)
}

func (s *keyPackagesScenario) Setup(ctx context.Context, e *Env) error {
	owners := e.Cfg.Concurrency
	if e.Cfg.Count > 0 {
		owners = max(owners, (e.Cfg.Count+keyPackagesPerOwner-1)/keyPackagesPerOwner)
	}
	ids := make([]string, owners)
	for i := range ids {
		ids[i] = e.UserID("kp", i)
	}
	s.owners = ids
	s.seen = make(map[string]int)
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	err = parallel(ctx, owners, setupParallel, func(ctx context.Context, i int) error {
		c, err := e.Dial(ctx, e.ClientOptions(toks[i], "kp-device"))
		if err != nil {
			return err
		}
		defer e.Close(c)
		for n := 0; n < keyPackagesPerOwner; n += 100 {
			batch := make([][]byte, 100)
			for j := range batch {
				batch[j] = benchKeyPackage(fmt.Sprintf("%s-%d", ids[i], n+j))
			}
			var lr []byte
			if n == 0 {
				lr = benchKeyPackage(ids[i] + "-last")
			}
			// The first batch replaces: a rerun with the same prefix starts afresh.
			if n == 0 {
				_, err = c.ReplaceKeyPackages(ctx, batch, lr)
			} else {
				_, err = c.PublishKeyPackages(ctx, batch, lr)
			}
			if err != nil {
				return fmt.Errorf("publish key packages of %s: %w", ids[i], err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	cids := make([]string, e.Cfg.Concurrency)
	for i := range cids {
		cids[i] = e.UserID("kc", i)
	}
	ctoks, err := e.MintTokens(ctx, cids)
	if err != nil {
		return err
	}
	s.claimers = make([]*client.Client, len(ctoks))
	return parallel(ctx, len(ctoks), setupParallel, func(ctx context.Context, i int) error {
		c, err := e.Dial(ctx, e.ClientOptions(ctoks[i], "kc-device"))
		s.claimers[i] = c
		return err
	})
}

func (s *keyPackagesScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	var next atomic.Uint64
	for _, c := range s.claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e.Take(ctx) {
				owner := s.owners[int(next.Add(1)-1)%len(s.owners)]
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				t0 := time.Now()
				kps, err := c.ClaimKeyPackages(cctx, owner)
				e.M.done(time.Since(t0), err)
				cancel()
				if err != nil {
					continue
				}
				if len(kps) == 0 {
					s.empty.Add(1)
				}
				for _, k := range kps {
					if k.LastResort {
						s.last.Add(1)
						continue
					}
					s.oneTime.Add(1)
					s.mu.Lock()
					s.seen[string(k.KeyPackage)]++
					s.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func (s *keyPackagesScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	for _, c := range s.claimers {
		if c != nil {
			e.Close(c)
		}
	}
	dup := 0
	for _, n := range s.seen {
		if n > 1 {
			dup++
		}
	}
	if dup > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d one-time key packages handed out more than once", dup))
	}
	if n := s.empty.Load(); n > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d claims got no key package", n))
	}
	if r.OK < r.Requests {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d claims failed", r.Requests-r.OK, r.Requests))
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d owners (200 one-time packages each); %d one-time packages handed out, %d last-resort",
		len(s.owners), s.oneTime.Load(), s.last.Load()))
	return nil
}
