package notify

import (
	"context"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/store"
)

// coalescer holds each device's state between notifications: a device sent
// one within Coalesce waits, gathering what else is due, until Coalesce has
// passed, then gets one notification for all of it.
type coalescer struct {
	mu    sync.Mutex
	devs  map[string]*deviceState // guarded by mu: by targetKey
	queue []wake                  // guarded by mu: by when, oldest first
}

type deviceState struct {
	target   store.PushTarget
	lastSent time.Time
	pend     *batch // nil: nothing waiting
}

// batch is what waits for one device.
type batch struct {
	count int
	convs map[string]uint64 // conversation → newest seq (bounded by maxBatchConvs)
	group bool              // of the newest: a group's?
	last  item              // the newest message
	conv  string            // its conversation
	// hint is the user's state in conv as read when deciding, for a batch
	// sent at once (one that waited reads it again).
	hint *chat.UnreadHint
}

// wake is when a device's window ends.
type wake struct {
	key  string
	when time.Time
}

// maxBatchConvs bounds the conversations one device's batch remembers for
// the check before sending; past it the batch is sent as it is.
const maxBatchConvs = 64

func (c *coalescer) init() { c.devs = make(map[string]*deviceState) }

// add makes items of conv due on t's device: sent now if the device's
// window is over, else added to what waits.
func (c *coalescer) add(n *Notifier, t store.PushTarget, conv string, group bool, items []item, count int, hint *chat.UnreadHint) {
	now := time.Now()
	last := items[len(items)-1]
	key := targetKey(t)
	c.mu.Lock()
	d := c.devs[key]
	if d == nil {
		d = &deviceState{}
		c.devs[key] = d
	}
	d.target = t
	if d.pend == nil && now.Sub(d.lastSent) >= n.cfg.Coalesce {
		d.lastSent = now
		c.queue = append(c.queue, wake{key: key, when: now.Add(n.cfg.Coalesce)})
		c.mu.Unlock()
		b := &batch{count: count, group: group, last: last, conv: conv, hint: hint}
		n.send(t, b, false)
		return
	}
	if d.pend == nil {
		d.pend = &batch{convs: make(map[string]uint64)}
	}
	p := d.pend
	p.count += count
	if len(p.convs) < maxBatchConvs || p.convs[conv] != 0 {
		p.convs[conv] = max(p.convs[conv], last.seq)
	}
	p.group, p.last, p.conv = group, last, conv
	c.mu.Unlock()
}

// loop sends the batches whose device window is over and forgets idle
// devices.
func (c *coalescer) loop(n *Notifier) {
	defer n.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-tick.C:
			for _, d := range c.takeDue(n, now) {
				if n.stillDue(d.target, d.pend) {
					n.send(d.target, d.pend, true)
				}
			}
		}
	}
}

// takeDue returns the devices whose window ended with a batch waiting (the
// batch moves out of the state, whose new window starts now).
func (c *coalescer) takeDue(n *Notifier, now time.Time) []deviceState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []deviceState
	k := 0
	for k < len(c.queue) && !c.queue[k].when.After(now) {
		key := c.queue[k].key
		k++
		d := c.devs[key]
		if d == nil || now.Sub(d.lastSent) < n.cfg.Coalesce {
			continue // a later wake of the same device is queued
		}
		if d.pend == nil {
			delete(c.devs, key)
			continue
		}
		out = append(out, deviceState{target: d.target, pend: d.pend})
		d.pend = nil
		d.lastSent = now
		c.queue = append(c.queue, wake{key: key, when: now.Add(n.cfg.Coalesce)})
	}
	clear(c.queue[:k])
	c.queue = c.queue[k:]
	return out
}

// stillDue re-checks a batch that waited: the device may have connected
// and received everything meanwhile.
func (n *Notifier) stillDue(t store.PushTarget, b *batch) bool {
	if len(b.convs) >= maxBatchConvs {
		return true
	}
	ctx, cancel := context.WithTimeout(n.life, decideTimeout)
	defer cancel()
	connected, err := n.chat.ConnectedDevices(ctx, t.UserID)
	if err != nil || !connected[t.DeviceID] {
		return true
	}
	for conv, seq := range b.convs {
		cur, err := n.store.GetCursor(ctx, conv, t.UserID)
		if err != nil || cur.Delivered < seq {
			return true
		}
	}
	return false
}

// pending is how many devices have a batch waiting (for metrics).
func (c *coalescer) pending() (devices, waiting int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.devs {
		if d.pend != nil {
			waiting++
		}
	}
	return len(c.devs), waiting
}
