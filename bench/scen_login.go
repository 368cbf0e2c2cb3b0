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
				o := e.ClientOptions(tok, "d"+strconv.Itoa(i)+"-"+strconv.Itoa(n))
				o.Heartbeat = -1 // the connection lives for a moment
				t0 := time.Now()
				c, err := e.Dial(context.WithoutCancel(ctx), o)
				e.M.done(time.Since(t0), err)
				e.Close(c)
			}
		}()
	}
	wg.Wait()
	return nil
}

func (s *loginScenario) Finish(context.Context, *Env, *Report) error { return nil }
