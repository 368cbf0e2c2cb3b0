package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// orderScenario is WuKongIM's ordering check: one sender pipelines -c
// messages to one receiver as fast as it can, --window in flight, written
// strictly in order on one connection. The server's seqs must follow the
// send order, and the receiver must get exactly that order.
type orderScenario struct {
	st   *stream
	rcv  *client.Client
	snd  *rawConn
	to   string
	seqs []uint64 // ack seq by message number; reader goroutine during the run
}

func (s *orderScenario) Setup(ctx context.Context, e *Env) error {
	from, to := e.UserID("s", 0), e.UserID("r", 0)
	toks, err := e.MintTokens(ctx, []string{from, to})
	if err != nil {
		return err
	}
	s.to = to
	s.st = &stream{from: from, to: to, online: true}
	o := e.ClientOptions(toks[1], "d0")
	o.AutoDeliveredAck = e.Cfg.DeliveredAck
	o.OnMessage = receiver(e, []*stream{s.st}, to)
	if s.rcv, err = e.Dial(ctx, o); err != nil {
		return fmt.Errorf("connect receiver: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.snd, err = e.dialRaw(dctx, toks[0], "d0"); err != nil {
		return fmt.Errorf("connect sender: %w", err)
	}
	e.M.connected.Add(1)
	return nil
}

func (s *orderScenario) Run(ctx context.Context, e *Env) error {
	window := make(chan struct{}, e.Cfg.Window)
	var mu sync.Mutex
	sentAt := map[uint64]time.Time{} // frame id → send time; guarded by mu
	readErr := make(chan error, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		// The reader: acks (or errors) in whatever order they come.
		for {
			f, err := s.snd.read()
			if err != nil {
				readErr <- err
				return
			}
			if f.Id < 2 {
				continue // pongs of id 0 and the like
			}
			mu.Lock()
			t0, ok := sentAt[f.Id]
			delete(sentAt, f.Id)
			mu.Unlock()
			if !ok {
				continue
			}
			k := f.Id - 1
			var rerr error
			if ack := f.GetSendAck(); ack != nil {
				e.M.acked.Add(1)
				s.st.acked.set(k)
				s.st.ackedN++
				for uint64(len(s.seqs)) <= k {
					s.seqs = append(s.seqs, 0)
				}
				s.seqs[k] = ack.Seq
			} else if fe := f.GetError(); fe != nil {
				rerr = errorFrameErr(fe)
			} else {
				rerr = fmt.Errorf("bench: unexpected reply %T", f.Body)
			}
			e.M.done(time.Since(t0), rerr)
			<-window
		}
	}()
	defer func() {
		s.snd.conn.Close() // ends the reader
		<-readerDone
	}()

	// acquire takes a window slot; when the window is full it first puts
	// what is buffered on the wire.
	acquire := func(wait <-chan struct{}) error {
		select {
		case window <- struct{}{}:
			return nil
		default:
		}
		if err := s.snd.flush(); err != nil {
			return err
		}
		select {
		case window <- struct{}{}:
			return nil
		case err := <-readErr:
			return err
		case <-wait:
			return errors.New("acks still missing")
		}
	}
	var buf []byte
	var err error
	for k := uint64(1); err == nil && e.Take(ctx); k++ {
		if err = acquire(ctx.Done()); err != nil {
			if ctx.Err() != nil {
				err = nil // the timed phase ended while the window was full
			}
			break
		}
		buf = makePayload(buf, e.Cfg.Size, 0, k)
		id := k + 1 // id 1 was the auth frame
		mu.Lock()
		sentAt[id] = time.Now()
		mu.Unlock()
		e.M.sent.Add(1)
		err = s.snd.write(&pb.ClientFrame{Id: id, Body: &pb.ClientFrame_Send{Send: &pb.Send{
			ClientMsgId: e.Cfg.Prefix + strconv.FormatUint(k, 10), To: s.to, ContentType: "bench", Payload: buf}}})
	}
	// Wait for the acks still in flight: fill the window.
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for i := 0; err == nil && i < cap(window); i++ {
		err = acquire(wait.Done())
	}
	e.MarkEnd()
	if err != nil {
		return fmt.Errorf("sender connection: %w", err)
	}
	return nil
}

func (s *orderScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	if s.snd != nil {
		s.snd.close()
		e.M.connected.Add(-1)
	}
	var disorder uint64
	var last uint64
	for _, q := range s.seqs {
		if q == 0 {
			continue // not acked
		}
		if q <= last {
			disorder++
		}
		last = q
	}
	var d Delivery
	if s.st != nil {
		d = drain(ctx, e, []*stream{s.st})
	}
	d.AckOutOfOrder = disorder
	r.Delivery = &d
	e.Close(s.rcv)
	return nil
}
