package server

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/api"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/cluster/clusterpb"
	"github.com/parleyim/parley/internal/route"
)

// nodesWait is how long GET /v1/admin/nodes waits for the other nodes'
// figures: a node that does not answer in time is left out of the page.
const nodesWait = 300 * time.Millisecond

// nodeStats is this node's figures as the cluster protocol carries them.
func (s *Server) nodeStats() *clusterpb.NodeStatsAnswer {
	gs, cs, wh, ns := s.gw.Stats(), s.chat.Stats(), s.hooks.Stats(), s.notify.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a := &clusterpb.NodeStatsAnswer{Node: strconv.Itoa(int(s.cfg.NodeID)), Connections: int64(gs.Open),
		Sessions: int64(s.chat.Sessions().Len()), MessagesStored: cs.SendsAccepted, Deliveries: cs.Deliveries,
		SendsFailed: cs.SendsFailed, HeapBytes: ms.HeapAlloc, Goroutines: int64(runtime.NumGoroutine()),
		UptimeSeconds: time.Since(s.started).Seconds(), WebhookQueued: int64(wh.Queued), WebhookDropped: wh.Dropped}
	for _, p := range ns.Platforms {
		a.PushQueued += int64(p.Queued)
		a.PushDropped += p.Dropped
	}
	return a
}

// adminNodes lists every node's figures for the admin API: this node's,
// then those of the other nodes that answered within nodesWait.
func (s *Server) adminNodes(ctx context.Context) []api.NodeStats {
	out := []api.NodeStats{toNodeStats(s.nodeStats(), true)}
	if s.nats == nil {
		return out
	}
	answers, err := s.nats.Gather(ctx, &route.Envelope{Topic: route.TopicAll,
		Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_NodeStatsQuestion{NodeStatsQuestion: &clusterpb.NodeStatsQuestion{}}}}, nodesWait)
	if err != nil {
		s.log.Warn("cluster: figures of other nodes not read", "err", err)
	}
	for _, a := range answers {
		if st := a.GetNodeStatsAnswer(); st != nil {
			out = append(out, toNodeStats(st, false))
		}
	}
	return out
}

func toNodeStats(a *clusterpb.NodeStatsAnswer, self bool) api.NodeStats {
	return api.NodeStats{NodeID: a.Node, Self: self, Connections: a.Connections, Sessions: a.Sessions,
		MessagesStored: a.MessagesStored, Deliveries: a.Deliveries, SendsFailed: a.SendsFailed, HeapBytes: a.HeapBytes,
		Goroutines: a.Goroutines, UptimeSeconds: a.UptimeSeconds, WebhookQueued: a.WebhookQueued,
		WebhookDropped: a.WebhookDropped, PushQueued: a.PushQueued, PushDropped: a.PushDropped}
}

// clusterNode is the chat service as the cluster router's node, answering
// the admin API's question for this node's figures besides the chat
// service's own questions.
type clusterNode struct {
	*chat.Service
	s *Server
	// ready is set once the server's parts that nodeStats reads exist:
	// the router starts answering before the gateway is built.
	ready *atomic.Bool
}

// Answer implements route.Node.
func (n clusterNode) Answer(env *route.Envelope) (*clusterpb.Envelope, bool) {
	if env.Topic == route.TopicAll && env.Msg.GetNodeStatsQuestion() != nil {
		if !n.ready.Load() {
			return nil, false
		}
		return &clusterpb.Envelope{Event: &clusterpb.Envelope_NodeStatsAnswer{NodeStatsAnswer: n.s.nodeStats()}}, true
	}
	return n.Service.Answer(env)
}
