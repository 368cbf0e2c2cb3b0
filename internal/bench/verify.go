package bench

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"time"
)

// payloadHeader is what every bench message starts with: stream id (4
// bytes), message number within the stream (8), send time in unix ns (8) and
// a magic (4). The rest of the payload is filler up to Config.Size.
const payloadHeader = 24

var payloadMagic = [4]byte{'p', 'b', 'n', 'c'}

// payloadFiller fills a bench payload past its header.
const payloadFiller = " Are we still meeting at the station at seven tonight? I will bring the tickets and some snacks for the ride."

func makePayload(buf []byte, size int, stream uint32, k uint64) []byte {
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	if len(buf) != size {
		// Text after the header, so that a server's word filter (told to
		// read content type "bench") has words to look at.
		buf = buf[:size]
		for i := payloadHeader; i < size; i += copy(buf[i:], payloadFiller) {
		}
	}
	buf = buf[:size]
	binary.BigEndian.PutUint32(buf[0:], stream)
	binary.BigEndian.PutUint64(buf[4:], k)
	binary.BigEndian.PutUint64(buf[12:], uint64(time.Now().UnixNano()))
	copy(buf[20:24], payloadMagic[:])
	return buf
}

func parsePayload(p []byte) (stream uint32, k uint64, sentAt int64, ok bool) {
	if len(p) < payloadHeader || [4]byte(p[20:24]) != payloadMagic {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint64(p[4:]), int64(binary.BigEndian.Uint64(p[12:])), true
}

// bitset is a growable set of message numbers.
type bitset []uint64

func (b *bitset) set(k uint64) (was bool) {
	w := int(k / 64)
	if w >= len(*b) {
		n := make([]uint64, max(w+1, 2*len(*b)))
		copy(n, *b)
		*b = n
	}
	m := uint64(1) << (k % 64)
	was = (*b)[w]&m != 0
	(*b)[w] |= m
	return was
}

// andNotCount counts members of b missing from o.
func (b bitset) andNotCount(o bitset) (n uint64) {
	for i, w := range b {
		if i < len(o) {
			w &^= o[i]
		}
		n += uint64(bits.OnesCount64(w))
	}
	return n
}

// stream is one sender's messages to one receiver; the unit of the
// reliability and ordering checks ("per conversation, at every receiver").
// Numbers k start at 1 and grow by one per send.
type stream struct {
	id       uint32
	from, to string
	online   bool // the receiver is connected, so every acked message must arrive

	// Sender side: written by the stream's one sender goroutine during the
	// run, read after it has ended.
	acked      bitset
	ackedN     uint64
	lastAckK   uint64
	lastAckSeq uint64
	ackDisord  uint64 // acks whose seq does not grow with k

	mu    sync.Mutex // guards the receiver side below
	recv  bitset
	recvN uint64 // distinct numbers received
	dup   uint64
	ooo   uint64
	maxK  uint64
	seq   uint64 // highest server seq received
}

// onAck records the server's ack of message k with its seq. Acks of one
// stream are handled in k order (one sender, or a pipeline that reorders
// nothing) except in order, which checks its acks itself.
func (s *stream) onAck(k, seq uint64) {
	s.acked.set(k)
	s.ackedN++
	if k > s.lastAckK {
		if seq <= s.lastAckSeq {
			s.ackDisord++
		}
		s.lastAckK, s.lastAckSeq = k, seq
	}
}

// onReceive records message k (server seq) arriving at the receiver.
func (s *stream) onReceive(k, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recv.set(k) {
		s.dup++
		return
	}
	s.recvN++
	if k < s.maxK || seq <= s.seq {
		s.ooo++
	}
	s.maxK = max(s.maxK, k)
	s.seq = max(s.seq, seq)
}

// tally sums the checks over streams, once their senders have stopped.
func tally(streams []*stream) Delivery {
	var d Delivery
	for _, s := range streams {
		s.mu.Lock()
		d.Acked += s.ackedN
		d.Duplicated += s.dup
		d.OutOfOrder += s.ooo
		d.AckOutOfOrder += s.ackDisord
		if s.online {
			d.Expected += s.ackedN
			lost := s.acked.andNotCount(s.recv)
			d.Lost += lost
			d.Received += s.recvN
			d.ReceivedUnacked += s.recvN - (s.ackedN - lost)
		} else {
			d.Received += s.recvN // an offline receiver gets nothing pushed
		}
		s.mu.Unlock()
	}
	return d
}
