package rich

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Stream errors.
var (
	// ErrNoStream: no open stream of that id belongs to the caller (it
	// never existed, finished, timed out, or is another user's).
	ErrNoStream = errors.New("rich: no such stream")
	// ErrStreamFull: the stream's text would pass its byte bound.
	ErrStreamFull = errors.New("rich: stream text too large")
	// ErrTooManyStreams: the node or the user holds as many open streams as
	// allowed.
	ErrTooManyStreams = errors.New("rich: too many open streams")
)

// StreamLimits bound the streams of one node.
type StreamLimits struct {
	// MaxOpen bounds the streams open on the node; MaxPerUser those of one
	// user. With MaxBytes they bound the memory streams hold.
	MaxOpen, MaxPerUser int
	// MaxBytes bounds one stream's text (the largest payload).
	MaxBytes int
	// Idle: a stream without an append for this long is ended as
	// incomplete. MaxLife bounds a stream's whole life the same way.
	Idle, MaxLife time.Duration
}

// Stream is one streamed message being written.
type Stream struct {
	ID    string
	Owner string
	// Msg is the message to store when the stream ends: its target and
	// metadata, set at open; Payload is filled in at the end.
	Msg *pb.Message

	text           []byte
	opened, recent time.Time
}

// Text is what was appended so far. Only valid once the stream has left the
// registry (Finish, or the expire callback).
func (st *Stream) Text() []byte { return st.text }

// Streams is a node's registry of open streams.
type Streams struct {
	lim    StreamLimits
	expire func(*Stream)

	mu      sync.Mutex
	open    map[string]*Stream // guarded by mu
	perUser map[string]int     // guarded by mu
}

// NewStreams makes a registry; expire is called (from Run's goroutine) with
// each stream that timed out, already removed.
func NewStreams(lim StreamLimits, expire func(*Stream)) *Streams {
	return &Streams{lim: lim, expire: expire, open: make(map[string]*Stream), perUser: make(map[string]int)}
}

// Open registers a stream of owner that will store msg (its StreamId is
// set); prefix starts its id (the node's, so an id names where it lives).
func (r *Streams) Open(prefix, owner string, msg *pb.Message, now time.Time) (*Stream, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	st := &Stream{ID: prefix + hex.EncodeToString(b[:]), Owner: owner, Msg: msg, opened: now, recent: now}
	msg.StreamId = st.ID // before the stream can be seen
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) >= r.lim.MaxOpen || r.perUser[owner] >= r.lim.MaxPerUser {
		return nil, ErrTooManyStreams
	}
	r.open[st.ID] = st
	r.perUser[owner]++
	return st, nil
}

// Append adds text to owner's stream id and returns the stream and the
// bytes it held before.
func (r *Streams) Append(owner, id, text string, now time.Time) (*Stream, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.open[id]
	if st == nil || st.Owner != owner {
		return nil, 0, ErrNoStream
	}
	if len(st.text)+len(text) > r.lim.MaxBytes {
		return nil, 0, ErrStreamFull
	}
	off := len(st.text)
	st.text = append(st.text, text...)
	st.recent = now
	return st, off, nil
}

// Finish removes owner's stream id and returns it.
func (r *Streams) Finish(owner, id string) (*Stream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.open[id]
	if st == nil || st.Owner != owner {
		return nil, ErrNoStream
	}
	r.removeLocked(st)
	return st, nil
}

// Len is the number of open streams.
func (r *Streams) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

func (r *Streams) removeLocked(st *Stream) {
	delete(r.open, st.ID)
	if r.perUser[st.Owner]--; r.perUser[st.Owner] <= 0 {
		delete(r.perUser, st.Owner)
	}
}

// Run ends timed-out streams every tick until stop is closed.
func (r *Streams) Run(tick time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			r.sweep(now, false)
		case <-stop:
			return
		}
	}
}

// EndAll ends every open stream through the expire callback (the node is
// stopping: what they hold is stored as incomplete rather than lost).
func (r *Streams) EndAll() { r.sweep(time.Now(), true) }

func (r *Streams) sweep(now time.Time, all bool) {
	var done []*Stream
	r.mu.Lock()
	for _, st := range r.open {
		if all || now.Sub(st.recent) >= r.lim.Idle || now.Sub(st.opened) >= r.lim.MaxLife {
			r.removeLocked(st)
			done = append(done, st)
		}
	}
	r.mu.Unlock()
	for _, st := range done {
		r.expire(st)
	}
}
