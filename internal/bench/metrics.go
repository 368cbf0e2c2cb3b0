package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Metrics are one process's live counters. Every method is safe for
// concurrent use: all load goroutines share one Metrics.
type Metrics struct {
	Latency *Histogram // request latency (successful requests)
	E2E     *Histogram // send → receipt at the receiver

	connected atomic.Int64
	requests  atomic.Uint64
	errors    atomic.Uint64
	sent      atomic.Uint64
	acked     atomic.Uint64
	delivered atomic.Uint64
	lastRecv  atomic.Int64 // unix ns of the latest delivery

	smu    sync.Mutex
	status map[string]uint64 // guarded by smu
}

func newMetrics() *Metrics {
	return &Metrics{Latency: NewHistogram(), E2E: NewHistogram(), status: map[string]uint64{}}
}

// Progress is a snapshot of a process's cumulative counters; workers send it
// to the coordinator once a second.
type Progress struct {
	Connected int64  `json:"connected"`
	Requests  uint64 `json:"requests"`
	Errors    uint64 `json:"errors"`
	Sent      uint64 `json:"sent"`
	Acked     uint64 `json:"acked"`
	Delivered uint64 `json:"delivered"`
}

func (p Progress) add(o Progress) Progress {
	return Progress{p.Connected + o.Connected, p.Requests + o.Requests, p.Errors + o.Errors,
		p.Sent + o.Sent, p.Acked + o.Acked, p.Delivered + o.Delivered}
}

func (m *Metrics) progress() Progress {
	return Progress{m.connected.Load(), m.requests.Load(), m.errors.Load(),
		m.sent.Load(), m.acked.Load(), m.delivered.Load()}
}

// done records one finished request: its latency when it succeeded, and its
// outcome in the status distribution either way.
func (m *Metrics) done(lat time.Duration, err error) {
	m.requests.Add(1)
	if err == nil {
		m.Latency.Record(lat)
	} else {
		m.errors.Add(1)
	}
	s := statusOf(err)
	m.smu.Lock()
	m.status[s]++
	m.smu.Unlock()
}

func (m *Metrics) statusCopy() map[string]uint64 {
	m.smu.Lock()
	defer m.smu.Unlock()
	out := make(map[string]uint64, len(m.status))
	for k, v := range m.status {
		out[k] = v
	}
	return out
}

// received records one message arriving at a receiver.
func (m *Metrics) received(sentAt int64) {
	now := time.Now().UnixNano()
	m.delivered.Add(1)
	m.lastRecv.Store(now)
	m.E2E.Record(time.Duration(now - sentAt))
}

// statusOf names a request's outcome for the status code distribution: "ok",
// the server's error or disconnect code, or what failed on the client side.
func statusOf(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *client.Error
	var de *client.DisconnectError
	var ne net.Error
	var he *client.HTTPError
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("HTTP_%d", he.Status)
	case errors.Is(err, errNotDelivered):
		return "not_delivered"
	case errors.As(err, &ce):
		return ce.Code.String()
	case errors.As(err, &de):
		return de.Code.String()
	case errors.Is(err, client.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, client.ErrClosed):
		return "connection_closed"
	case errors.As(err, &ne):
		return "network_error"
	}
	return "client_error"
}

// errorFrameErr turns an Error frame into the SDK's error type, so raw
// connections classify like SDK ones.
func errorFrameErr(e *pb.Error) error {
	return &client.Error{Code: e.GetCode(), Message: e.GetMessage()}
}
