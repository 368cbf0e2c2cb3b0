package notify

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// item is what a window keeps of one stored message.
type item struct {
	seq         uint64
	from, to    string // to: the recipient of a 1:1 message; "" in a group
	contentType string
	// payload is the start of a text message's payload (shared with
	// delivery, never modified; cut to a preview only when a
	// notification is built); nil for other content.
	payload []byte
	stored  time.Time
	// mentions and mentionAll: who the message mentions (shared with
	// delivery, never modified). A mention reaches a muted conversation.
	mentions   []string
	mentionAll bool
	threadRoot uint64
}

// window is one conversation's messages stored within Delay of its first.
type window struct {
	conv  string
	group bool
	items []item
	// extra counts messages past maxWindowItems: counted, not kept.
	extra int
	due   time.Time
	bytes int64
}

const (
	// maxWindowItems bounds what one window keeps of a busy conversation.
	maxWindowItems = 256
	// previewRunes bounds a text preview.
	previewRunes = 120
	itemOverhead = 96 // bytes an item costs besides its strings
)

// windows are the open windows, in the order they close (all last Delay).
type windows struct {
	mu    sync.Mutex
	open  map[string]*window // guarded by mu: by conversation
	queue []*window          // guarded by mu: by due, oldest first
	bytes int64              // guarded by mu: what open windows hold
	max   int64
}

func (ws *windows) init(max int64) {
	ws.open = make(map[string]*window)
	ws.max = max
}

// Stored is told of each stored message, on the node that stored it. It
// only appends to memory: it never blocks on storage or the network.
func (n *Notifier) Stored(m *pb.Message) {
	if !n.Enabled() || m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL {
		return
	}
	n.stats.considered.Add(1)
	it := item{seq: m.Seq, from: m.From, to: m.To, contentType: m.ContentType, stored: time.UnixMilli(m.ServerTime),
		mentions: m.Mentions, mentionAll: m.MentionAll, threadRoot: m.ThreadRoot}
	size := int64(itemOverhead + len(it.from) + len(it.to) + len(it.contentType))
	for _, u := range m.Mentions {
		size += int64(len(u)) + 16
	}
	if isText(m.ContentType) {
		// Kept by reference (no copy per message); the whole payload
		// stays in memory while referenced, so it all counts.
		it.payload = m.Payload[:min(len(m.Payload), 4*previewRunes)]
		size += int64(len(m.Payload))
	}
	ws := &n.windows
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.open[m.ConversationId]
	if w == nil {
		size += int64(len(m.ConversationId)) + itemOverhead
		if ws.bytes+size > ws.max {
			n.stats.skippedPending.Add(1)
			return
		}
		w = &window{conv: m.ConversationId, group: strings.HasPrefix(m.ConversationId, "g:"),
			due: time.Now().Add(n.cfg.Delay)}
		ws.open[w.conv] = w
		ws.queue = append(ws.queue, w)
	}
	if len(w.items) >= maxWindowItems {
		w.extra++
		return
	}
	if ws.bytes+size > ws.max {
		n.stats.skippedPending.Add(1)
		return
	}
	w.items = append(w.items, it)
	w.bytes += size
	ws.bytes += size
}

// due takes the windows whose delay is over.
func (ws *windows) takeDue(now time.Time) []*window {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	k := 0
	for k < len(ws.queue) && !ws.queue[k].due.After(now) {
		w := ws.queue[k]
		delete(ws.open, w.conv)
		ws.bytes -= w.bytes
		k++
	}
	if k == 0 {
		return nil
	}
	out := make([]*window, k)
	copy(out, ws.queue[:k])
	clear(ws.queue[:k])
	ws.queue = ws.queue[k:]
	return out
}

// windowLoop hands closed windows to the deciders.
func (n *Notifier) windowLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(min(n.cfg.Delay/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-tick.C:
			for _, w := range n.windows.takeDue(now) {
				select {
				case n.fire <- w:
				case <-n.stop:
					return
				}
			}
		}
	}
}

func isText(contentType string) bool {
	return contentType == "text" || contentType == "" || strings.HasPrefix(contentType, "text/")
}

// preview is the start of a text message, or "" for other content (the
// payload is opaque then, and the notification says "New message").
func preview(payload []byte) string {
	if len(payload) >= 4*previewRunes {
		payload = payload[:4*previewRunes]
		// A rune cut in two at the end is not the payload's fault.
		for i := 0; i < utf8.UTFMax-1 && !utf8.Valid(payload); i++ {
			payload = payload[:len(payload)-1]
		}
	}
	if !utf8.Valid(payload) {
		return "" // not text after all: opaque
	}
	s := string(payload)
	if utf8.RuneCountInString(s) > previewRunes {
		r := []rune(s)[:previewRunes-1]
		s = string(r) + "…"
	}
	return strings.Join(strings.Fields(s), " ")
}
