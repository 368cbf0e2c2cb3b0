package wire

// Flusher is a connection whose flush can be deferred.
type Flusher interface {
	// ScheduleFlush writes what is queued (soon, on another goroutine).
	ScheduleFlush()
}

// Hold defers the flushes that queuing frames would schedule, so that frames
// queued for one connection by several deliveries in a row go out in one
// write: fan-out of a batch of messages to thousands of connections then
// costs one write per connection, not one per message. A Hold belongs to one
// goroutine, which must call Release when its batch is done.
type Hold struct {
	deferred []Flusher
}

// Defer records a flush to schedule at Release.
func (h *Hold) Defer(f Flusher) { h.deferred = append(h.deferred, f) }

// Release schedules every deferred flush.
func (h *Hold) Release() {
	for i, f := range h.deferred {
		f.ScheduleFlush()
		h.deferred[i] = nil
	}
	h.deferred = h.deferred[:0]
}
