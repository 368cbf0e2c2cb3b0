package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/notify/standin"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// pushOfflineScenario measures offline push notifications: -t groups, each
// with one online sender (its owner) and -m-1 members who are not
// connected and have an FCM push target; the senders send -c messages
// round-robin into their groups; the server notifies each member's device
// through the stand-in (PushProvider), which hands every notification to
// the scenario. Each device's notifications must cover every message its
// group was sent, none twice: a notification stands for the messages up to
// its seq (several coalesce into one).
type pushOfflineScenario struct {
	admin   *client.Admin
	m       *Metrics
	senders []*client.Client
	groups  []*poGroup
	devices map[string]*poDevice // by push token; read-only once Setup is done

	lat                  *Histogram
	notes, dups, foreign atomic.Uint64
	first, last          atomic.Int64 // unix ns of the first and latest notification
	unmatched            atomic.Uint64
}

// poGroup is one group and the messages acked into it.
type poGroup struct {
	conv string
	mu   sync.Mutex
	acks []poAck // ascending seq
}

type poAck struct {
	seq uint64
	at  int64 // unix ns of the ack: the message is stored
}

// poDevice is one offline member's device.
type poDevice struct {
	g    *poGroup
	mu   sync.Mutex
	last uint64 // the highest seq a notification covered
}

// poDeviceID is the device every offline member registers.
const poDeviceID = "phone"

func poToken(uid string) string { return "bench-fcm-" + uid }

func (s *pushOfflineScenario) Setup(ctx context.Context, e *Env) error {
	p := e.Cfg.Provider
	if p == nil {
		return errors.New("push-offline needs its push stand-in (run through parley bench)")
	}
	s.lat, s.m = NewHistogram(), e.M
	s.admin = &client.Admin{HTTP: e.http, Key: e.Cfg.APIKey}
	t, m := e.Cfg.Concurrency, e.Cfg.Members
	s.groups = make([]*poGroup, t)
	s.devices = make(map[string]*poDevice, t*(m-1))
	owners := make([]string, t)
	members := make([][]string, t)
	for g := range t {
		s.groups[g] = &poGroup{}
		owners[g] = e.UserID("g"+strconv.Itoa(g)+"-m", 0)
		for i := 1; i < m; i++ {
			uid := e.UserID("g"+strconv.Itoa(g)+"-m", i)
			members[g] = append(members[g], uid)
			s.devices[poToken(uid)] = &poDevice{g: s.groups[g]}
		}
	}
	// Register the targets first, so no member is without one when the
	// first message comes.
	all := make([]string, 0, len(s.devices))
	for g := range t {
		all = append(all, members[g]...)
	}
	if err := parallel(ctx, len(all), setupParallel, func(ctx context.Context, i int) error {
		uid := all[i]
		err := s.admin.RegisterPush(ctx, uid, &pb.RegisterPush{DeviceId: poDeviceID,
			Target: &pb.RegisterPush_Fcm{Fcm: &pb.FcmTarget{Token: poToken(uid)}}})
		if err != nil {
			return fmt.Errorf("register the push target of %s: %w (is the server configured for the stand-in? %s)", uid, err, p.ServerYAML())
		}
		return nil
	}); err != nil {
		return err
	}
	toks, err := e.MintTokens(ctx, owners)
	if err != nil {
		return err
	}
	s.senders = make([]*client.Client, t)
	if err := parallel(ctx, t, setupParallel, func(ctx context.Context, g int) error {
		c, err := e.Dial(ctx, e.ClientOptions(toks[g], "d0"))
		if err != nil {
			return fmt.Errorf("connect %s: %w", owners[g], err)
		}
		s.senders[g] = c
		conv, err := createGroup(ctx, c, "bench push group", members[g])
		s.groups[g].conv = conv
		return err
	}); err != nil {
		return err
	}
	p.FCM.OnAccept(s.onNotification)
	return nil
}

// onNotification checks one notification the stand-in accepted.
func (s *pushOfflineScenario) onNotification(m standin.FCMMessage) {
	now := time.Now().UnixNano()
	d := s.devices[m.Token]
	seq, err := strconv.ParseUint(m.Data["seq"], 10, 64)
	if d == nil || err != nil || m.Data["conversation_id"] != d.g.conv {
		s.foreign.Add(1) // another run's, or not a message of this one
		return
	}
	s.notes.Add(1)
	s.first.CompareAndSwap(0, now)
	s.last.Store(now)
	s.m.delivered.Add(1)
	s.m.lastRecv.Store(now)
	d.mu.Lock()
	prev := d.last
	if seq <= prev {
		d.mu.Unlock()
		s.dups.Add(1)
		return
	}
	d.last = seq
	d.mu.Unlock()
	// Timed from the oldest message it is the first to cover: that one
	// waited longest.
	g := d.g
	g.mu.Lock()
	i, _ := slices.BinarySearchFunc(g.acks, prev+1, func(a poAck, seq uint64) int { return cmpU64(a.seq, seq) })
	var at int64
	if i < len(g.acks) && g.acks[i].seq <= seq {
		at = g.acks[i].at
	}
	g.mu.Unlock()
	if at == 0 {
		s.unmatched.Add(1) // notified before its ack reached the sender
		return
	}
	s.lat.Record(time.Duration(now - at))
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *pushOfflineScenario) Run(ctx context.Context, e *Env) error {
	every := streamInterval(e.Cfg.Rate, len(s.senders))
	var wg sync.WaitGroup
	for gi, c := range s.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := s.groups[gi]
			var k uint64
			tick := time.Now()
			for e.Take(ctx) {
				k++
				text := "push bench " + strconv.Itoa(gi) + "/" + strconv.FormatUint(k, 10)
				e.M.sent.Add(1)
				t0 := time.Now()
				ack, err := c.Send(context.WithoutCancel(ctx), &pb.Send{ConversationId: g.conv, ContentType: "text", Payload: []byte(text)})
				at := time.Now()
				e.M.done(at.Sub(t0), err)
				if err == nil {
					e.M.acked.Add(1)
					g.mu.Lock()
					// Acks of one sender come in seq order (one in flight).
					g.acks = append(g.acks, poAck{seq: ack.Seq, at: at.UnixNano()})
					g.mu.Unlock()
				}
				if every > 0 {
					tick = tick.Add(every)
					if wait := time.Until(tick); wait > 0 {
						select {
						case <-time.After(wait):
						case <-ctx.Done():
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	e.MarkEnd()
	return nil
}

// covered reports whether every device's notifications cover every message
// acked into its group, and how many devices are not (yet) covered.
func (s *pushOfflineScenario) covered() (behind int) {
	want := make(map[*poGroup]uint64, len(s.groups)) // each group's last acked seq
	for _, g := range s.groups {
		g.mu.Lock()
		if n := len(g.acks); n > 0 {
			want[g] = g.acks[n-1].seq
		}
		g.mu.Unlock()
	}
	for _, d := range s.devices {
		d.mu.Lock()
		if d.last < want[d.g] {
			behind++
		}
		d.mu.Unlock()
	}
	return behind
}

func (s *pushOfflineScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	defer func() {
		for _, c := range s.senders {
			e.Close(c)
		}
	}()
	if s.lat == nil { // Setup failed early
		return nil
	}
	// Wait for the notifications: until every device is covered, or
	// nothing new has come for --drain.
	lastCount, lastChange := s.notes.Load(), time.Now()
	behind := s.covered()
	for behind > 0 && ctx.Err() == nil && time.Since(lastChange) < e.Cfg.Drain {
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if n := s.notes.Load(); n != lastCount {
			lastCount, lastChange = n, time.Now()
		}
		behind = s.covered()
	}
	e.Cfg.Provider.FCM.OnAccept(nil)
	var acked uint64
	for _, g := range s.groups {
		g.mu.Lock()
		acked += uint64(len(g.acks))
		g.mu.Unlock()
	}
	pr := &PushReport{
		Devices: uint64(len(s.devices)), Messages: acked, Notifications: s.notes.Load(),
		DevicesNotCovered: uint64(behind), Duplicated: s.dups.Load(), Foreign: s.foreign.Load(),
		Latency: s.lat, Violations: e.Cfg.Provider.FCM.Violations(),
	}
	if f, l := s.first.Load(), s.last.Load(); f != 0 && l > f {
		pr.Seconds = time.Duration(l - f).Seconds()
	}
	if n := s.unmatched.Load(); n > 0 {
		e.Note(fmt.Sprintf("%d notifications came before their message's ack reached the sender (not timed)", n))
	}
	r.Push = pr
	return nil
}

// PushReport is push-offline's result.
type PushReport struct {
	Devices       uint64 `json:"devices"`       // offline devices with a push target
	Messages      uint64 `json:"messages"`      // messages acked into their groups
	Notifications uint64 `json:"notifications"` // accepted by the stand-in for this run's devices
	// Seconds is from the first notification to the last.
	Seconds             float64 `json:"seconds"`
	NotificationsPerSec float64 `json:"notifications_per_sec"` // notifications / seconds
	// DevicesNotCovered are devices whose notifications do not cover every
	// message sent to them (one was not pushed); Duplicated are
	// notifications for messages already notified to that device.
	DevicesNotCovered uint64 `json:"devices_not_covered"`
	Duplicated        uint64 `json:"duplicated"`
	// Foreign are notifications for devices or conversations not of this
	// run (an earlier run's, against the same server).
	Foreign uint64 `json:"foreign"`
	// Latency is from a message's ack (it is stored) to the request of the
	// first notification covering it, for the oldest message each
	// notification covers; it includes the server's push_delay.
	Latency        *Histogram `json:"latency"`
	LatencySummary Summary    `json:"latency_summary"`
	// Violations are the requests the stand-in found not as FCM documents them.
	Violations []string `json:"violations,omitempty"`
}

func (p *PushReport) finalize(r *Report) {
	if p.Seconds > 0 {
		p.NotificationsPerSec = float64(p.Notifications) / p.Seconds
	}
	p.LatencySummary = summarize(p.Latency)
	if p.DevicesNotCovered > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d devices were not notified of every message", p.DevicesNotCovered, p.Devices))
	}
	if p.Duplicated > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d notifications repeated a message already notified", p.Duplicated))
	}
	if len(p.Violations) > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d requests not as FCM documents them (first: %s)", len(p.Violations), p.Violations[0]))
	}
	if p.Foreign > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d notifications were for devices of another run (not counted)", p.Foreign))
	}
}
