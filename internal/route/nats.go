package route

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/parleyim/parley/internal/cluster"
	"github.com/parleyim/parley/internal/cluster/clusterpb"
	"github.com/parleyim/parley/internal/tracing"
	"github.com/parleyim/parley/wire"
)

// NATSConfig configures the cluster Router. Either URLs (an external NATS
// cluster) or ClusterListen (NATS embedded in this node, clustered with the
// other nodes' through Routes) must be set.
type NATSConfig struct {
	// URLs of an external NATS cluster, e.g. "nats://nats-1:4222". Credentials
	// go in the URL ("nats://user:pass@host:4222").
	URLs []string
	// ClusterListen turns on embedded NATS: its route listener, e.g. "10.0.0.5:6222".
	ClusterListen string
	// Routes are the other nodes' route listeners ("nats://10.0.0.6:6222").
	Routes []string
	// ClusterAdvertise is the "host:port" other nodes reach this node's
	// route listener at, when that is not ClusterListen (NAT, a port
	// mapping, a proxy): the address route gossip tells the other nodes.
	// Default "": they connect to ClusterListen's port at the address
	// this node's routes come from.
	ClusterAdvertise string
	// ClusterName must be the same on every node. Default "parley". (A Parley
	// server passes every field but QueryTimeout explicitly, with the
	// defaults of server.Config.)
	ClusterName string
	// ClusterSecret authenticates routes between embedded servers (the same on every node).
	ClusterSecret string
	// ClientListen optionally opens the embedded server to NATS clients
	// (monitoring with the nats CLI). Default "": in-process only.
	ClientListen string
	// Prefix starts every subject, so clusters can share a NATS. Default "parley".
	Prefix string
	// NodeID names this node (its TopicNode key).
	NodeID string
	// QueryTimeout bounds a presence query. Default 500ms.
	QueryTimeout time.Duration
	Logger       *slog.Logger
	// Tracer, when set, carries the sending span's trace context in
	// frames to other nodes and traces their delivery there. Nil: off.
	Tracer *tracing.Tracer

	localToken string // random; authenticates this process to its embedded server
}

// inboxCap bounds the envelopes waiting for Node.Receive; past it NATS drops
// them as a slow consumer (counted; receivers catch up by sync).
const inboxCap = 1 << 16

// NATS is the cluster Router: it delivers to this node directly and to the
// other nodes over NATS subjects they subscribe to only while they hold an
// interest (a user, group, room or presence subscriber).
type NATS struct {
	cfg   NATSConfig
	local Local // this node's sessions
	node  Node  // set by Start
	log   *slog.Logger
	ns    *natsserver.Server // embedded server; nil with external URLs
	nc    *nats.Conn

	inbox             chan *nats.Msg
	done              chan struct{}
	allSubj, nodeSubj string // the subjects every node always subscribes to

	mu        sync.Mutex
	interests map[string]*interest // guarded by mu; by subject

	// Startup: until the embedded server is routed to every peer named in
	// Routes (or routeWait has passed since startedAt), the node is not
	// ready; routed latches once either happens (see Ready).
	startedAt  time.Time
	wantRoutes int
	routed     atomic.Bool

	// bufs holds encode buffers (*[]byte): NATS copies what it publishes,
	// so one buffer serves message after message.
	bufs sync.Pool
	// The user-online question and this node's answer, encoded once.
	userOnlineQ, userOnlineA []byte

	dropped   atomic.Uint64 // envelopes NATS dropped as a slow consumer
	unsent    atomic.Uint64 // envelopes not published: NATS was unreachable
	malformed atomic.Uint64 // envelopes received that did not decode
	received  atomic.Uint64
	published atomic.Uint64
}

type interest struct {
	sub   *nats.Subscription
	topic Topic
	key   string
	n     int
}

// NewNATS starts embedded NATS if configured, connects, and subscribes to the
// subjects every node listens on; local is where it delivers on this node.
// It does not wait for a reachable external NATS: until it is, Ready reports
// an error and the connection keeps retrying. Call Start to receive.
func NewNATS(cfg NATSConfig, local Local) (*NATS, error) {
	if cfg.ClusterName == "" {
		cfg.ClusterName = "parley"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "parley"
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	cfg.localToken = hex.EncodeToString(tok[:])
	if (len(cfg.URLs) == 0) == (cfg.ClusterListen == "") {
		return nil, errors.New("route: set either NATS URLs or an embedded cluster listener")
	}
	r := &NATS{cfg: cfg, local: local, log: cfg.Logger, inbox: make(chan *nats.Msg, inboxCap),
		done: make(chan struct{}), interests: make(map[string]*interest),
		startedAt: time.Now(), wantRoutes: peerRoutes(cfg)}
	r.routed.Store(r.wantRoutes == 0)
	opts := []nats.Option{
		nats.Name("parley-node-" + cfg.NodeID),
		nats.NoEcho(), // this node delivers to itself directly
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			r.log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { r.log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				r.dropped.Add(1)
				return
			}
			r.log.Warn("nats error", "err", err)
		}),
	}
	url := strings.Join(cfg.URLs, ",")
	if cfg.ClusterListen != "" {
		ns, err := startEmbedded(cfg)
		if err != nil {
			return nil, err
		}
		r.ns = ns
		url = ""
		opts = append(opts, nats.InProcessServer(ns), nats.Token(clientToken(cfg)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		r.shutdownEmbedded()
		return nil, fmt.Errorf("route: nats: %w", err)
	}
	r.nc = nc
	r.userOnlineQ, _ = cluster.Encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_UserOnlineQuestion{UserOnlineQuestion: &clusterpb.UserOnlineQuestion{}}})
	if r.userOnlineA, err = cluster.Encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_UserOnlineAnswer{UserOnlineAnswer: &clusterpb.UserOnlineAnswer{Node: cfg.NodeID}}}); err != nil {
		r.Close()
		return nil, fmt.Errorf("route: node id: %w", err)
	}
	r.allSubj, r.nodeSubj = r.subject(TopicAll, ""), r.subject(TopicNode, cfg.NodeID)
	for _, subj := range []string{r.allSubj, r.nodeSubj} {
		if _, err := nc.ChanSubscribe(subj, r.inbox); err != nil {
			r.Close()
			return nil, fmt.Errorf("route: subscribe: %w", err)
		}
	}
	return r, nil
}

// Start hands what arrives from other nodes to node (until Close); what
// arrived before waits in the inbox.
func (r *NATS) Start(node Node) {
	r.node = node
	go r.receiveLoop()
}

func startEmbedded(cfg NATSConfig) (*natsserver.Server, error) {
	host, port, err := splitHostPort(cfg.ClusterListen)
	if err != nil {
		return nil, fmt.Errorf("route: nats cluster listen: %w", err)
	}
	// The client listener cannot be off (routing waits for it to open): a
	// random loopback port, behind a token only this process (and, given
	// ClientListen, whoever holds ClusterSecret) knows.
	o := &natsserver.Options{
		// Unique even when two nodes share a node id by mistake, so their
		// routes still form and the nodes notice (chat's heartbeats).
		ServerName:    "parley-" + cfg.NodeID + "-" + cfg.localToken[:8],
		Host:          "127.0.0.1",
		Port:          natsserver.RANDOM_PORT,
		Authorization: clientToken(cfg),
		NoLog:         true,
		NoSigs:        true,
		// Frames may be up to max_frame_bytes (16 MiB at most), past NATS's
		// default 1 MiB payload.
		MaxPayload: 17 << 20,
		Cluster: natsserver.ClusterOpts{
			Name: cfg.ClusterName, Host: host, Port: port,
			Username: routeUser(cfg), Password: cfg.ClusterSecret,
			Advertise: cfg.ClusterAdvertise,
		},
	}
	if cfg.ClientListen != "" {
		h, p, err := splitHostPort(cfg.ClientListen)
		if err != nil {
			return nil, fmt.Errorf("route: nats client listen: %w", err)
		}
		o.Host, o.Port = h, p
	}
	for _, s := range cfg.Routes {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("route: nats route %q is not a nats://host:port URL", s)
		}
		if cfg.ClusterSecret != "" {
			u.User = url.UserPassword(routeUser(cfg), cfg.ClusterSecret)
		}
		o.Routes = append(o.Routes, u)
	}
	ns, err := natsserver.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("route: embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("route: embedded nats did not start (is %s free?)", cfg.ClusterListen)
	}
	return ns, nil
}

// clientToken authenticates NATS clients of the embedded server.
func clientToken(cfg NATSConfig) string {
	if cfg.ClusterSecret != "" {
		return cfg.ClusterSecret
	}
	return cfg.localToken
}

func routeUser(cfg NATSConfig) string {
	if cfg.ClusterSecret == "" {
		return ""
	}
	return "parley"
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return h, n, nil
}

// subject maps a topic key to its subject. Keys that are not safe subject
// tokens (user ids and room names may hold '.') are hex-encoded behind '~'.
func (r *NATS) subject(t Topic, key string) string {
	var b strings.Builder
	b.Grow(len(r.cfg.Prefix) + 4 + 2*len(key))
	b.WriteString(r.cfg.Prefix)
	switch t {
	case TopicUser:
		b.WriteString(".u.")
	case TopicGroup:
		b.WriteString(".g.")
	case TopicRoom:
		b.WriteString(".r.")
	case TopicPresence:
		b.WriteString(".p.")
	case TopicNode:
		b.WriteString(".n.")
	case TopicAll:
		b.WriteString(".all")
		return b.String()
	}
	if safeToken(key) {
		b.WriteString(key)
	} else {
		b.WriteByte('~')
		b.WriteString(hex.EncodeToString([]byte(key)))
	}
	return b.String()
}

func safeToken(s string) bool {
	if s == "" || s[0] == '~' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '.' || c == '*' || c == '>' || c >= 0x7f {
			return false
		}
	}
	return true
}

// maxPooledBuf bounds the buffers kept for reuse: a rare large frame's
// buffer is left to the garbage collector.
const maxPooledBuf = 64 << 10

func (r *NATS) getBuf() *[]byte {
	if p, ok := r.bufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 512)
	return &b
}

func (r *NATS) putBuf(p *[]byte) {
	if cap(*p) <= maxPooledBuf {
		*p = (*p)[:0]
		r.bufs.Put(p)
	}
}

// DeliverToUsers implements Router: local sessions now, and one envelope per
// user to the nodes holding that user (NATS drops it where none does).
func (r *NATS) DeliverToUsers(ctx context.Context, users []string, out *wire.Outbound, except string, hold *wire.Hold) error {
	r.local.DeliverLocal(users, out, except, hold)
	buf := r.getBuf()
	defer r.putBuf(buf)
	*buf = cluster.AppendTracedFrame(*buf, except, out.Bytes(wire.Proto), r.traceparent(ctx))
	data := *buf
	var first error
	for i, u := range users {
		if i < 8 && dupBefore(users, i) {
			continue
		}
		if err := r.publish(r.subject(TopicUser, u), data); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func dupBefore(users []string, i int) bool {
	for j := 0; j < i; j++ {
		if users[j] == users[i] {
			return true
		}
	}
	return false
}

// DeliverGroup implements Router.
func (r *NATS) DeliverGroup(ctx context.Context, conv string, local, joined []string, out *wire.Outbound, except string, hold *wire.Hold) error {
	r.local.DeliverLocal(local, out, except, hold)
	buf := r.getBuf()
	defer r.putBuf(buf)
	tp := r.traceparent(ctx)
	*buf = cluster.AppendTracedFrame(*buf, except, out.Bytes(wire.Proto), tp)
	if len(joined) == 0 {
		return r.publish(r.subject(TopicGroup, conv), *buf)
	}
	var first error
	for _, u := range joined {
		if err := r.publish(r.subject(TopicUser, u), *buf); err != nil && first == nil {
			first = err
		}
	}
	data, err := cluster.Encode(&clusterpb.Envelope{Traceparent: tp, Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{
		ExceptSession: except, SkipUsers: joined, Frame: out.Bytes(wire.Proto)}}})
	if err == nil {
		err = r.publish(r.subject(TopicGroup, conv), data)
	}
	if err != nil && first == nil {
		first = err
	}
	return first
}

// PublishFrame implements Router.
func (r *NATS) PublishFrame(ctx context.Context, t Topic, key string, out *wire.Outbound, except string) error {
	buf := r.getBuf()
	defer r.putBuf(buf)
	*buf = cluster.AppendTracedFrame(*buf, except, out.Bytes(wire.Proto), r.traceparent(ctx))
	data := *buf
	return r.publish(r.subject(t, key), data)
}

// Publish implements Router.
func (r *NATS) Publish(_ context.Context, env *Envelope) error {
	buf := r.getBuf()
	defer r.putBuf(buf)
	var err error
	if *buf, err = cluster.Append(*buf, env.Msg); err != nil {
		return err
	}
	return r.publish(r.subject(env.Topic, env.Key), *buf)
}

// traceparent is the trace context frames sent under ctx carry: "" unless
// tracing is on and ctx's span sampled.
func (r *NATS) traceparent(ctx context.Context) string {
	if r.cfg.Tracer == nil {
		return ""
	}
	return tracing.Traceparent(ctx)
}

func (r *NATS) publish(subj string, data []byte) error {
	if !r.nc.IsConnected() {
		r.unsent.Add(1)
		return ErrNotConnected // not buffered: receivers catch up by sync
	}
	r.published.Add(1)
	return r.nc.Publish(subj, data)
}

// Watch implements Router.
func (r *NATS) Watch(t Topic, key string) {
	subj := r.subject(t, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if in := r.interests[subj]; in != nil {
		in.n++
		return
	}
	sub, err := r.nc.ChanSubscribe(subj, r.inbox)
	if err != nil {
		r.log.Warn("nats subscribe failed", "subject", subj, "err", err)
	}
	// Counted even when the subscribe failed, so Unwatch stays balanced.
	r.interests[subj] = &interest{sub: sub, topic: t, key: key, n: 1}
}

// Unwatch implements Router.
func (r *NATS) Unwatch(t Topic, key string) {
	subj := r.subject(t, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.interests[subj]
	if in == nil {
		return
	}
	if in.n--; in.n > 0 {
		return
	}
	delete(r.interests, subj)
	if in.sub != nil {
		_ = in.sub.Unsubscribe()
	}
}

// Barrier implements Router: a round trip to the NATS server, which has then
// processed every subscription sent before it (and passed it on to its routes).
func (r *NATS) Barrier(ctx context.Context) error {
	if !r.nc.IsConnected() {
		return ErrNotConnected
	}
	return r.nc.FlushWithContext(ctx)
}

// Interests is the number of subjects this node subscribes to for interests.
func (r *NATS) Interests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.interests)
}

// Gather implements Router: a request whose replies are collected on an
// inbox of its own until wait passes.
func (r *NATS) Gather(ctx context.Context, env *Envelope, wait time.Duration) ([]*clusterpb.Envelope, error) {
	if !r.nc.IsConnected() {
		return nil, ErrNotConnected
	}
	question, err := cluster.Encode(env.Msg)
	if err != nil {
		return nil, err
	}
	inbox := nats.NewInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := r.nc.PublishRequest(r.subject(env.Topic, env.Key), inbox, question); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []*clusterpb.Envelope
	var d cluster.Decoder
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the wait is over
		}
		// Answers are never frames, so each is a message of its own.
		if a, err := d.Decode(m.Data); err == nil {
			out = append(out, a)
		} else {
			r.malformed.Add(1)
		}
	}
	return out, nil
}

// OnlineElsewhere implements Router: a query on the user's subject, which
// only nodes holding one of the user's sessions subscribe to.
func (r *NATS) OnlineElsewhere(ctx context.Context, uid string) (string, error) {
	if !r.nc.IsConnected() {
		return "", ErrNotConnected
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.QueryTimeout)
	defer cancel()
	m, err := r.nc.RequestWithContext(ctx, r.subject(TopicUser, uid), r.userOnlineQ)
	switch {
	case err == nil:
		var d cluster.Decoder
		a, err := d.Decode(m.Data)
		if node := a.GetUserOnlineAnswer().GetNode(); err == nil && node != "" {
			return node, nil
		}
		r.malformed.Add(1)
		return "", cluster.ErrMalformed
	case errors.Is(err, nats.ErrNoResponders):
		return "", nil
	}
	return "", err
}

// Clustered implements Router.
func (r *NATS) Clustered() bool { return true }

// Ready implements Router: connected to NATS. Embedded, that is always so:
// a node whose routes are all down (the last one standing, or cut off) keeps
// serving the clients it holds, since storage, not NATS, is the record.
func (r *NATS) Ready() error {
	if !r.nc.IsConnected() {
		return ErrNotConnected
	}
	if !r.routed.Load() {
		return r.checkRouted()
	}
	return nil
}

// routeWait bounds how long a starting node waits to be routed to every peer
// its Routes name: a peer that is down must not keep the others from serving.
const routeWait = 10 * time.Second

// ErrNotRouted is Ready's answer while a starting node is not yet routed to
// the peers it was told of.
var ErrNotRouted = errors.New("route: not yet routed to every configured peer")

// checkRouted is Ready before the routes first formed. A node that served
// before its routes did would take a client's message and publish it where
// no other node hears it yet (seen: the first messages of a cluster started
// and used at once were lost to users on other nodes).
func (r *NATS) checkRouted() error {
	if r.Routes() >= r.wantRoutes {
		r.routed.Store(true)
		return nil
	}
	if time.Since(r.startedAt) >= routeWait {
		if r.routed.CompareAndSwap(false, true) { // one line, however many ask at once
			r.log.Warn("serving before every configured NATS route formed", "routed", r.Routes(), "configured", r.wantRoutes)
		}
		return nil
	}
	return ErrNotRouted
}

// peerRoutes is how many of the configured routes name another node: every
// node may be given the same list, its own address included.
func peerRoutes(cfg NATSConfig) int {
	if cfg.ClusterListen == "" {
		return 0 // external NATS: its servers route among themselves
	}
	self := map[string]bool{cfg.ClusterListen: true}
	if cfg.ClusterAdvertise != "" {
		self[cfg.ClusterAdvertise] = true
	}
	peers, named := map[string]bool{}, false
	for _, s := range cfg.Routes {
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Host == "":
		case self[u.Host]:
			named = true
		default:
			peers[u.Host] = true
		}
	}
	if !named && len(peers) > 0 {
		// The list may name this node by an address it cannot tell is its
		// own (a host name, or the IP of a 0.0.0.0 listener): wait for one
		// route fewer rather than for a route to itself that never forms.
		return len(peers) - 1
	}
	return len(peers)
}

// Routes is the number of other nodes the embedded NATS is routed to (0 with external NATS).
func (r *NATS) Routes() int {
	if r.ns == nil {
		return 0
	}
	return r.ns.NumRemotes()
}

// RouterStats are the cluster router's counters.
type RouterStats struct {
	Published, Received, Dropped, Unsent uint64
	// Malformed counts envelopes from other nodes that did not decode.
	Malformed uint64
	Interests int
}

// Stats returns the router's counters.
func (r *NATS) Stats() RouterStats {
	return RouterStats{Published: r.published.Load(), Received: r.received.Load(),
		Dropped: r.dropped.Load(), Unsent: r.unsent.Load(), Malformed: r.malformed.Load(), Interests: r.Interests()}
}

// Close implements Router: it flushes what is published, disconnects and
// stops embedded NATS.
func (r *NATS) Close() error {
	select {
	case <-r.done:
		return nil
	default:
	}
	close(r.done)
	if r.nc.IsConnected() {
		_ = r.nc.FlushTimeout(2 * time.Second)
	}
	r.nc.Close()
	r.shutdownEmbedded()
	return nil
}

func (r *NATS) shutdownEmbedded() {
	if r.ns != nil {
		r.ns.Shutdown()
		r.ns.WaitForShutdown()
	}
}

// holdMax bounds the envelopes whose flushes wait for the inbox to empty,
// so a steady stream that never empties it still reaches the sockets.
const holdMax = 256

// receiveLoop hands envelopes to the node one at a time, in arrival order;
// flushes are held until the inbox is empty (or holdMax envelopes), so a
// burst costs one write per connection.
func (r *NATS) receiveLoop() {
	hold := &wire.Hold{}
	var env Envelope
	var d cluster.Decoder
	held := 0
	for {
		var m *nats.Msg
		select {
		case m = <-r.inbox:
		case <-r.done:
			hold.Release()
			return
		}
		r.received.Add(1)
		r.handle(m, &d, &env, hold)
		if held++; held >= holdMax || len(r.inbox) == 0 {
			hold.Release()
			held = 0
		}
	}
}

func (r *NATS) handle(m *nats.Msg, d *cluster.Decoder, env *Envelope, hold *wire.Hold) {
	r.mu.Lock()
	in := r.interests[m.Subject]
	r.mu.Unlock()
	var t Topic
	var key string
	switch {
	case in != nil:
		t, key = in.topic, in.key
	case m.Subject == r.allSubj:
		t = TopicAll
	case m.Subject == r.nodeSubj:
		t, key = TopicNode, r.cfg.NodeID
	default:
		return // an interest dropped while this was in flight
	}
	msg, err := d.Decode(m.Data)
	if err != nil {
		// Counted, not logged per envelope: a node sending garbage would
		// flood the log.
		r.malformed.Add(1)
		return
	}
	env.Topic, env.Key, env.Msg = t, key, msg
	if msg.GetUserOnlineQuestion() != nil {
		if t == TopicUser && m.Reply != "" && r.node.HasUser(key) {
			answer := r.userOnlineA
			if cluster.Legacy(m.Data) {
				answer = []byte(r.cfg.NodeID) // as the previous release answers
			}
			_ = m.Respond(answer)
		}
		return
	}
	if m.Reply != "" {
		// The previous release's other questions want answers in its
		// layout: during an upgrade its admin reads miss this node.
		if cluster.Legacy(m.Data) {
			return
		}
		if answer, ok := r.node.Answer(env); ok {
			if b, err := cluster.Encode(answer); err == nil {
				_ = m.Respond(b)
			}
		}
		return
	}
	if tp := msg.Traceparent; tp != "" && r.cfg.Tracer != nil {
		r.receiveTraced(env, hold, tp)
		return
	}
	r.node.Receive(env, hold)
}

// receiveTraced is Node.Receive of an envelope a sampled span sent: a span
// of this node's delivery continues that trace.
func (r *NATS) receiveTraced(env *Envelope, hold *wire.Hold, tp string) {
	_, sp := r.cfg.Tracer.Start(tracing.Remote(context.Background(), tp), "parley.cluster.receive", trace.SpanKindConsumer,
		attribute.String("parley.node", r.cfg.NodeID), attribute.Int("parley.topic", int(env.Topic)))
	r.node.Receive(env, hold)
	if sp != nil {
		sp.End()
	}
}
