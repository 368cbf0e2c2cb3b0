// Package route delivers frames to users wherever they are connected. The
// in-process Router (the single-node default) hands frames straight to this
// node's sessions; the NATS Router (cluster mode) also carries them to the
// other nodes that hold an interest. Chat logic calls only this interface, so
// it does not change between the two.
package route

import (
	"context"
	"errors"
	"time"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
	"github.com/parleyim/parley/wire"
)

// Local is this node's delivery target (session.Registry implements it).
type Local interface {
	DeliverLocal(users []string, out *wire.Outbound, exceptSession string, hold *wire.Hold) int
}

// Topic is what an interest or an envelope is about; its key says which one.
type Topic uint8

const (
	TopicUser     Topic = iota + 1 // key: user id; the nodes holding a session of the user
	TopicGroup                     // key: group conversation id; the nodes holding an online member
	TopicRoom                      // key: room name; the nodes holding a session in the room
	TopicPresence                  // key: user id; the nodes holding a subscriber to the user's presence
	TopicNode                      // key: node id; that one node
	TopicAll                       // no key: every node
)

// Envelope is what travels between nodes: Msg, a typed event (a frame to
// deliver, or one the receiving Node acts on), about the topic key that
// travels beside it in the subject. Package cluster encodes Msg.
type Envelope struct {
	Topic Topic
	Key   string
	Msg   *clusterpb.Envelope
}

// Node is this node's side of a cluster Router: where envelopes from other
// nodes go, on one goroutine, in the order they arrived.
type Node interface {
	// Receive handles an envelope from another node. A frame's Msg is
	// reused for the next envelope: what outlives the call is copied.
	// hold defers flushes until the Router has drained what arrived
	// together.
	Receive(env *Envelope, hold *wire.Hold)
	// HasUser reports whether uid has a session on this node (presence queries).
	HasUser(uid string) bool
	// Answer answers a question from another node (see Router.Gather);
	// false: nothing to say.
	Answer(env *Envelope) (*clusterpb.Envelope, bool)
}

// ErrNotConnected is Ready's answer while the Router cannot reach other nodes.
var ErrNotConnected = errors.New("route: not connected to the cluster")

// Deliverer delivers frames to users' online devices.
type Deliverer interface {
	// DeliverToUsers queues out for every online device of users (on any node),
	// except the session exceptSession. Frames to the same user from one
	// caller goroutine arrive in call order. With hold, this node's flushes
	// wait for hold.Release (see wire.Hold): for a goroutine delivering a
	// batch; nil flushes at once.
	DeliverToUsers(ctx context.Context, users []string, out *wire.Outbound, exceptSession string, hold *wire.Hold) error
	// DeliverGroup queues out for the group's online members: local (this
	// node's online members) directly, and once to every other node with an
	// interest in TopicGroup conv, which fans it out to its own members.
	// Members in joined (sorted) are reached through their own users'
	// interests instead, and the other nodes skip them: a node that just
	// began watching the group for them may not be known to the sending
	// node's NATS server yet. An in-process router ignores joined.
	DeliverGroup(ctx context.Context, conv string, local, joined []string, out *wire.Outbound, exceptSession string, hold *wire.Hold) error
}

// Cluster is what a node asks of and tells the other nodes, beyond
// delivering frames. In process there are no other nodes: every call is a
// no-op with an empty answer.
type Cluster interface {
	// Publish sends env to the other nodes with an interest in env.Topic and
	// env.Key (every other node for TopicAll). Nothing in process.
	Publish(ctx context.Context, env *Envelope) error
	// PublishFrame sends out (except to the session except) to the other
	// nodes with an interest in t and key, as Publish of a Frame would,
	// without building one per message.
	PublishFrame(ctx context.Context, t Topic, key string, out *wire.Outbound, except string) error
	// Watch and Unwatch count this node's interest in a topic key (they
	// nest); other nodes' envelopes reach Node.Receive while it is above 0.
	Watch(t Topic, key string)
	Unwatch(t Topic, key string)
	// Barrier returns once the interests taken so far have reached the
	// cluster's messaging (nil at once in process).
	Barrier(ctx context.Context) error
	// Gather asks the other nodes with an interest in env's topic and key
	// and returns the answers that came within wait (those that did not
	// decode are dropped and counted). Nothing in process.
	Gather(ctx context.Context, env *Envelope, wait time.Duration) ([]*clusterpb.Envelope, error)
	// OnlineElsewhere returns the id of another node holding a session of
	// uid, or "" when none does.
	OnlineElsewhere(ctx context.Context, uid string) (node string, err error)
	// Clustered reports whether other nodes may exist (false in process).
	Clustered() bool
	// Ready reports whether the router can deliver (always nil in process).
	Ready() error
}

// Router is both, and what the server builds: InProcess or NATS.
type Router interface {
	Deliverer
	Cluster
	Close() error
}

// InProcess is the single-node Router.
type InProcess struct {
	local Local
}

// NewInProcess returns a Router that delivers to local only.
func NewInProcess(local Local) *InProcess { return &InProcess{local: local} }

// DeliverToUsers implements Router.
func (r *InProcess) DeliverToUsers(_ context.Context, users []string, out *wire.Outbound, except string, hold *wire.Hold) error {
	r.local.DeliverLocal(users, out, except, hold)
	return nil
}

// DeliverGroup implements Router.
func (r *InProcess) DeliverGroup(_ context.Context, _ string, local, _ []string, out *wire.Outbound, except string, hold *wire.Hold) error {
	r.local.DeliverLocal(local, out, except, hold)
	return nil
}

// Publish implements Router: there is no other node.
func (r *InProcess) Publish(context.Context, *Envelope) error { return nil }

// PublishFrame implements Router: there is no other node.
func (r *InProcess) PublishFrame(context.Context, Topic, string, *wire.Outbound, string) error {
	return nil
}

// Watch implements Router.
func (r *InProcess) Watch(Topic, string) {}

// Unwatch implements Router.
func (r *InProcess) Unwatch(Topic, string) {}

// Barrier implements Router.
func (r *InProcess) Barrier(context.Context) error { return nil }

// Gather implements Router: there is nobody to ask.
func (r *InProcess) Gather(context.Context, *Envelope, time.Duration) ([]*clusterpb.Envelope, error) {
	return nil, nil
}

// OnlineElsewhere implements Router: there is nowhere else.
func (r *InProcess) OnlineElsewhere(context.Context, string) (string, error) { return "", nil }

// Clustered implements Router.
func (r *InProcess) Clustered() bool { return false }

// Ready implements Router.
func (r *InProcess) Ready() error { return nil }

// Close implements Router.
func (r *InProcess) Close() error { return nil }
