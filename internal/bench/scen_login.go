package bench

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// loginScenario is kimbench's login: each request connects and
// authenticates until auth_ok, then closes. -t goroutines each log one user
// in again and again, under a fresh device id every time.
// loginTimeout bounds one login: connect, Auth and AuthOk.
const loginTimeout = 10 * time.Second

type loginScenario struct {
	tokens []string
}

func (s *loginScenario) Setup(ctx context.Context, e *Env) error {
	ids := make([]string, e.Cfg.Concurrency)
	for i := range ids {
		ids[i] = e.UserID("l", i)
	}
	var err error
	s.tokens, err = e.MintTokens(ctx, ids)
	return err
}

func (s *loginScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	for i, tok := range s.tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; e.Take(ctx); n++ {
				// The lean protocol client, not the SDK: the server's work is
				// the same (connect, Auth, AuthOk, close), and the SDK's
				// goroutines and buffers would spend the load generator's
				// share of the machine's cores instead.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loginTimeout)
				t0 := time.Now()
				rc, err := e.dialRaw(dctx, tok, "d"+strconv.Itoa(i)+"-"+strconv.Itoa(n))
				e.M.done(time.Since(t0), err)
				cancel()
				if rc != nil {
					rc.close()
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func (s *loginScenario) Finish(context.Context, *Env, *Report) error { return nil }
