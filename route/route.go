// Package route delivers frames to users wherever they are connected. The
// in-process Router (the single-node default) hands frames straight to this
// node's sessions; a cluster Router carries them between nodes. Chat logic
// calls only this interface, so it does not change between the two.
package route

import (
	"context"

	"github.com/parleyim/parley/wire"
)

// Local is this node's delivery target (session.Registry implements it).
type Local interface {
	DeliverLocal(users []string, out *wire.Outbound, exceptSession string, hold *wire.Hold) int
}

// Router delivers frames to users' online devices.
type Router interface {
	// DeliverToUsers queues out for every online device of users (on any node),
	// except the session exceptSession. Frames to the same user from one
	// caller goroutine arrive in call order.
	DeliverToUsers(ctx context.Context, users []string, out *wire.Outbound, exceptSession string) error
	// DeliverHeld is DeliverToUsers with this node's flushes deferred to
	// hold.Release (see wire.Hold), for a goroutine delivering a batch.
	DeliverHeld(ctx context.Context, users []string, out *wire.Outbound, exceptSession string, hold *wire.Hold) error
	// Ready reports whether the router can deliver (always nil in-process).
	Ready() error
	Close() error
}

// InProcess is the single-node Router.
type InProcess struct {
	local Local
}

// NewInProcess returns a Router that delivers to local only.
func NewInProcess(local Local) *InProcess { return &InProcess{local: local} }

// DeliverToUsers implements Router.
func (r *InProcess) DeliverToUsers(_ context.Context, users []string, out *wire.Outbound, except string) error {
	r.local.DeliverLocal(users, out, except, nil)
	return nil
}

// DeliverHeld implements Router.
func (r *InProcess) DeliverHeld(_ context.Context, users []string, out *wire.Outbound, except string, hold *wire.Hold) error {
	r.local.DeliverLocal(users, out, except, hold)
	return nil
}

// Ready implements Router.
func (r *InProcess) Ready() error { return nil }

// Close implements Router.
func (r *InProcess) Close() error { return nil }
