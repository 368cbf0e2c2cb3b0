package notify

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/parleyim/parley/internal/metrics"
	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/store"
)

// job is one notification on its way to one device.
type job struct {
	target  store.PushTarget
	n       provider.Notification
	stored  time.Time // when the newest message it is about was stored
	attempt int
	test    bool
}

// platform is one provider's queue and senders.
type platform struct {
	n     *Notifier
	p     provider.Provider
	queue chan *job

	sent, invalid, rejected, exhausted, dropped, retries atomic.Uint64
	retrying                                             atomic.Int64 // jobs waiting out a backoff
	stuck                                                atomic.Bool  // the queue took nothing for stuckAfter
	latency                                              *metrics.Histogram
	age                                                  *metrics.Histogram // message stored → request sent
}

// maxBackoff caps the wait before a retry (and a Retry-After honoured).
const maxBackoff = 5 * time.Minute

// ageBuckets are the upper bounds, in seconds, of the stored-to-sent histogram.
var ageBuckets = []float64{0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 60, 120, 300}

func newPlatform(n *Notifier, p provider.Provider) *platform {
	return &platform{n: n, p: p, queue: make(chan *job, n.cfg.QueueSize),
		latency: metrics.NewHistogram(metrics.LatencyBuckets), age: metrics.NewHistogram(ageBuckets)}
}

func (pl *platform) start() {
	pl.n.wg.Add(pl.n.cfg.Workers)
	for range pl.n.cfg.Workers {
		go pl.worker()
	}
}

// stuckAfter is how long a new notification waits for room in a full
// queue before the platform is taken as stuck.
const stuckAfter = 2 * time.Second

// enqueueWait queues a new notification, waiting for room while the
// platform keeps up: a burst (one message to a group of 100,000 offline
// members) is sent at the platform's pace instead of dropped past the
// queue's size. Only the deciding goroutines wait, never message delivery.
// Retries wait too (on their own timer's goroutine, at most QueueSize of
// them): a burst keeps the queue full, and an access token renewed in its
// middle sends every request in flight back for a retry.
// A queue that takes nothing for stuckAfter belongs to a stuck platform:
// from then on its notifications are dropped at once, until its queue is
// half empty, so it cannot hold up the other platforms for long.
func (pl *platform) enqueueWait(j *job) {
	select {
	case pl.queue <- j:
		return
	default:
	}
	if pl.stuck.Load() {
		if len(pl.queue) > cap(pl.queue)/2 {
			pl.drop(j)
			return
		}
		pl.stuck.Store(false)
	}
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	select {
	case pl.queue <- j:
	case <-t.C:
		pl.stuck.Store(true)
		pl.n.log.Warn("push: platform not keeping up; notifications dropped until its queue is half empty", "kind", pl.p.Kind())
		pl.drop(j)
	case <-pl.n.stop:
	}
}

func (pl *platform) drop(j *job) {
	pl.dropped.Add(1)
	pl.n.plog.add(j.target, Attempt{Time: time.Now(), Kind: pl.p.Kind(), ConversationID: j.n.ConversationID,
		Seq: j.n.Seq, Count: j.n.Count, Outcome: OutcomeDropped, Error: "queue full"})
}

func (pl *platform) worker() {
	defer pl.n.wg.Done()
	for {
		select {
		case <-pl.n.stop:
			return
		case j := <-pl.queue:
			pl.attempt(j)
		}
	}
}

// attempt makes one request for j and acts on the answer.
func (pl *platform) attempt(j *job) provider.Result {
	n := pl.n
	ctx, cancel := context.WithTimeout(n.life, n.cfg.SendTimeout)
	start := time.Now()
	if j.attempt == 0 && !j.stored.IsZero() {
		pl.age.Observe(start.Sub(j.stored))
	}
	var sp trace.Span
	if n.cfg.Tracer != nil {
		ctx, sp = n.cfg.Tracer.Start(ctx, "parley.push", trace.SpanKindClient,
			attribute.String("parley.push.provider", pl.p.Kind()), attribute.Int("parley.push.try", j.attempt+1))
	}
	r := pl.p.Send(ctx, toProviderTarget(j.target), &j.n)
	if sp != nil {
		sp.SetAttributes(attribute.Int("http.response.status_code", r.Status))
		if !r.OK() {
			sp.SetStatus(codes.Error, r.Reason)
		}
		sp.End()
	}
	cancel()
	took := time.Since(start)
	pl.latency.Observe(took)
	a := Attempt{Time: start, Kind: pl.p.Kind(), ConversationID: j.n.ConversationID, Seq: j.n.Seq, Count: j.n.Count,
		Status: r.Status, Reason: r.Reason, Latency: took, Try: j.attempt + 1, Test: j.test}
	if r.Err != nil {
		a.Error = r.Err.Error()
	}
	switch {
	case r.OK():
		pl.sent.Add(1)
		a.Outcome = OutcomeSent
	case r.Invalid:
		pl.invalid.Add(1)
		a.Outcome = OutcomeRemoved
		n.removeInvalid(j.target)
	case r.Retry && !j.test && j.attempt < n.cfg.MaxRetries && pl.retrying.Load() < int64(n.cfg.QueueSize):
		pl.retries.Add(1)
		a.Outcome = OutcomeRetrying
		pl.retryLater(j, r.RetryAfter)
	case r.Retry:
		pl.exhausted.Add(1)
		a.Outcome = OutcomeFailed
	default:
		pl.rejected.Add(1)
		a.Outcome = OutcomeFailed
	}
	n.plog.add(j.target, a)
	if a.Outcome == OutcomeFailed {
		n.log.Warn("push: not delivered", "kind", pl.p.Kind(), "user", j.target.UserID, "device", j.target.DeviceID,
			"status", r.Status, "reason", r.Reason, "err", r.Err)
	}
	return r
}

// retryLater queues j again after an exponential backoff with jitter, or
// the platform's Retry-After when that is longer.
func (pl *platform) retryLater(j *job, retryAfter time.Duration) {
	wait := time.Second << j.attempt
	wait += rand.N(wait / 2)
	wait = min(max(wait, retryAfter), maxBackoff)
	j.attempt++
	pl.retrying.Add(1)
	time.AfterFunc(wait, func() {
		pl.retrying.Add(-1)
		select {
		case <-pl.n.stop:
		default:
			pl.enqueueWait(j)
		}
	})
}

// removeInvalid removes a target the platform says is gone, unless the
// device registered another since.
func (n *Notifier) removeInvalid(t store.PushTarget) {
	ctx, cancel := context.WithTimeout(n.life, 10*time.Second)
	defer cancel()
	if _, err := n.store.DeletePushTarget(ctx, t.UserID, t.DeviceID, t.Token); err != nil {
		n.log.Warn("push: invalid target not removed", "user", t.UserID, "device", t.DeviceID, "err", err)
	}
}

func toProviderTarget(t store.PushTarget) provider.Target {
	return provider.Target{Kind: t.Kind, Token: t.Token, Topic: t.Topic, Sandbox: t.Sandbox, P256dh: t.P256dh, Auth: t.Auth}
}

// send builds the notification for b and queues it for t's platform.
func (n *Notifier) send(t store.PushTarget, b *batch, coalesced bool) {
	pl := n.providers[t.Kind]
	if pl == nil {
		return
	}
	badge := -1
	if !n.cfg.NoBadge {
		ctx, cancel := context.WithTimeout(n.life, decideTimeout)
		if u, err := n.chat.Unread(ctx, t.UserID, b.hint); err == nil {
			badge = u
		}
		cancel()
	}
	title, body := n.text(b)
	pl.enqueueWait(&job{target: t, stored: b.last.stored, n: provider.Notification{
		Title: title, Body: body, Badge: badge, ConversationID: b.conv, Seq: b.last.seq, Count: b.count,
		CollapseID: collapseID(b.conv), ThreadID: b.conv, TTL: n.cfg.TTL, High: true,
	}})
}

// collapseID is a conversation's collapse key: the platforms limit its
// length and characters (Web Push's Topic: 32 of base64url), so it is a hash.
func collapseID(conv string) string {
	h := sha256.Sum256([]byte(conv))
	return base64.RawURLEncoding.EncodeToString(h[:18]) // 24 characters
}

// text is a batch's title and body under the preview mode and templates.
func (n *Notifier) text(b *batch) (title, body string) {
	if b.count > 1 {
		body = strconv.Itoa(b.count) + " new messages"
	}
	if n.cfg.Preview == PreviewHidden {
		if b.count > 1 {
			return "New messages", body
		}
		return "New message", ""
	}
	group := ""
	if b.group {
		ctx, cancel := context.WithTimeout(n.life, decideTimeout)
		group = n.chat.GroupName(ctx, b.conv)
		cancel()
	}
	multi := b.count > 1 && len(b.convs) > 1
	switch {
	case multi:
		return "New messages", body
	case b.count > 1 && b.group && group != "":
		return group, body
	case b.count > 1:
		return b.last.from, body
	}
	tpl, ok := n.cfg.Templates[b.last.contentType]
	if !ok {
		tpl, ok = n.cfg.Templates["*"]
	}
	if !ok {
		tpl = Template{Title: "{sender}", Body: "{text}"}
		if b.group && group != "" {
			tpl.Title = "{sender} in {group}"
		}
	}
	text := preview(b.last.payload)
	if text == "" {
		text = "New message"
	}
	v := fields{sender: b.last.from, group: group, text: text}
	return clip(v.expand(tpl.Title), 100), clip(v.expand(tpl.Body), 200)
}

// fields are a template's values.
type fields struct{ sender, group, text string }

// expand replaces {sender}, {group}, {text} and {count} (always 1 here: a
// batch of several has its own text) in tpl; anything else in braces stays.
// One pass, no replacer built per notification.
func (f fields) expand(tpl string) string {
	if !strings.Contains(tpl, "{") {
		return tpl
	}
	var b strings.Builder
	b.Grow(len(tpl) + len(f.sender) + len(f.text))
	for {
		i := strings.IndexByte(tpl, '{')
		if i < 0 {
			b.WriteString(tpl)
			return b.String()
		}
		b.WriteString(tpl[:i])
		tpl = tpl[i:]
		switch {
		case strings.HasPrefix(tpl, "{sender}"):
			b.WriteString(f.sender)
			tpl = tpl[len("{sender}"):]
		case strings.HasPrefix(tpl, "{group}"):
			b.WriteString(f.group)
			tpl = tpl[len("{group}"):]
		case strings.HasPrefix(tpl, "{text}"):
			b.WriteString(f.text)
			tpl = tpl[len("{text}"):]
		case strings.HasPrefix(tpl, "{count}"):
			b.WriteByte('1')
			tpl = tpl[len("{count}"):]
		default:
			b.WriteByte('{')
			tpl = tpl[1:]
		}
	}
}

// clip cuts s to at most runes runes.
func clip(s string, runes int) string {
	i := 0
	for j := range s {
		if i == runes {
			return s[:j]
		}
		i++
	}
	return s
}
