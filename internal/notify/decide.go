package notify

import (
	"context"
	"slices"
	"time"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/store"
)

// decideTimeout bounds the store reads of one window's decision.
const decideTimeout = 30 * time.Second

// offlineChunk is the most recipients one message.offline event names.
const offlineChunk = 1000

func (n *Notifier) decideLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case w := <-n.fire:
			n.decide(w)
		}
	}
}

// decide works out, for each recipient of w's messages, which of their
// devices are due a notification, and hands those to the coalescer.
func (n *Notifier) decide(w *window) {
	if len(w.items) == 0 {
		return
	}
	n.stats.windows.Add(1)
	ctx, cancel := context.WithTimeout(n.life, decideTimeout)
	defer cancel()
	senders := make(map[string]bool, 2)
	for _, it := range w.items {
		senders[it.from] = true
	}
	var recipients []string
	if w.group {
		members, err := n.chat.GroupMembers(ctx, w.conv)
		if err != nil {
			n.log.Warn("push: group members not read; window skipped", "conversation", w.conv, "err", err)
			return
		}
		recipients = members
	} else {
		seen := make(map[string]bool, 2)
		for _, it := range w.items {
			if it.to != "" && it.to != it.from && !seen[it.to] {
				seen[it.to] = true
				recipients = append(recipients, it.to)
			}
		}
	}
	var offline []chat.OfflineRecipient
	heads := &chat.HeadsMemo{} // the badges' counts of this conversation share its heads
	for _, u := range recipients {
		if ctx.Err() != nil {
			return
		}
		items := w.items
		if senders[u] {
			items = itemsNotFrom(items, u)
		}
		if len(items) == 0 {
			continue
		}
		extra := 0
		if !senders[u] {
			extra = w.extra // messages past the window's cap; their senders are unknown
		}
		rec, ok := n.decideUser(ctx, w, u, items, extra, heads)
		if ok && n.cfg.Offline != nil {
			offline = append(offline, rec)
			if len(offline) == offlineChunk {
				n.emitOffline(w, offline)
				offline = nil
			}
		}
	}
	if len(offline) > 0 {
		n.emitOffline(w, offline)
	}
}

func itemsNotFrom(items []item, u string) []item {
	out := make([]item, 0, len(items))
	for _, it := range items {
		if it.from != u {
			out = append(out, it)
		}
	}
	return out
}

// decideUser applies the rules for one recipient; it reports the recipient
// for message.offline when at least one of their devices (or, with no
// target, the user) was not reached.
func (n *Notifier) decideUser(ctx context.Context, w *window, u string, items []item, extra int, heads *chat.HeadsMemo) (chat.OfflineRecipient, bool) {
	rec := chat.OfflineRecipient{UserID: u}
	// Targets first: most recipients of most servers have none, and then
	// (without message.offline) this one read is all they cost.
	targets, err := n.store.PushTargets(ctx, u)
	if err != nil {
		n.log.Warn("push: targets not read; recipient skipped", "user", u, "err", err)
		return rec, false
	}
	if len(targets) == 0 && n.cfg.Offline == nil {
		return rec, false
	}
	cs, err := n.store.GetConversationSettings(ctx, u, w.conv)
	if err != nil {
		n.log.Warn("push: settings not read; recipient skipped", "user", u, "err", err)
		return rec, false
	}
	if cs.Muted {
		// A muted conversation still tells of mentions.
		items = slices.DeleteFunc(slices.Clone(items), func(it item) bool {
			return !it.mentionAll && !slices.Contains(it.mentions, u)
		})
		if len(items) == 0 {
			return rec, false
		}
		extra = 0 // the messages past the window's cap are not known to mention
	}
	// A thread reply is for those in the thread, and whom it mentions.
	if slices.ContainsFunc(items, func(it item) bool { return it.threadRoot != 0 }) {
		items = n.threadItems(ctx, u, w.conv, items)
	}
	if len(items) == 0 {
		return rec, false
	}
	items, err = n.withoutBlocked(ctx, u, items)
	if err != nil {
		n.log.Warn("push: block list not read; recipient skipped", "user", u, "err", err)
		return rec, false
	}
	if len(items) == 0 {
		return rec, false
	}
	cur, err := n.store.GetCursor(ctx, w.conv, u)
	if err != nil {
		n.log.Warn("push: cursor not read; recipient skipped", "user", u, "err", err)
		return rec, false
	}
	// A connected device has received what the user acknowledged as
	// delivered (the cursor is per user); a device that is not connected
	// has received nothing since.
	var connected map[string]bool
	if cur.Delivered >= items[0].seq {
		if connected, err = n.chat.ConnectedDevices(ctx, u); err != nil {
			n.log.Warn("push: sessions not listed; treating devices as not connected", "user", u, "err", err)
		}
	}
	n.stats.decided.Add(1)
	hint := &chat.UnreadHint{ConversationID: w.conv, Cursor: cur, Settings: cs, Heads: heads}
	unacked := items
	for len(unacked) > 0 && unacked[0].seq <= cur.Delivered {
		unacked = unacked[1:]
	}
	if len(targets) == 0 {
		// Reached when some device is connected and acknowledged all.
		return rec, len(unacked) > 0 || len(connected) == 0
	}
	for _, t := range targets {
		due := items
		if connected[t.DeviceID] {
			due = unacked
		}
		if len(due) == 0 {
			continue
		}
		rec.DeviceIDs = append(rec.DeviceIDs, t.DeviceID)
		if n.providers[t.Kind] == nil {
			continue // a kind this server no longer sends to
		}
		count := len(due)
		if len(due) == len(items) {
			count += extra
		}
		n.devices.add(n, t, w.conv, w.group, due, count, hint)
	}
	return rec, len(rec.DeviceIDs) > 0
}

// withoutBlocked drops the items from senders u blocks.
func (n *Notifier) withoutBlocked(ctx context.Context, u string, items []item) ([]item, error) {
	blocked := map[string]bool{}
	checked := map[string]bool{}
	someBlocked := false
	for _, it := range items {
		if checked[it.from] {
			continue
		}
		checked[it.from] = true
		b, err := n.store.IsBlocked(ctx, u, it.from)
		if err != nil {
			return nil, err
		}
		blocked[it.from] = b
		someBlocked = someBlocked || b
	}
	if !someBlocked {
		return items, nil
	}
	out := make([]item, 0, len(items))
	for _, it := range items {
		if !blocked[it.from] {
			out = append(out, it)
		}
	}
	return out, nil
}

func (n *Notifier) emitOffline(w *window, recs []chat.OfflineRecipient) {
	n.stats.offline.Add(uint64(len(recs)))
	last := w.items[len(w.items)-1]
	n.cfg.Offline(chat.Event{Type: chat.EventMessageOffline, Time: time.Now(), ConversationID: w.conv,
		FirstSeq: w.items[0].seq, LastSeq: last.seq, Recipients: recs})
}

// targetKey names one device's state.
func targetKey(t store.PushTarget) string { return t.UserID + "\x00" + t.DeviceID }

// threadItems leaves out the thread replies that are not for u: those of
// threads u takes no part in that do not mention u.
func (n *Notifier) threadItems(ctx context.Context, u, conv string, items []item) []item {
	parts := map[uint64]bool{}
	return slices.DeleteFunc(slices.Clone(items), func(it item) bool {
		if it.threadRoot == 0 || it.mentionAll || slices.Contains(it.mentions, u) {
			return false
		}
		in, ok := parts[it.threadRoot]
		if !ok {
			in = n.chat.TakesPart(ctx, u, conv, it.threadRoot)
			parts[it.threadRoot] = in
		}
		return !in
	})
}
