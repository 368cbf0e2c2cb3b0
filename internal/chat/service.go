// Package chat is Parley's messaging logic: it authenticates sessions, carries
// sends through de-dup, sequencing and durable storage (group commit) before
// ACKing them, delivers stored messages through the Router, keeps cursors and
// receipts, and answers sync and history queries. It implements
// gateway.Handler.
package chat

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/e2ee"
	"github.com/parleyim/parley/internal/gateway"
	"github.com/parleyim/parley/internal/limit"
	"github.com/parleyim/parley/internal/metrics"
	"github.com/parleyim/parley/internal/rich"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/tracing"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Config tunes the messaging service. Zero values take the stated defaults.
// Those serve direct users of the package: a Parley server (package server)
// passes every field that has a configuration key explicitly, with the
// defaults of server.Config, so only MaxBatch, QueueDepth and CommitTimeout
// take their defaults here.
type Config struct {
	// NodeID distinguishes message ids made by different nodes (0-1023). Default 0.
	NodeID uint16
	// HeartbeatSeconds is told to clients in AuthOk. Default 30.
	HeartbeatSeconds uint32
	// MaxFrameBytes is told to clients in AuthOk. Default 64 KiB.
	MaxFrameBytes uint32
	// MaxBatch is the most sends committed to storage in one batch. Default 1024.
	MaxBatch int
	// QueueDepth is how many sends may wait for the committer before senders
	// are held back. Default 16384.
	QueueDepth int
	// MaxGroupMembers is the largest group. Default 100,000.
	MaxGroupMembers int
	// RecallWindow is how long a sender may recall their message. Default 2 minutes.
	RecallWindow time.Duration
	// ReceiptListMax: groups up to this many members list who read a message
	// (ReadCounts); larger groups get counts only. Default 500.
	ReceiptListMax int
	// GroupCacheSize bounds the groups kept in memory; past it a tenth are
	// dropped (and loaded again when next used). Default 65,536.
	GroupCacheSize int
	// DenyStrangers: users may message only their friends (and groups they
	// are in). Default false: anyone may start a 1:1 conversation.
	DenyStrangers bool
	// Search answers message searches (package search); nil: search is
	// off and a Search is answered UNAVAILABLE.
	Search Searcher
	// Retention gives conversations' floors and disappearing timers
	// (retention.go); nil: nothing expires.
	Retention Retention
	// RefuseUnknown: a 1:1 send to a user id without an account is refused
	// with NO_SUCH_USER, and a user who logs in with an app-minted token is
	// given an account (so that they can be messaged). False: such a send
	// waits for the user's first login.
	RefuseUnknown bool
	// RoomClientSend lets clients broadcast to rooms they joined (RoomSend).
	// Default false: only the admin push API broadcasts to rooms.
	RoomClientSend bool
	// SendRate limits each user's sends (Send, RoomSend, Edit) across their
	// sessions; past it a send is refused with TOO_MANY_REQUESTS. Zero: unlimited.
	SendRate limit.Rate
	// RequestRate limits each user's requests of any kind but ping and
	// delivered/read ACKs. Zero: unlimited.
	RequestRate limit.Rate
	// MaxUserSessions caps the sessions one user holds on this node (this
	// node only: in a cluster every node counts its own). A login past it
	// is refused with TOO_MANY_REQUESTS and its connection closed; the
	// sessions the login replaces under the kick policy do not count.
	// Zero: unlimited.
	MaxUserSessions int
	// PageBytes bounds one page (sync, history, the conversation list) by
	// the encoded size of what it carries; a page always holds at least one
	// item, so it may pass PageBytes by one message. It must stay well
	// below the per-connection send queue cap. Default 1 MiB.
	PageBytes int
	// ReadMemoryBytes bounds the memory all page reads of the node hold at
	// once; a read that cannot get its share in time is refused with
	// TOO_MANY_REQUESTS. Default 64 MiB.
	ReadMemoryBytes int64
	// UserStorageQuota caps the payload bytes a user may store (the
	// messages they sent, as counted by store.UserStorage): a send that
	// would go past it is refused with QUOTA_EXCEEDED. Concurrent sends may
	// pass it by the sends still being stored. Zero: unlimited.
	UserStorageQuota int64
	// CommitTimeout bounds one batch's storage writes (the committer
	// stores many requests' writes together, so no one request's context
	// can bound them): a store that does not answer in time fails the batch,
	// its senders are answered UNAVAILABLE and may retry. Default 10s.
	CommitTimeout time.Duration
	// Events, when set, is told of stored messages, group changes and
	// sessions opening and closing. It is called on the delivery path and
	// must not block (the webhook dispatcher only queues).
	Events func(Event)
	// Notifier, when set, sends offline push notifications and handles
	// the device registrations for them (internal/notify).
	Notifier Notifier
	// Media, when set, resolves the attachments of sends and signs the
	// download URLs of files (internal/media). Unset: a send with
	// attachments and FileUrl are refused with BAD_REQUEST.
	Media Media
	// Moderator, when set, runs the word filter and the app's before-send
	// hooks on what users send, and takes their reports of messages
	// (internal/moderation). Unset: nothing is checked and ReportMessage is
	// refused with BAD_REQUEST.
	Moderator Moderator
	// MaxModerating bounds the writes of this node waiting for the
	// before-send hooks at once; past it a session's frames wait (the
	// connection is held back, as when the committer's queue is full).
	// Default 4096.
	MaxModerating int
	// StreamIdle: a streamed message without an append for this long is
	// stored as incomplete. Default 30s.
	StreamIdle time.Duration
	// MaxStreams bounds the streamed messages open on this node at once
	// (each holds at most MaxFrameBytes of text). Default 1000.
	MaxStreams int
	// E2EE is the MLS Delivery Service (internal/e2ee, docs/e2ee.md);
	// nil: e2ee.New over the store.
	E2EE E2EE
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Tracer, when set, traces sends and logins (tracing.go). Nil: off.
	Tracer *tracing.Tracer
}

// Media is what chat asks of the media service. Whether a user may read a
// file is chat's to decide (the message carrying it); Media only knows
// files and their uploaders.
type Media interface {
	// Attach resolves the attachments uid sends: each must name a complete
	// file uid uploaded. It returns them as the server describes them
	// (the sender's other fields are ignored) and keeps the files.
	Attach(ctx context.Context, uid string, atts []*pb.Attachment) ([]*pb.Attachment, error)
	// AttachValidity is how long an Attach answer holds: a message
	// carrying files not committed within it of the Attach call fails.
	AttachValidity() time.Duration
	// URL signs a download URL of a file (its thumbnail when thumb).
	// With owner set, only that user's files are signed (PERMISSION_DENIED
	// for any other, or none).
	URL(ctx context.Context, fileID string, thumb bool, owner string) (*pb.FileUrlResult, error)
}

// Notifier is told of each stored message (on the node that stored it) and
// of kicked devices, and handles push registrations. Stored and
// DeviceKicked must not block.
type Notifier interface {
	Stored(m *pb.Message)
	Register(ctx context.Context, uid, sessionDevice, tokenID string, r *pb.RegisterPush) error
	Unregister(ctx context.Context, uid, sessionDevice string, r *pb.UnregisterPush) error
	DeviceKicked(uid, kicked, newcomer string)
}

func (c *Config) setDefaults() {
	if c.HeartbeatSeconds == 0 {
		c.HeartbeatSeconds = 30
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 64 << 10
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 16384
	}
	if c.MaxGroupMembers <= 0 {
		c.MaxGroupMembers = 100_000
	}
	if c.RecallWindow <= 0 {
		c.RecallWindow = 2 * time.Minute
	}
	if c.ReceiptListMax <= 0 {
		c.ReceiptListMax = 500
	}
	if c.GroupCacheSize <= 0 {
		c.GroupCacheSize = 65536
	}
	if c.PageBytes <= 0 {
		c.PageBytes = 1 << 20
	}
	if c.ReadMemoryBytes <= 0 {
		c.ReadMemoryBytes = 64 << 20
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 10 * time.Second
	}
	if c.MaxModerating <= 0 {
		c.MaxModerating = 4096
	}
	if c.StreamIdle <= 0 {
		c.StreamIdle = 30 * time.Second
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Limits on client-supplied fields.
const (
	maxClientMsgID = 64
	maxContentType = 64
	// maxConversationID bounds conversation and user ids a request names.
	maxConversationID = 256
	defaultPageLimit  = 100
	maxPageLimit      = 1000
	// maxHiddenSkips bounds the pages one request reads past hidden messages.
	maxHiddenSkips = 20
)

// Stats are running totals since start.
type Stats struct {
	SendsAccepted   uint64 // messages newly stored
	SendsDuplicate  uint64 // retries answered from de-dup
	SendsFailed     uint64 // sends answered UNAVAILABLE
	Deliveries      uint64 // frames queued on receiving sessions (this node)
	CommitBatches   uint64
	AuthFailures    uint64
	SessionsKicked  uint64
	CommitLatencyNs uint64 // sum over batches, for an average
	RateLimited     uint64 // requests refused by SendRate or RequestRate
	GroupsCached    int    // groups held in memory now (at most Config.GroupCacheSize)
	SessionsRefused uint64 // logins refused by MaxUserSessions
	// CursorsAhead counts syncs from a cursor past the conversation's newest
	// stored seq (stored messages were lost; the seq was raised past it).
	CursorsAhead uint64
	// ClusterMalformed counts envelopes from other nodes dropped because
	// they did not hold what their kind needs.
	ClusterMalformed uint64
	ReadsRefused     uint64 // page reads refused: ReadMemoryBytes was taken
	QuotaRefused     uint64 // sends refused by UserStorageQuota
	Reactions        uint64 // reactions stored (or found already so)
	StreamsOpen      int    // streamed messages being written now
	Searches         uint64 // searches answered
	SearchesRefused  uint64 // searches refused: every search slot was busy and the queue full, or the wait too long
	SearchesQueued   uint64 // searches that waited in the queue for a slot
}

// Service is the messaging service. Create with New, then Start.
type Service struct {
	cfg      Config
	store    store.Store
	router   route.Router
	sessions *session.Registry
	tokens   *auth.Tokens
	log      *slog.Logger
	tr       *tracing.Tracer // nil: tracing off

	sends       chan *pendingSend   // to the committer
	committed   chan committedBatch // committer to deliverer
	spare       chan []*pendingSend // batch slices back for reuse
	delivered   chan struct{}       // closed when deliverLoop has finished
	cursorsDone chan struct{}       // closed when cursorLoop has finished
	cursors     chan store.Cursor   // to the cursor writer
	stop        chan struct{}
	// life is the context of work no request waits for (delivery, cursor
	// and last-seen writes, the cluster's bookkeeping); Stop cancels it.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup
	stopped sync.Once

	closes      recentCloses // users whose sessions were closed lately (handleAuth)
	groups      groupCache
	changeLocks keyLocks    // settings read-modify-write locks (changes.go); logins under MaxUserSessions
	online      onlineIndex // which group members are online here (online.go)
	social      social      // contacts, blocks, typing limits and presence (social.go)
	rooms       roomIndex   // chat rooms (rooms.go)
	cluster     clusterState

	nodeID      string        // cfg.NodeID in decimal: the prefix of this node's session ids
	nextSession atomic.Uint64 // starts at the boot time in µs, so ids stay unique across restarts
	ids         idGen         // used by the committer goroutine only

	sendLimit, requestLimit *limit.Keyed // per user; SetRates changes them
	ackLatency              *metrics.Histogram
	commitLatency           *metrics.Histogram
	reads                   *semaphore.Weighted // Config.ReadMemoryBytes, shared by page reads
	moderating              chan struct{}       // a token per write waiting for the hooks (Config.MaxModerating)
	moderatingBytes         *semaphore.Weighted // their bytes (moderatingBytesMax)
	searchSlots             *semaphore.Weighted // searches running at once (searchSlotCount)
	searchLife              context.Context     // cancelled by Stop: searches in flight end
	searchQueued            atomic.Int64        // searches waiting for a slot (searchQueueMax)
	searchWait              time.Duration       // searchQueueWait; tests shorten or lengthen it
	endSearches             context.CancelFunc
	moderators              sync.WaitGroup  // the goroutines waiting for the hooks
	reacts                  chan *reactReq  // to the reaction writer (rich.go)
	reactsDone              chan reactBatch // reaction writer to reactAnswerLoop
	coalescer               *rich.Coalescer // reaction counts on their way to members
	streams                 *rich.Streams   // streamed messages being written
	mls                     mlsCache        // which groups are encrypted (e2ee.go)
	delivering              []trace.Span    // deliverLoop's delivery spans of the batch (tracing.go)

	stats struct {
		accepted, duplicate, failed, deliveries, batches, authFail, kicked, commitNs, limited, refused, readsRefused, cursorsAhead, quotaRefused, malformed, reactions, searches, searchesRefused, searchesQueued atomic.Uint64
	}
}

// Replier receives the answers to one session's requests: its connection,
// or, for a request made over HTTP, the handler waiting for its reply.
type Replier interface {
	SendFrame(f *pb.ServerFrame) bool
}

// connState is the per-connection state kept in gateway.Conn.Value.
type connState struct {
	sess *session.Session
}

// pendingSend is one write waiting for the committer: a message, or a
// change stored with its event (change set). When after is set, deliverLoop
// calls it (in seq order) instead of the default ACK and delivery.
type pendingSend struct {
	conn   Replier
	sessID string
	reqID  uint64
	msg    *pb.Message
	change *store.Change
	// check, set for a change of one message, is run by the committer on
	// the message as stored right before the change (commitChange).
	check func(m *pb.Message) error
	after func(res store.AppendResult, err error)
	start int64 // unix ns when submitted, for the ACK latency histogram
	// attachedAt (unix ns, 0: no files) is taken before the message's
	// files were attached: see Media.AttachValidity.
	attachedAt int64
	// preview is the reply preview of msg, kept out of the store (see
	// checkRichSend) and put back for delivery.
	preview *pb.MessagePreview
	// trace is the send's spans when it is traced and sampled, else nil.
	trace *sendTrace
}

// New builds the service; it does nothing until Start.
func New(cfg Config, st store.Store, rt route.Router, reg *session.Registry, tokens *auth.Tokens) *Service {
	cfg.setDefaults()
	if cfg.E2EE == nil {
		cfg.E2EE = e2ee.New(st)
	}
	s := &Service{
		cfg: cfg, store: st, router: rt, sessions: reg, tokens: tokens, log: cfg.Logger, tr: cfg.Tracer,
		sends:       make(chan *pendingSend, cfg.QueueDepth),
		committed:   make(chan committedBatch, 2),
		spare:       make(chan []*pendingSend, 4),
		delivered:   make(chan struct{}),
		cursorsDone: make(chan struct{}),
		cursors:     make(chan store.Cursor, 4096),
		stop:        make(chan struct{}),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.reads = semaphore.NewWeighted(cfg.ReadMemoryBytes)
	s.moderating = make(chan struct{}, cfg.MaxModerating)
	s.moderatingBytes = semaphore.NewWeighted(moderatingBytesMax)
	s.searchSlots = semaphore.NewWeighted(searchSlotCount)
	s.searchWait = searchQueueWait
	s.searchLife, s.endSearches = context.WithCancel(context.Background())
	s.ids.node = uint64(cfg.NodeID & 1023)
	s.nodeID = strconv.Itoa(int(cfg.NodeID))
	s.nextSession.Store(uint64(time.Now().UnixMicro()))
	s.sendLimit, s.requestLimit = limit.NewVar(cfg.SendRate), limit.NewVar(cfg.RequestRate)
	s.ackLatency = metrics.NewHistogram(metrics.LatencyBuckets)
	s.commitLatency = metrics.NewHistogram(metrics.LatencyBuckets)
	s.groups.m = make(map[string]*groupState)
	s.changeLocks.m = make(map[any]chan struct{})
	s.online.init()
	s.initSocial()
	s.rooms.init()
	s.cluster.users = make(map[string]*userInterest)
	s.cluster.peers = make(map[string]time.Time)
	s.cluster.loading = make(map[string][]remoteGroupFrame)
	s.rooms.watch = func(name string, on bool) { s.watch(route.TopicRoom, name, on) }
	s.reacts = make(chan *reactReq, cfg.QueueDepth)
	s.reactsDone = make(chan reactBatch, 2)
	s.coalescer = rich.NewCoalescer(reactionFlushEvery, reactionPendingMax, s.announceReactions)
	s.streams = rich.NewStreams(rich.StreamLimits{MaxOpen: cfg.MaxStreams, MaxPerUser: maxStreamsPerUser,
		MaxBytes: int(cfg.MaxFrameBytes), Idle: cfg.StreamIdle, MaxLife: streamMaxLife}, s.streamExpired)
	return s
}

// Start runs the committer and the cursor writer.
func (s *Service) Start() {
	s.wg.Add(7)
	go s.commitLoop()
	go s.deliverLoop()
	go s.cursorLoop()
	go s.reactLoop()
	go s.reactAnswerLoop()
	go func() { defer s.wg.Done(); s.coalescer.Run(s.stop) }()
	go func() { defer s.wg.Done(); s.streams.Run(time.Second, s.stop) }()
	if s.router.Clustered() {
		s.wg.Add(1)
		go s.peerLoop()
	}
}

// Stop commits what is queued and stops the background loops. Call it after
// the gateway stopped taking frames. When it returns, the service's
// background work is cancelled: if ctx ended first, store calls still hung
// in the loops return then.
func (s *Service) Stop(ctx context.Context) error {
	// Writes still waiting for the hooks are queued (or refused) before
	// the committer drains its queue; their connections have closed, so
	// the hooks' calls end with them. Open streams are stored first, as
	// incomplete, so they are among those writes.
	s.streams.EndAll()
	s.moderators.Wait()
	// Searches in flight end now (they answer UNAVAILABLE) and are waited
	// for: each holds a slot until it has answered.
	s.endSearches()
	if s.searchSlots.Acquire(ctx, searchSlotCount) == nil {
		defer s.searchSlots.Release(searchSlotCount)
	}
	s.stopped.Do(func() { close(s.stop) })
	defer s.endLife()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns running totals.
func (s *Service) Stats() Stats {
	return Stats{
		SendsAccepted: s.stats.accepted.Load(), SendsDuplicate: s.stats.duplicate.Load(),
		SendsFailed: s.stats.failed.Load(), Deliveries: s.stats.deliveries.Load() + s.sessions.Delivered(),
		CommitBatches: s.stats.batches.Load(), AuthFailures: s.stats.authFail.Load(),
		SessionsKicked: s.stats.kicked.Load(), CommitLatencyNs: s.stats.commitNs.Load(),
		RateLimited: s.stats.limited.Load(), SessionsRefused: s.stats.refused.Load(),
		CursorsAhead: s.stats.cursorsAhead.Load(),
		GroupsCached: s.groupsCached(), ReadsRefused: s.stats.readsRefused.Load(),
		QuotaRefused: s.stats.quotaRefused.Load(), ClusterMalformed: s.stats.malformed.Load(),
		Reactions: s.stats.reactions.Load(), StreamsOpen: s.streams.Len(),
		Searches: s.stats.searches.Load(), SearchesRefused: s.stats.searchesRefused.Load(), SearchesQueued: s.stats.searchesQueued.Load(),
	}
}

// Latencies returns the histograms of ACK latency (a send queued to its
// SendAck written, storage included) and of storage commits (one per batch).
func (s *Service) Latencies() (ack, commit metrics.Snapshot) {
	return s.ackLatency.Snapshot(), s.commitLatency.Snapshot()
}

func (s *Service) watch(t route.Topic, key string, on bool) {
	if on {
		s.router.Watch(t, key)
	} else {
		s.router.Unwatch(t, key)
	}
}

// isOnline reports whether uid has a session on this node.
func (s *Service) isOnline(uid string) bool { return len(s.sessions.Sessions(uid)) > 0 }

// Sessions returns the session registry (for the API's session listing).
func (s *Service) Sessions() *session.Registry { return s.sessions }

// HandleFrame implements gateway.Handler.
func (s *Service) HandleFrame(c *gateway.Conn, f *pb.ClientFrame) {
	st, _ := c.Value().(*connState)
	if st == nil || st.sess == nil {
		s.handleUnauthenticated(c, f)
		return
	}
	if err := s.dispatch(c.Context(), c, st.sess, f); err != nil {
		if err == errUnknownFrame {
			c.SendFrame(errorFrame(f.Id, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME))
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR, "unknown frame")
			return
		}
		s.replyErr(c, f.Id, err)
	}
}

// dispatch runs one request of an authenticated session under ctx (its
// connection's, or the HTTP request's). A handler answers success itself; an
// error it returns is answered by HandleFrame.
func (s *Service) dispatch(ctx context.Context, c Replier, sess *session.Session, f *pb.ClientFrame) error {
	id := f.Id
	if !s.allow(sess, f) {
		s.stats.limited.Add(1)
		return errTooMany
	}
	if err := s.mlsGate(ctx, sess, f); err != nil {
		return err
	}
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: time.Now().UnixMilli()}}})
		return nil
	case *pb.ClientFrame_Send:
		return s.handleSend(ctx, c, sess, id, b.Send)
	case *pb.ClientFrame_Delivered:
		return s.okOr(c, id, s.handleCursor(ctx, sess, b.Delivered.ConversationId, b.Delivered.Seq, false))
	case *pb.ClientFrame_Read:
		return s.okOr(c, id, s.handleCursor(ctx, sess, b.Read.ConversationId, b.Read.Seq, true))
	case *pb.ClientFrame_SyncConversations:
		list, err := s.ConversationList(ctx, sess.UserID, b.SyncConversations.Limit, b.SyncConversations.PageToken)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Conversations{Conversations: list}})
		}
		return err
	case *pb.ClientFrame_SyncMessages:
		q := b.SyncMessages
		page, err := s.SyncMessages(ctx, sess.UserID, q.ConversationId, q.AfterSeq, q.Limit)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Messages{Messages: page}})
		}
		return err
	case *pb.ClientFrame_History:
		q := b.History
		page, err := s.History(ctx, sess.UserID, q.ConversationId, q.BeforeSeq, q.Limit)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Messages{Messages: page}})
		}
		return err
	case *pb.ClientFrame_Auth:
		return errBadRequest // already authenticated

	// Groups (groups.go)
	case *pb.ClientFrame_CreateGroup:
		return s.createGroup(ctx, c, sess, id, b.CreateGroup)
	case *pb.ClientFrame_UpdateGroup:
		return s.updateGroup(ctx, c, sess, id, b.UpdateGroup)
	case *pb.ClientFrame_AddMembers:
		return s.addMembers(ctx, c, sess, id, b.AddMembers)
	case *pb.ClientFrame_RemoveMember:
		return s.removeMember(ctx, c, sess, id, b.RemoveMember)
	case *pb.ClientFrame_JoinGroup:
		return s.joinGroup(ctx, c, sess, id, b.JoinGroup)
	case *pb.ClientFrame_LeaveGroup:
		return s.leaveGroup(ctx, c, sess, id, b.LeaveGroup)
	case *pb.ClientFrame_SetRole:
		return s.setRole(ctx, c, sess, id, b.SetRole)
	case *pb.ClientFrame_MuteMember:
		return s.muteMember(ctx, c, sess, id, b.MuteMember)
	case *pb.ClientFrame_TransferOwnership:
		return s.transferOwnership(ctx, c, sess, id, b.TransferOwnership)
	case *pb.ClientFrame_DissolveGroup:
		return s.dissolveGroup(ctx, c, sess, id, b.DissolveGroup)
	case *pb.ClientFrame_GetGroup:
		return s.getGroup(ctx, c, sess, id, b.GetGroup)
	case *pb.ClientFrame_ListMembers:
		return s.listMembers(ctx, c, sess, id, b.ListMembers)

	// Changing messages, read counts, conversation settings (changes.go)
	case *pb.ClientFrame_Recall:
		return s.recall(ctx, c, sess, id, b.Recall)
	case *pb.ClientFrame_Edit:
		return s.edit(ctx, c, sess, id, b.Edit)
	case *pb.ClientFrame_DeleteForMe:
		return s.deleteForMe(ctx, c, sess, id, b.DeleteForMe)
	case *pb.ClientFrame_ReadCounts:
		return s.readCounts(ctx, c, sess, id, b.ReadCounts)
	case *pb.ClientFrame_SetConversation:
		return s.setConversation(ctx, c, sess, id, b.SetConversation)

	// Contacts, typing, presence (social.go)
	case *pb.ClientFrame_Typing:
		return s.typing(ctx, c, sess, id, b.Typing)
	case *pb.ClientFrame_SubscribePresence:
		return s.subscribePresence(ctx, c, sess, id, b.SubscribePresence)
	case *pb.ClientFrame_UnsubscribePresence:
		return s.unsubscribePresence(ctx, c, sess, id, b.UnsubscribePresence)
	case *pb.ClientFrame_FriendRequest:
		return s.friendRequest(ctx, c, sess, id, b.FriendRequest)
	case *pb.ClientFrame_RespondFriend:
		return s.respondFriend(ctx, c, sess, id, b.RespondFriend)
	case *pb.ClientFrame_RemoveFriend:
		return s.removeFriend(ctx, c, sess, id, b.RemoveFriend)
	case *pb.ClientFrame_ListContacts:
		return s.listContacts(ctx, c, sess, id, b.ListContacts)
	case *pb.ClientFrame_Block:
		return s.block(ctx, c, sess, id, b.Block)
	case *pb.ClientFrame_Unblock:
		return s.unblock(ctx, c, sess, id, b.Unblock)

	// Chat rooms (rooms.go)
	case *pb.ClientFrame_JoinRoom:
		return s.joinRoom(c, sess, id, b.JoinRoom)
	case *pb.ClientFrame_LeaveRoom:
		return s.leaveRoom(c, sess, id, b.LeaveRoom)
	case *pb.ClientFrame_RoomSend:
		return s.roomSend(c, sess, id, b.RoomSend)

	// Offline push notifications (internal/notify)
	case *pb.ClientFrame_RegisterPush:
		if s.cfg.Notifier == nil {
			return errBadRequest
		}
		return s.okOr(c, id, s.cfg.Notifier.Register(ctx, sess.UserID, sessionDevice(sess), sess.TokenID, b.RegisterPush))
	case *pb.ClientFrame_UnregisterPush:
		if s.cfg.Notifier == nil {
			return errBadRequest
		}
		return s.okOr(c, id, s.cfg.Notifier.Unregister(ctx, sess.UserID, sessionDevice(sess), b.UnregisterPush))

	// Media (internal/media)
	case *pb.ClientFrame_FileUrl:
		res, err := s.fileURL(ctx, sess.UserID, b.FileUrl)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_FileUrl{FileUrl: res}})
		}
		return err

	// Moderation (internal/moderation)
	case *pb.ClientFrame_ReportMessage:
		return s.okOr(c, id, s.report(ctx, sess.UserID, b.ReportMessage))

	// Rich messages (rich.go)
	case *pb.ClientFrame_React:
		return s.react(ctx, c, sess, id, b.React)
	case *pb.ClientFrame_SyncReactions:
		return s.syncReactions(ctx, c, sess, id, b.SyncReactions)
	case *pb.ClientFrame_Pin:
		return s.pin(ctx, c, sess, id, b.Pin)
	case *pb.ClientFrame_SetDisappearing:
		return s.setDisappearing(ctx, c, sess, id, b.SetDisappearing)
	case *pb.ClientFrame_ThreadHistory:
		return s.threadHistory(ctx, c, sess, id, b.ThreadHistory)
	case *pb.ClientFrame_Search:
		return s.searchMessages(ctx, c, sess, id, b.Search)
	case *pb.ClientFrame_StreamOpen:
		return s.streamOpen(ctx, c, sess, id, b.StreamOpen)
	case *pb.ClientFrame_StreamAppend:
		return s.streamAppend(ctx, c, sess, id, b.StreamAppend)
	case *pb.ClientFrame_StreamFinish:
		return s.streamFinish(ctx, c, sess, id, b.StreamFinish)
	}
	if handled, err := s.dispatchE2EE(ctx, c, sess, f); handled {
		return err
	}
	return errUnknownFrame
}

// SetRates changes SendRate and RequestRate while the service runs, for
// every session, connected or not (a configuration reload).
func (s *Service) SetRates(send, request limit.Rate) {
	s.sendLimit.SetRate(send)
	s.requestLimit.SetRate(request)
}

// allow applies the per-user rates to one request. Pings and cursor ACKs are
// never limited: refusing them would only make clients resend more.
func (s *Service) allow(sess *session.Session, f *pb.ClientFrame) bool {
	if sess.System {
		return true // the admin API, limited per API key instead
	}
	switch f.Body.(type) {
	case *pb.ClientFrame_Ping, *pb.ClientFrame_Delivered, *pb.ClientFrame_Read:
		return true
	case *pb.ClientFrame_Send, *pb.ClientFrame_RoomSend, *pb.ClientFrame_Edit, *pb.ClientFrame_MlsCommit:
		if !s.sendLimit.Allow(sess.UserID) {
			return false
		}
	}
	return s.requestLimit.Allow(sess.UserID)
}

// okOr answers Ok when err is nil (and a reply is wanted), else returns err.
func (s *Service) okOr(c Replier, id uint64, err error) error {
	if err == nil {
		s.replyOK(c, id)
	}
	return err
}

// replyOK answers a request that wants a reply (id != 0) with Ok.
func (s *Service) replyOK(c Replier, id uint64) {
	if id != 0 {
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Ok{Ok: &pb.Ok{}}})
	}
}

func (s *Service) replyErr(c Replier, id uint64, err error) {
	var ce *Error
	if !errors.As(err, &ce) {
		s.log.Error("request failed", "err", err)
		ce = errInternal
	}
	c.SendFrame(ce.Frame(id))
}

func (s *Service) handleUnauthenticated(c *gateway.Conn, f *pb.ClientFrame) {
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: time.Now().UnixMilli()}}})
	case *pb.ClientFrame_Auth:
		s.handleAuth(c, f.Id, b.Auth)
	default:
		s.stats.authFail.Add(1)
		c.SendFrame(errorFrame(f.Id, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, "authenticate first")
	}
}

func (s *Service) handleAuth(c *gateway.Conn, id uint64, a *pb.Auth) {
	var refused pb.ErrorCode // the login's span's outcome
	var sessID string
	if ls := s.startLogin(c.Context()); ls != nil {
		defer func() { endLogin(ls, refused, sessID) }()
	}
	fail := func(code pb.ErrorCode) {
		refused = code
		s.stats.authFail.Add(1)
		c.SendFrame(errorFrame(id, code))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, "authentication failed")
	}
	if !auth.ValidDeviceField(a.DeviceId) || !auth.ValidDeviceField(a.DeviceType) {
		fail(pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
		return
	}
	authStart := time.Now()
	claims, err := s.Authenticate(c.Context(), a.Token)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			fail(ce.Code)
		} else {
			fail(pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED)
		}
		return
	}
	sess := &session.Session{
		ID:           s.nodeID + "-" + strconv.FormatUint(s.nextSession.Add(1), 10),
		UserID:       claims.UserID,
		DeviceID:     a.DeviceId,
		DeviceType:   a.DeviceType,
		TokenID:      claims.TokenID,
		TokenExpires: claims.ExpiresAt,
		ShadowMuted:  claims.ShadowMuted,
		Conn:         c,
		Started:      time.Now(),
	}
	admitted := func() {}
	if s.cfg.MaxUserSessions > 0 {
		// From the count to Add, no other login of this user may pass the
		// check (Remove and kicks only lower the count meanwhile).
		k := admitLockKey{uid: sess.UserID}
		if !s.changeLocks.lock(k, changeLockWait) {
			fail(pb.ErrorCode_ERROR_CODE_UNAVAILABLE)
			return
		}
		admitted = func() { s.changeLocks.unlock(k) }
		if s.sessions.Kept(sess) >= s.cfg.MaxUserSessions {
			admitted()
			refused = pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS
			s.stats.refused.Add(1)
			c.SendFrame(errorFrame(id, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS))
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_TOO_MANY_REQUESTS, "too many sessions for this user")
			return
		}
	}
	c.SetValue(&connState{sess: sess})
	sessID = sess.ID
	c.SetAuthenticated()
	// Before AuthOk: the client syncs right after it, so interests must be
	// in place by then or a message stored after that sync could miss it.
	s.clusterOpened(sess)
	// AuthOk is queued before the registry can route messages to this
	// session, so it is always the first frame the client reads after its
	// Auth; its flush waits until the session is registered, so whatever the
	// client does once it has AuthOk (an admin kicking that session id, a
	// message to it through another node) finds the session.
	hold := &wire.Hold{}
	c.SendHeld(wire.NewOutbound(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_AuthOk{AuthOk: &pb.AuthOk{
		UserId: sess.UserID, SessionId: sess.ID, ServerTime: time.Now().UnixMilli(),
		HeartbeatSeconds: s.cfg.HeartbeatSeconds, MaxFrameBytes: s.cfg.MaxFrameBytes,
		ProtocolVersion: wire.ProtocolVersion,
	}}}), hold)
	kicked := s.sessions.Add(sess)
	hold.Release()
	admitted()
	if s.log.Enabled(context.Background(), slog.LevelDebug) { // no arguments built at info
		s.log.Debug("session opened", "session", sess.ID, "user", sess.UserID, "device", sess.DeviceID, "device_type", sess.DeviceType)
	}
	for _, old := range kicked {
		s.stats.kicked.Add(1)
		old.Conn.Close(pb.DisconnectCode_DISCONNECT_CODE_KICKED, "signed in on another device of the same type")
		s.deviceKicked(old, sess.DeviceID)
	}
	s.clusterKick(sess)
	if s.closes.since(sess.UserID, authStart) {
		// The user's sessions were closed (a ban, revoked tokens) after
		// this login read its token's standing and before it registered:
		// that close could not see it. Check again.
		if _, err := s.Authenticate(c.Context(), a.Token); err != nil {
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "account changed")
		}
	}
	s.online.onOpen(sess.UserID)
	s.sessionOpened(sess)
}

// admitLockKey serializes one user's logins on this node in changeLocks
// while MaxUserSessions is checked.
type admitLockKey struct{ uid string }

// Authenticate verifies a token and checks it has not been revoked, that the
// user is not disabled, and that the token is not older than the user's token epoch.
func (s *Service) Authenticate(ctx context.Context, token string) (auth.Claims, error) {
	claims, err := s.tokens.Verify(token)
	if err != nil || !auth.ValidUserID(claims.UserID) {
		return auth.Claims{}, errUnauth
	}
	if claims.TokenID != "" {
		revoked, err := s.store.TokenRevoked(ctx, claims.TokenID)
		if err != nil {
			return auth.Claims{}, errUnavail
		}
		if revoked {
			return auth.Claims{}, errUnauth
		}
	}
	u, err := s.store.GetUser(ctx, claims.UserID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Users of an app that mints its own tokens need no record here,
		// unless sends to users without one are refused: then the first
		// login makes one, so that others can message them.
		if s.cfg.RefuseUnknown {
			s.recordAppUser(ctx, claims.UserID)
		}
	case err != nil:
		return auth.Claims{}, errUnavail
	case u.Disabled || claims.Epoch < u.TokenEpoch:
		return auth.Claims{}, errUnauth
	default:
		claims.ShadowMuted = u.ShadowMuted
	}
	return claims, nil
}

// recordAppUser gives a user of an app-minted token a password-less account
// record, like the admin API's token minting does. Best effort: a record
// that cannot be made (its name is taken in another case, a store fault)
// only means others cannot message the user yet; the login goes on.
func (s *Service) recordAppUser(ctx context.Context, id string) {
	key, _ := auth.NormalizeUsername(id)
	err := s.store.CreateUser(ctx, store.User{ID: id, NameKey: key, CreatedAt: time.Now()})
	if err != nil && !errors.Is(err, store.ErrExists) {
		s.log.Warn("account record for an app-minted token", "user", id, "err", err)
	}
}

// HandleClose implements gateway.Handler.
func (s *Service) HandleClose(c *gateway.Conn, code pb.DisconnectCode) {
	if st, _ := c.Value().(*connState); st != nil && st.sess != nil {
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("session closed", "session", st.sess.ID, "user", st.sess.UserID, "device", st.sess.DeviceID, "code", code.String())
		}
		s.sessions.Remove(st.sess)
		s.rooms.leaveAll(st.sess)
		s.online.onClose(st.sess.UserID, s.isOnline)
		s.clusterClosed(st.sess)
		s.sessionClosed(st.sess)
	}
}

func (s *Service) handleSend(ctx context.Context, c Replier, sess *session.Session, reqID uint64, m *pb.Send) error {
	if s.tr == nil {
		return s.send(ctx, c, sess, reqID, m, nil)
	}
	ctx, st := s.startSend(ctx, m)
	err := s.send(ctx, c, sess, reqID, m, st)
	if err != nil {
		st.refused(err)
	}
	return err
}

// send is handleSend with the send's trace (nil: not traced).
func (s *Service) send(ctx context.Context, c Replier, sess *session.Session, reqID uint64, m *pb.Send, st *sendTrace) error {
	var attachedAt int64
	if len(m.Attachments) > 0 {
		attachedAt = time.Now().UnixNano()
	}
	msg, err := s.buildMessage(ctx, sess.UserID, m)
	if err != nil {
		return err
	}
	if err := s.checkQuota(ctx, sess.UserID, len(m.Payload)); err != nil {
		return err
	}
	msg.SenderOnly = sess.ShadowMuted
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, msg: msg, start: time.Now().UnixNano(), attachedAt: attachedAt, trace: st}
	if s.cfg.Moderator != nil {
		return s.moderateSend(ctx, sess, p)
	}
	if !s.submit(ctx, p) {
		return errUnavail
	}
	return nil
}

// buildMessage validates a Send from uid and turns it into the message to store.
func (s *Service) buildMessage(ctx context.Context, uid string, m *pb.Send) (*pb.Message, error) {
	if len(m.ClientMsgId) == 0 || len(m.ClientMsgId) > maxClientMsgID {
		return nil, errBadRequest
	}
	if len(m.ContentType) > maxContentType {
		return nil, errTooLarge
	}
	if len(m.Payload) > int(s.cfg.MaxFrameBytes) {
		return nil, errTooLarge
	}
	if err := checkSearchText(m.SearchText); err != nil {
		return nil, err
	}
	msg := &pb.Message{
		From:        uid,
		ClientMsgId: m.ClientMsgId,
		ContentType: m.ContentType,
		Payload:     m.Payload,
		Kind:        pb.MessageKind_MESSAGE_KIND_NORMAL,
		SearchText:  m.SearchText,
	}
	if err := s.checkSendTarget(ctx, uid, m, msg); err != nil {
		return nil, err
	}
	if err := s.checkMLSSend(ctx, msg); err != nil {
		return nil, err
	}
	if err := s.checkRichSend(ctx, uid, msg, m.ReplyTo, m.ThreadRoot, m.Mentions, m.MentionAll); err != nil {
		return nil, err
	}
	// Resolved after the recipient is checked: a refused send keeps no file.
	if len(m.Attachments) > 0 {
		if s.cfg.Media == nil {
			return nil, errBadRequest
		}
		if len(m.Attachments) > maxAttachments {
			return nil, errTooLarge
		}
		atts, err := s.cfg.Media.Attach(ctx, uid, m.Attachments)
		if err != nil {
			return nil, err
		}
		msg.Attachments = atts
	}
	return msg, nil
}

// MaxSearchText bounds Send.search_text and Edit.search_text, in bytes.
const MaxSearchText = 4096

// checkSearchText validates the plain text an app gives for search.
func checkSearchText(t string) error {
	switch {
	case len(t) > MaxSearchText:
		return errTooLarge
	case !utf8.ValidString(t):
		return errBadRequest
	}
	return nil
}

// maxAttachments bounds the files of one message.
const maxAttachments = 10

// checkSendTarget checks that uid may send m to its recipient or
// conversation and sets msg's conversation (and recipient).
func (s *Service) checkSendTarget(ctx context.Context, uid string, m *pb.Send, msg *pb.Message) error {
	to := m.To
	switch {
	case to != "" && m.ConversationId != "":
		return errBadRequest
	case to != "":
		if !auth.ValidUserID(to) {
			return errBadRequest
		}
	case isGroup(m.ConversationId):
		if err := s.maySendToGroup(ctx, uid, m.ConversationId); err != nil {
			return err
		}
		msg.ConversationId = m.ConversationId
		return nil
	case m.ConversationId != "":
		peer, ok := directPeer(m.ConversationId, uid)
		if !ok {
			return errDenied
		}
		to = peer
	default:
		return errBadRequest
	}
	if err := s.mayMessage(ctx, uid, to); err != nil {
		return err
	}
	msg.ConversationId = DirectID(uid, to)
	msg.To = to
	return nil
}

// commitLoop is the single committer: it takes every send waiting, stores the
// batch durably in one Append, and hands the results to deliverLoop, which
// ACKs and delivers them while the next batch is being stored. One committer
// and one deliverer per node, each working in batch order, keep
// per-conversation delivery order equal to seq order.
func (s *Service) commitLoop() {
	defer s.wg.Done()
	defer close(s.committed)
	for {
		var first *pendingSend
		select {
		case first = <-s.sends:
		case <-s.stop:
			// Commit what is still queued, then leave.
			select {
			case first = <-s.sends:
			default:
				return
			}
		}
		batch := append(s.takeBatch(), first)
	drain:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case p := <-s.sends:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		s.committed <- s.commit(batch)
	}
}

// committedBatch is a stored (or failed) batch on its way to deliverLoop.
type committedBatch struct {
	sends []*pendingSend
	res   []store.AppendResult
	errs  []error // per send
}

// takeBatch returns an empty batch slice, reusing one deliverLoop is done with.
func (s *Service) takeBatch() []*pendingSend {
	select {
	case b := <-s.spare:
		return b[:0]
	default:
		return make([]*pendingSend, 0, s.cfg.MaxBatch)
	}
}

func (s *Service) commit(batch []*pendingSend) committedBatch {
	now := time.Now()
	// The batch's own deadline: its writes serve many requests, and one
	// that has gone does not cancel the others. Not derived from s.life:
	// Stop cancels that only after the committer has finished, and a child
	// of it would cost a lock and a map entry in the parent per batch.
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	if s.tr != nil {
		s.traceCommit(batch)
	}
	ms := now.UnixMilli()
	res := make([]store.AppendResult, len(batch))
	errs := make([]error, len(batch))
	// Plain messages go to the store in runs of one Append; a change is
	// applied on its own, in its place, so seqs follow the queue order.
	run := make([]*pb.Message, 0, len(batch))
	runStart := 0
	flush := func(end int) {
		if len(run) == 0 {
			return
		}
		r, err := s.store.Append(ctx, run)
		if errors.Is(err, store.ErrCorrupt) && len(run) > 1 {
			// Damaged storage under one conversation must not fail the
			// others batched with it: store them one by one.
			for i, m := range run {
				one, err := s.store.Append(ctx, []*pb.Message{m})
				if err != nil {
					errs[runStart+i] = err
				} else {
					res[runStart+i] = one[0]
				}
			}
			run = run[:0]
			return
		}
		for i := runStart; i < end; i++ {
			if err != nil {
				errs[i] = err
			} else {
				res[i] = r[i-runStart]
			}
		}
		run = run[:0]
	}
	for i, p := range batch {
		msg := p.msg
		if p.change != nil {
			msg = p.change.Event
		}
		msg.ServerTime = ms
		msg.MessageId = s.ids.next(ms)
		if p.attachedAt != 0 && now.UnixNano()-p.attachedAt > int64(s.cfg.Media.AttachValidity()) {
			// Its files may have been deleted since Attach let them through.
			s.log.Warn("a message's files were attached too long before its commit; answered UNAVAILABLE", "conversation", msg.ConversationId)
			errs[i] = errUnavail
			flush(i)
			continue
		}
		if errs[i] = s.stampExpiry(ctx, msg); errs[i] != nil {
			flush(i) // the run before it keeps its place; this one fails alone
			continue
		}
		if msg.ReplyPreview != nil {
			p.preview, msg.ReplyPreview = msg.ReplyPreview, nil
		}
		if p.change == nil {
			if len(run) == 0 {
				runStart = i
			}
			run = append(run, msg)
			continue
		}
		flush(i)
		if p.check != nil {
			// Read after the writes before it: see commitChange.
			if errs[i] = s.checkChange(ctx, p); errs[i] != nil {
				continue
			}
		}
		res[i], errs[i] = s.store.Apply(ctx, *p.change)
		if errs[i] == nil {
			s.appliedTimer(res[i])
		}
		if p.check != nil && errors.Is(errs[i], store.ErrConflict) {
			errs[i] = errConflict // recalled by another node since checkChange read it
		}
	}
	flush(len(batch))
	if s.tr != nil {
		traceCommitted(batch, res, errs)
	}
	took := time.Since(now)
	s.stats.batches.Add(1)
	s.stats.commitNs.Add(uint64(took))
	s.commitLatency.Observe(took)
	return committedBatch{sends: batch, res: res, errs: errs}
}

// isRefusal reports whether err is an answer for the client (a change's
// check refused it) rather than a storage failure.
func isRefusal(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce.Code != pb.ErrorCode_ERROR_CODE_UNAVAILABLE && ce.Code != pb.ErrorCode_ERROR_CODE_INTERNAL
}

func sendAckFrame(reqID uint64, r store.AppendResult) *pb.ServerFrame {
	m := r.Msg
	return &pb.ServerFrame{Id: reqID, Body: &pb.ServerFrame_SendAck{SendAck: &pb.SendAck{
		ClientMsgId: m.ClientMsgId, ConversationId: m.ConversationId, Seq: m.Seq,
		MessageId: m.MessageId, ServerTime: m.ServerTime, Duplicate: r.Duplicate,
	}}}
}

// deliverMessage pushes a stored message (or event) to the conversation's
// members' online devices, except the sending session.
func (s *Service) deliverMessage(ctx context.Context, m *pb.Message, exceptSession string) {
	s.deliverHeld(ctx, m, exceptSession, nil)
}

// deliverHeld is deliverMessage with flushes deferred to hold.
func (s *Service) deliverHeld(ctx context.Context, m *pb.Message, exceptSession string, hold *wire.Hold) {
	var err error
	if m.SenderOnly {
		err = s.router.DeliverToUsers(ctx, []string{m.From}, newMessageOutbound(senderView(m)), exceptSession, hold)
	} else if isGroup(m.ConversationId) {
		local, joined := s.groupDelivery(m.ConversationId)
		err = s.router.DeliverGroup(ctx, m.ConversationId, local, joined, newMessageOutbound(m), exceptSession, hold)
	} else {
		err = s.router.DeliverToUsers(ctx, []string{m.To, m.From}, newMessageOutbound(m), exceptSession, hold)
	}
	if err != nil {
		// Stored and ACKed: receivers get it by sync; delivery is best effort.
		s.deliveryFailed("message", err)
	}
}

// submit queues a write for the committer; false when the service is
// stopping, or cut off from the cluster (a write others cannot hear of would
// be acknowledged but not delivered: the sender is told to retry instead),
// or when ctx (the request's) ends while the queue is full. Once queued the
// write no longer depends on ctx: the committer stores it even if its
// client has gone (a retry with the same client message id finds it).
func (s *Service) submit(ctx context.Context, p *pendingSend) bool {
	if s.router.Ready() != nil {
		return false
	}
	// The queue has room almost always: a send then costs one channel send,
	// not a three-way select.
	select {
	case s.sends <- p:
		return true
	default:
	}
	select {
	case s.sends <- p:
		return true
	case <-s.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// deliverLoop ACKs each stored message to its sender and delivers it, in batch order.
func (s *Service) deliverLoop() {
	defer s.wg.Done()
	defer close(s.delivered)
	ctx := s.life
	// Deliveries of one batch are held and flushed together, so a
	// connection that gets several of the batch's messages gets one write.
	hold := &wire.Hold{}
	for cb := range s.committed {
		now := time.Now().UnixNano() // one clock read per batch for ACK latencies
		for i, r := range cb.res {
			p := cb.sends[i]
			if err := cb.errs[i]; err != nil {
				if p.check == nil || !isRefusal(err) {
					s.stats.failed.Add(1)
				}
				if p.trace != nil {
					p.trace.end(err)
				}
				if p.after != nil {
					p.after(r, err)
					continue
				}
				if errors.Is(err, store.ErrCorrupt) {
					// Retrying cannot help: say so, and leave it to the operator.
					s.log.Error("damaged storage; send answered INTERNAL", "conversation", p.msg.ConversationId, "err", err)
					p.conn.SendFrame(errorFrame(p.reqID, pb.ErrorCode_ERROR_CODE_INTERNAL))
					continue
				}
				if !errors.Is(err, store.ErrNoSpace) && err != errUnavail { // the store logs disk-space transitions once; commit logged the other
					s.log.Warn("store failed; send answered UNAVAILABLE", "err", err)
				}
				p.conn.SendFrame(errorFrame(p.reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
				continue
			}
			if r.Duplicate {
				s.stats.duplicate.Add(1)
			} else {
				s.stats.accepted.Add(1)
				if !r.Msg.SenderOnly { // nobody else is told of it, nor notified
					s.emitStored(r.Msg)
					if s.cfg.Notifier != nil {
						s.cfg.Notifier.Stored(r.Msg)
					}
				}
			}
			if p.start != 0 {
				s.ackLatency.Observe(time.Duration(now - p.start))
			}
			if p.after != nil {
				p.after(r, nil)
				continue
			}
			m := r.Msg
			dctx := ctx
			if p.trace != nil {
				dctx = s.traceAck(ctx, p.trace, r)
			}
			p.conn.SendFrame(sendAckFrame(p.reqID, r))
			if r.Duplicate {
				if p.trace != nil {
					p.trace.acked()
				}
				continue
			}
			if p.preview != nil {
				m.ReplyPreview = p.preview
			}
			s.deliverHeld(dctx, m, p.sessID, hold)
			// Sending implies having read everything before it.
			s.queueCursor(store.Cursor{ConversationID: m.ConversationId, UserID: m.From, Delivered: m.Seq, Read: m.Seq})
			if p.trace != nil {
				p.trace.acked()
			}
		}
		hold.Release()
		if s.tr != nil {
			s.tracedDelivered()
		}
		clear(cb.sends)
		select {
		case s.spare <- cb.sends:
		default:
		}
	}
}

// handleCursor moves the user's delivered (and, for read, read) cursor and
// sends a receipt: in 1:1 to both members' devices; in a group to the user's
// own other devices (members ask for read counts with ReadCounts).
func (s *Service) handleCursor(ctx context.Context, sess *session.Session, conv string, seq uint64, read bool) error {
	if _, err := s.readLimit(ctx, sess.UserID, conv); err != nil {
		return err
	}
	if seq == 0 {
		return errBadRequest
	}
	users := []string{sess.UserID}
	peer, direct := directPeer(conv, sess.UserID)
	if direct {
		// The store clamps the cursor it keeps; the receipt the peer gets
		// now is clamped the same way, so a peer is never shown unsent
		// messages as read. A group receipt goes to the reader's own
		// devices only, so it skips this lookup (one per ACK of every
		// member of a busy group; a query each on PostgreSQL).
		last, err := s.store.LastSeq(ctx, conv)
		if err != nil {
			return storeErr(err)
		}
		if seq = min(seq, last); seq == 0 {
			return nil // nothing to acknowledge yet
		}
		users = append(users, peer)
	}
	c := store.Cursor{ConversationID: conv, UserID: sess.UserID, Delivered: seq}
	rc := &pb.Receipt{ConversationId: conv, UserId: sess.UserID, DeliveredSeq: seq}
	if read {
		c.Read = seq
		rc.ReadSeq = seq
	}
	s.queueCursor(c)
	// The cursor is queued: a receipt that cannot reach another node now
	// is not the client's error (the peer reads cursors at its next sync).
	if err := s.router.DeliverToUsers(ctx, users, newReceiptOutbound(rc), sess.ID, nil); err != nil {
		s.deliveryFailed("receipt", err)
	}
	return nil
}

func (s *Service) queueCursor(c store.Cursor) {
	select {
	case s.cursors <- c:
	case <-s.cursorsDone: // stopped: nothing writes cursors any more
	}
}

// cursorFlushEvery is how often coalesced cursor moves are written. Receipts
// go out at once; the stored cursors serve sync and unread counts, where
// 100 ms does not show, while thousands of receivers ACKing every burst
// would otherwise cost a storage write per burst each.
const cursorFlushEvery = 100 * time.Millisecond

// groupDeliveredFlushTicks: a group member's delivered-only move is written
// every this many cursorFlushEvery ticks (1 s). Nobody else reads a group
// delivered cursor (read counts use read cursors), and in a big group every
// online member moves it with every burst.
const groupDeliveredFlushTicks = 10

// cursorLoop coalesces cursor moves and writes them every few milliseconds, so
// a client ACKing every message costs one write per batch, not per ACK.
//
// It runs until deliverLoop has finished, so cursors moved by the last
// deliveries are written too.
func (s *Service) cursorLoop() {
	defer s.wg.Done()
	defer close(s.cursorsDone)
	pending := make(map[[2]string]store.Cursor)
	slow := make(map[[2]string]store.Cursor) // group delivered-only moves
	tick := time.NewTicker(cursorFlushEvery)
	defer tick.Stop()
	flush := func(m map[[2]string]store.Cursor) {
		if len(m) == 0 {
			return
		}
		list := make([]store.Cursor, 0, len(m))
		for _, c := range m {
			list = append(list, c)
		}
		clear(m)
		if err := s.store.SetCursors(s.life, list); err != nil && !errors.Is(err, store.ErrNoSpace) {
			s.log.Warn("cursor write failed", "n", len(list), "err", err)
		}
	}
	merge := func(m map[[2]string]store.Cursor, k [2]string, c store.Cursor) store.Cursor {
		old := m[k]
		c.Delivered = max(c.Delivered, old.Delivered)
		c.Read = max(c.Read, old.Read)
		return c
	}
	add := func(c store.Cursor) {
		k := [2]string{c.ConversationID, c.UserID}
		if _, ok := pending[k]; !ok && c.Read == 0 && isGroup(c.ConversationID) {
			slow[k] = merge(slow, k, c)
			if len(slow) >= 1<<16 {
				flush(slow)
			}
			return
		}
		if _, ok := slow[k]; ok {
			c = merge(slow, k, c)
			delete(slow, k)
		}
		pending[k] = merge(pending, k, c)
		if len(pending) >= 4096 {
			flush(pending)
		}
	}
	ticks := 0
	for {
		select {
		case c := <-s.cursors:
			add(c)
		case <-tick.C:
			ticks++
			flush(pending)
			if ticks%groupDeliveredFlushTicks == 0 {
				flush(slow)
			}
		case <-s.delivered:
			for {
				select {
				case c := <-s.cursors:
					add(c)
				default:
					flush(pending)
					flush(slow)
					return
				}
			}
		}
	}
}

// checkQuota refuses a send of n payload bytes that would take uid past
// the storage quota. It runs after the permission checks, so its answer
// says nothing about the target.
func (s *Service) checkQuota(ctx context.Context, uid string, n int) error {
	q := s.cfg.UserStorageQuota
	if q <= 0 {
		return nil
	}
	used, err := s.store.UserStorage(ctx, uid)
	if err != nil {
		return storeErr(err)
	}
	if used+uint64(n) > uint64(q) {
		s.stats.quotaRefused.Add(1)
		return errQuota
	}
	return nil
}
