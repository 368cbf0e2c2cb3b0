package server

import (
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/limit"
	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
)

// PushTemplate is a push notification's title and body for one content type.
type PushTemplate struct {
	Title string `yaml:"title"`
	Body  string `yaml:"body"`
}

// ModerationHook is one before-send hook (docs/moderation.md).
type ModerationHook struct {
	// Name identifies the hook in logs and metrics. Default: its URL
	// without credentials.
	Name string `yaml:"name"`
	// URL receives the signed requests (http or https). Required.
	URL string `yaml:"url"`
	// Events: message.direct, message.group, message.edit, group.change.
	// Required.
	Events []string `yaml:"events"`
	// Secret signs the requests. Required.
	Secret string `yaml:"secret"`
	// Policy when the hook does not answer in time, fails or answers
	// nonsense: fail_open (allow) or fail_closed (refuse, the sender may
	// retry). Required.
	Policy string `yaml:"policy"`
	// Timeout per call. Default 500ms.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight bounds the requests in flight to the hook. Default 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxBatch: more than 1 lets one request carry up to this many events
	// (the batch form of docs/moderation.md); 1 sends one event a request.
	// Default 1.
	MaxBatch int `yaml:"max_batch"`
}

// WordFilterList is one list of the word filter (docs/moderation.md).
type WordFilterList struct {
	Name string `yaml:"name"`
	// Action: mask (each matched character becomes "*") or reject.
	Action string   `yaml:"action"`
	Words  []string `yaml:"words"`
	// WordsFile is read for more words, one a line (# starts a comment),
	// and read again when it changes.
	WordsFile        string `yaml:"words_file"`
	Leet             bool   `yaml:"leet"`
	IgnoreSeparators bool   `yaml:"ignore_separators"`
	WholeWords       bool   `yaml:"whole_words"`
}

// Config is the whole configuration of a Parley server. Every field's zero
// value means the default stated beside it, so Config{} is a working
// single-node server on loopback with its data in ./data. The YAML keys (for
// `parley serve --config FILE`) are the snake_case names in the tags.
//
// Config owns every default: withDefaults fills each field, and New hands
// the packages it builds (gateway, chat, the stores, routing, webhooks)
// explicit values, never relying on their own zero-value defaults. For
// every limit that can be switched off, -1 means unlimited (or off, or
// none) and 0 means the default, which for a few keys (api_key_rate,
// user_storage_quota_bytes) is itself unlimited. docs/operations.md's key
// table states the same defaults; a test holds the two together.
type Config struct {
	// DataDir holds the embedded store and generated secrets. Default "./data".
	DataDir string `yaml:"data_dir"`
	// HTTPAddr is the HTTP listen address: the API, and WebSocket at /ws.
	// Default "127.0.0.1:8080" (loopback only). Use ":0" for a random port.
	HTTPAddr string `yaml:"http_addr"`
	// TCPAddr is the raw TCP listen address. Default "127.0.0.1:7070"; "off" disables TCP.
	TCPAddr string `yaml:"tcp_addr"`

	// TLSCertFile and TLSKeyFile (PEM) turn on TLS for both listeners: HTTPS
	// and wss:// on HTTPAddr, TLS on TCPAddr (clients use tls://). TLS 1.2
	// is the minimum. Default "": plaintext (behind a TLS-terminating proxy,
	// or on loopback).
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`

	// MaxFrameBytes is the largest frame accepted from a client. Default 65536.
	MaxFrameBytes int `yaml:"max_frame_bytes"`
	// Heartbeat is how often an idle client should ping. Default 30s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// IdleTimeout closes a connection silent this long. Default 3 × Heartbeat.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// AuthTimeout closes a connection that has not authenticated this long after connecting. Default 10s.
	AuthTimeout time.Duration `yaml:"auth_timeout"`
	// SendQueueFrames caps each connection's outbound queue, in frames; past it
	// the connection is closed as slow. Default 1024.
	SendQueueFrames int `yaml:"send_queue_frames"`
	// SendQueueBytes caps each connection's outbound queue, in bytes. Default 4 MiB.
	SendQueueBytes int `yaml:"send_queue_bytes"`
	// PageBytes bounds every page the server answers (sync, history, the
	// conversation list; over sockets, /v1/rpc, HTTP and the admin API), in
	// bytes of the messages it carries: a page stops there and says
	// has_more (or gives a next page token), always holding at least one
	// item. At most half of send_queue_bytes, so a page always fits a
	// connection's queue. Default: a quarter of send_queue_bytes (1 MiB).
	PageBytes int `yaml:"page_bytes"`
	// ReadMemoryBytes bounds the memory that page reads hold at once,
	// across all connections and HTTP requests of this node; a read that
	// cannot get its share within a short wait is refused with
	// TOO_MANY_REQUESTS (HTTP 429), and clients retry. Default 64 MiB.
	ReadMemoryBytes int64 `yaml:"read_memory_bytes"`
	// WriteTimeout closes a connection whose socket accepts nothing this long. Default 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// HTTPHeaderTimeout closes an HTTP (or WebSocket upgrade) connection
	// whose request header, and TLS handshake on HTTPS, has not fully
	// arrived this long after the connection opened or its previous request
	// ended: a client trickling a header byte by byte (slowloris) is cut
	// off. Default 10s.
	HTTPHeaderTimeout time.Duration `yaml:"http_header_timeout"`
	// HTTPReadTimeout bounds reading a whole HTTP request, header and body
	// (a body trickled slowly is cut off). WebSocket connections, once
	// upgraded, are bound by the gateway's timeouts instead. Default 30s.
	HTTPReadTimeout time.Duration `yaml:"http_read_timeout"`

	// KickPolicy: "device_type" (default: a login kicks the user's older session
	// with the same device type), "device" (same device id only) or "none".
	KickPolicy string `yaml:"kick_policy"`
	// TokenTTL is the lifetime of tokens issued at register/login. Default 168h (7 days).
	TokenTTL time.Duration `yaml:"token_ttl"`
	// MaxTokenTTL bounds tokens minted through the admin API. Default 720h (30 days).
	MaxTokenTTL time.Duration `yaml:"max_token_ttl"`
	// DisableRegistration turns off POST /v1/register. Default false (open registration).
	// Turn it off when an app server mints tokens for its own users, so nobody
	// can register a user id that belongs to the app.
	DisableRegistration bool `yaml:"disable_registration"`

	// TokenKey signs the tokens Parley issues (at least 32 bytes). Default:
	// generated at first start and kept in DataDir/secrets.json (mode 0600).
	TokenKey string `yaml:"token_key"`
	// AppSecret lets an app server mint HS256 tokens itself (iss = AppIssuer,
	// aud = "parley", sub = user id, exp required). Default: generated like TokenKey.
	AppSecret string `yaml:"app_secret"`
	// AppIssuer is the iss claim of app-minted tokens. Default "app".
	AppIssuer string `yaml:"app_issuer"`
	// AdminAPIKeys authenticate the admin API (header X-Api-Key). An entry
	// "NAME:SECRET" (NAME: 1-32 of a-z 0-9 _ -) names its key in the audit
	// log, and clients send SECRET; a bare secret is named "key-" and 8 hex
	// digits of its hash. Default: one key generated like TokenKey.
	AdminAPIKeys []string `yaml:"admin_api_keys"`

	// MaxGroupMembers is the largest a group may grow. Default 100,000.
	MaxGroupMembers int `yaml:"max_group_members"`
	// RecallWindow is how long a sender may recall a message (group owners
	// and admins may recall any time). Default 2m.
	RecallWindow time.Duration `yaml:"recall_window"`
	// StreamIdleTimeout: a streamed message (docs/rich-messages.md) with no
	// new text for this long is stored as incomplete. Default 30s.
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// MaxStreams bounds the streamed messages open on each node at once
	// (each holds at most max_frame_bytes of text). Default 1000.
	MaxStreams int `yaml:"max_streams"`
	// ReceiptListMax: in groups up to this size, read counts list who read.
	// Default 500.
	ReceiptListMax int `yaml:"receipt_list_max"`
	// GroupCacheSize bounds the groups each node keeps in memory (members
	// and roles, for the send path); past it a tenth are dropped and loaded
	// again from storage when next used. Default 65,536.
	GroupCacheSize int `yaml:"group_cache_size"`
	// DenyStrangers lets users message only their friends (groups are
	// unaffected). Default false: anyone may start a 1:1 conversation.
	DenyStrangers bool `yaml:"deny_strangers"`
	// UnknownRecipients decides a 1:1 send to a user id that has no account:
	// "refuse" (default) answers NO_SUCH_USER; "accept" stores it for the
	// user's first login, for apps that mint tokens for users the server
	// has not seen yet. A user has an account once registered, created or
	// given a token through the admin API, or logged in once with an
	// app-minted token.
	UnknownRecipients string `yaml:"unknown_recipients"`
	// Search turns message search on or off: "on" (default) keeps a
	// full-text index of messages in the data directory with the embedded
	// store, and searches the database's trigram index with PostgreSQL;
	// "off" answers searches UNAVAILABLE (and keeps no embedded index).
	Search string `yaml:"search"`
	// RetentionDays: messages older than this many days are deleted in
	// every conversation without a policy of its own (docs/retention.md).
	// 0 (default): kept forever.
	RetentionDays int `yaml:"retention_days"`
	// RetentionMessages: only the newest this many messages of each
	// conversation without a policy of its own are kept. 0 (default): all.
	RetentionMessages int `yaml:"retention_messages"`
	// RetentionSweepInterval is the time between sweeps that delete expired
	// and disappeared messages (default 1m).
	RetentionSweepInterval time.Duration `yaml:"retention_sweep_interval"`
	// RoomClientSend lets clients broadcast to chat rooms they joined
	// (RoomSend). Default false: only the admin push API broadcasts to rooms.
	RoomClientSend bool `yaml:"room_client_send"`

	// UserSendRate limits each user's sends (messages, room broadcasts,
	// edits) per second across their sessions; past it a send gets
	// TOO_MANY_REQUESTS (429 over HTTP). Default 1000; -1: unlimited.
	UserSendRate float64 `yaml:"user_send_rate"`
	// UserRequestRate limits each user's requests of every kind (but pings
	// and delivered/read ACKs) per second. Default 2000; -1: unlimited.
	UserRequestRate float64 `yaml:"user_request_rate"`
	// ConnRatePerIP limits new connections (TCP and WebSocket) per second
	// from one IP address; past it a connection is closed at once (WebSocket:
	// HTTP 429). Bursts of twice the rate pass. Default 1000; -1: unlimited.
	ConnRatePerIP float64 `yaml:"conn_rate_per_ip"`
	// ConnRateExempt lists networks (CIDR) ConnRatePerIP does not apply to:
	// a load balancer, a local load generator. Default ["127.0.0.0/8",
	// "::1/128"] (loopback); ["none"] exempts nothing.
	ConnRateExempt []string `yaml:"conn_rate_exempt"`
	// MaxUnauthConns caps the connections (TCP and WebSocket) that have not
	// authenticated yet, over all addresses; past it a new TCP connection
	// is closed at once and a WebSocket upgrade is answered HTTP 503, and
	// the refusal is counted. Default: a quarter of MaxOpenFiles
	// (unlimited when that is unknown); -1: unlimited.
	MaxUnauthConns int `yaml:"max_unauth_conns"`
	// MaxUnauthConnsPerIP caps the unauthenticated connections from one IP
	// address, loopback included (one local process can exhaust descriptors
	// as well as a remote one); refused as above. Default 1024 (room for a
	// NAT or a load generator's concurrent logins); -1: unlimited.
	MaxUnauthConnsPerIP int `yaml:"max_unauth_conns_per_ip"`
	// UnauthConnsExempt lists networks (CIDR) MaxUnauthConnsPerIP does not
	// apply to: a proxying load balancer, whose address is every client's.
	// Default none (unlike ConnRateExempt, loopback is capped).
	UnauthConnsExempt []string `yaml:"unauth_conns_exempt"`
	// MaxOpenFiles is the number of file descriptors the process may hold,
	// for FDReserve and the MaxUnauthConns default. Default: the process's
	// RLIMIT_NOFILE (0 where it cannot be read: no reserve).
	MaxOpenFiles int `yaml:"max_open_files"`
	// FDReserve keeps this many descriptors free for storage files, HTTP
	// requests and logins in progress: while the process holds
	// MaxOpenFiles-FDReserve or more, new connections are refused as above
	// (plain HTTP connections only past MaxOpenFiles-FDReserve/2). Counted
	// on Linux only. Default 5 % of MaxOpenFiles, at least 16, at most
	// 1024 (none when MaxOpenFiles is unknown); -1: none.
	FDReserve int `yaml:"fd_reserve"`
	// MaxSessionsPerUser caps the sessions (socket connections past Auth)
	// one user may hold at once on this node; past it a login is refused
	// with TOO_MANY_REQUESTS and the connection closed. Sessions a login
	// replaces under KickPolicy do not count against it. In a cluster each
	// node counts only its own sessions, so a user may hold up to this many
	// per node. Default 16; -1: unlimited.
	MaxSessionsPerUser int `yaml:"max_sessions_per_user"`
	// APIKeyRate limits requests per second per admin API key (push
	// included); past it the API answers 429. Default unlimited (the
	// holder of a key is the app's own backend); -1: unlimited too.
	APIKeyRate float64 `yaml:"api_key_rate"`

	// WebhookURLs receive events as signed JSON POSTs (see docs/operations.md).
	// Default none.
	WebhookURLs []string `yaml:"webhook_urls"`
	// WebhookSecret signs webhook requests. Default: generated like TokenKey.
	WebhookSecret string `yaml:"webhook_secret"`
	// WebhookEvents limits the event types sent: message.stored,
	// group.changed, user.online, user.offline. Default: all.
	WebhookEvents []string `yaml:"webhook_events"`
	// WebhookQueue bounds the events waiting per URL; past it events are
	// dropped and counted. Default 10,000.
	WebhookQueue int `yaml:"webhook_queue"`

	// ModerationHooks are the app's before-send hooks, asked before a
	// message, an edit or a group change is stored (docs/moderation.md).
	// Default none.
	ModerationHooks []ModerationHook `yaml:"moderation_hooks"`
	// WordFilterLists are the built-in word filter's lists; the admin API
	// adds lists of its own (kept in the store). Default none.
	WordFilterLists []WordFilterList `yaml:"word_filter_lists"`
	// WordFilterContentTypes are the content types whose payloads the
	// word filter reads as text. Default text and text/plain.
	WordFilterContentTypes []string `yaml:"word_filter_content_types"`

	// PushDelay is how long a connected device has to acknowledge a message
	// as delivered before it gets a push notification (devices that are
	// not connected get one after it too). Default 3s.
	PushDelay time.Duration `yaml:"push_delay"`
	// PushCoalesce: after a notification to a device, further ones wait
	// this long and go out as one ("3 new messages"). Default 10s.
	PushCoalesce time.Duration `yaml:"push_coalesce"`
	// PushTTL is how long the platforms keep a notification for a device
	// they cannot reach. Default 24h.
	PushTTL time.Duration `yaml:"push_ttl"`
	// PushPreview: "full" shows the sender and a text preview, "hidden"
	// only "New message". Default "full".
	PushPreview string `yaml:"push_preview"`
	// PushTemplates are a notification's title and body per content type
	// ("*": any other), with {sender}, {group}, {text}, {count}. Default:
	// "{sender}" (in a group "{sender} in {group}") and "{text}".
	PushTemplates map[string]PushTemplate `yaml:"push_templates"`
	// PushQueue bounds the notifications waiting per platform; past it
	// they are dropped and counted. Default 10,000.
	PushQueue int `yaml:"push_queue"`
	// PushWorkers is how many requests each platform has in flight. Default 64.
	PushWorkers int `yaml:"push_workers"`
	// PushBadgeOff leaves the app badge alone instead of setting it to the
	// user's unread count, which costs a read of the user's conversation
	// list per notification. Default false.
	PushBadgeOff bool `yaml:"push_badge_off"`
	// PushCAFile is a PEM file of certificate authorities trusted, instead
	// of the system's, on connections to the push platforms: for an egress
	// proxy that inspects TLS, or a local stand-in (parley bench
	// push-offline). Default none: the system's.
	PushCAFile string `yaml:"push_ca_file"`
	// APNsKeyFile is the .p8 token signing key from Apple; with
	// APNsKeyID and APNsTeamID it turns APNs on. Default none.
	APNsKeyFile string `yaml:"apns_key_file"`
	APNsKeyID   string `yaml:"apns_key_id"`
	APNsTeamID  string `yaml:"apns_team_id"`
	// APNsEndpoint and APNsSandboxEndpoint override Apple's production and
	// development endpoints (tests). Default Apple's.
	APNsEndpoint        string `yaml:"apns_endpoint"`
	APNsSandboxEndpoint string `yaml:"apns_sandbox_endpoint"`
	// FCMCredentialsFile is a Firebase service-account JSON key; it turns
	// FCM on. Default none.
	FCMCredentialsFile string `yaml:"fcm_credentials_file"`
	// FCMEndpoint overrides https://fcm.googleapis.com (tests).
	FCMEndpoint string `yaml:"fcm_endpoint"`
	// WebPushOff turns Web Push off. Default false: on, with VAPID keys
	// generated at first start (in a cluster they must be set, the same on
	// every node, or Web Push stays off).
	WebPushOff bool `yaml:"webpush_off"`
	// WebPushSubject is the contact push services may use (mailto: or
	// https:). Default "https://github.com/parleyim/parley"; set your own.
	WebPushSubject string `yaml:"webpush_subject"`
	// WebPushVAPIDPublicKey and WebPushVAPIDPrivateKey (base64url).
	// Default: generated into data_dir/secrets.json.
	WebPushVAPIDPublicKey  string `yaml:"webpush_vapid_public_key"`
	WebPushVAPIDPrivateKey string `yaml:"webpush_vapid_private_key"`
	// WebPushAllowPrivate lets subscriptions name endpoints on private,
	// loopback and link-local addresses. Default false: a user could
	// otherwise make the server send requests into its own network.
	WebPushAllowPrivate bool `yaml:"webpush_allow_private"`

	// MediaMaxFileBytes bounds one uploaded file. Default 100 MiB.
	MediaMaxFileBytes int64 `yaml:"media_max_file_bytes"`
	// MediaQuotaBytes bounds the bytes of one user's files. Default 1 GiB;
	// -1: unlimited.
	MediaQuotaBytes int64 `yaml:"media_quota_bytes"`
	// MediaUploadRate bounds the bytes per second one user uploads, all
	// their uploads together. Default 10 MiB/s; -1: unlimited.
	MediaUploadRate int64 `yaml:"media_upload_rate"`
	// MediaAllowedTypes are the content types accepted, matched against
	// the type sniffed from a file's bytes ("image/*", "application/pdf",
	// "*/*"). Default ["*/*"]: any file (a type a browser would run, such
	// as HTML or SVG, is served only as a download).
	MediaAllowedTypes []string `yaml:"media_allowed_types"`
	// MediaURLTTL is how long a download URL works. Default 10m.
	MediaURLTTL time.Duration `yaml:"media_url_ttl"`
	// MediaUnattachedTTL: an uploaded file not sent in a message within
	// this long is deleted. Default 24h.
	MediaUnattachedTTL time.Duration `yaml:"media_unattached_ttl"`
	// MediaWorkers is how many uploads are inspected at once (images
	// decoded, thumbnails made). Default 2.
	MediaWorkers int `yaml:"media_workers"`
	// MediaMaxPixels bounds the pixels of an image that is decoded; a
	// larger one (a decompression bomb) is refused. Default 50,000,000.
	MediaMaxPixels int64 `yaml:"media_max_pixels"`
	// MediaS3Bucket keeps files in this S3 bucket instead of under
	// data_dir/media; in a cluster every node must use the same one.
	// Default "": the local disk.
	MediaS3Bucket string `yaml:"media_s3_bucket"`
	// MediaS3Endpoint is an S3-compatible store's URL (MinIO, Ceph, R2,
	// ...). Default "": AWS S3.
	MediaS3Endpoint string `yaml:"media_s3_endpoint"`
	// MediaS3Region. Default "us-east-1".
	MediaS3Region string `yaml:"media_s3_region"`
	// MediaS3AccessKey and MediaS3SecretKey: the bucket's credentials.
	// Default "": the AWS SDK's own (environment, shared files, instance role).
	MediaS3AccessKey string `yaml:"media_s3_access_key"`
	MediaS3SecretKey string `yaml:"media_s3_secret_key"`
	// MediaS3PathStyle addresses the bucket in the path (most
	// S3-compatible stores) instead of the host name. Default false.
	MediaS3PathStyle bool `yaml:"media_s3_path_style"`
	// MediaS3Prefix is put before every object key, to share a bucket.
	// Default "".
	MediaS3Prefix string `yaml:"media_s3_prefix"`

	// AccountExportTTL: an account export's archive is deleted this long
	// after it is ready (docs/accounts.md). Default 48h.
	AccountExportTTL time.Duration `yaml:"account_export_ttl"`
	// AccountExportWorkers is how many account exports one node builds at
	// once; more wait. Default 2.
	AccountExportWorkers int `yaml:"account_export_workers"`
	// AccountDeletedMessages is what happens to a deleted account's
	// messages: "erase" (their content is removed, the messages keep their
	// place) or "keep". Default "erase".
	AccountDeletedMessages string `yaml:"account_deleted_messages"`

	// PostgresURL stores everything in PostgreSQL instead of the embedded
	// store, e.g. "postgres://parley:PASSWORD@db:5432/parley?sslmode=require".
	// Default "": embedded storage in DataDir. (Several nodes on one
	// database also need routing between them: see docs/operations.md.)
	PostgresURL string `yaml:"postgres_url"`
	// PostgresSchema is the schema holding Parley's tables. Default "parley".
	PostgresSchema string `yaml:"postgres_schema"`

	// NATSURLs makes this node one of a cluster routed by an external NATS
	// cluster, e.g. ["nats://nats-1:4222", "nats://nats-2:4222"]
	// (credentials go in the URL). A cluster needs PostgresURL, the same on
	// every node, and a distinct NodeID per node. Default none: one node.
	NATSURLs []string `yaml:"nats_urls"`
	// NATSClusterListen instead embeds NATS in this node, listening for the
	// other nodes' routes on this address, e.g. "10.0.0.5:6222". Default "".
	NATSClusterListen string `yaml:"nats_cluster_listen"`
	// NATSRoutes are the other nodes' NATSClusterListen addresses, as
	// "nats://10.0.0.6:6222" (listing this node too is harmless).
	NATSRoutes []string `yaml:"nats_routes"`
	// NATSClusterAdvertise is the "host:port" the other nodes reach this
	// node's NATSClusterListen at, when that differs (NAT, a port mapping,
	// a proxy): route gossip gives it to the nodes that learn of this one
	// from another. Default "": NATSClusterListen's port at the address
	// this node's routes come from.
	NATSClusterAdvertise string `yaml:"nats_cluster_advertise"`
	// NATSClusterSecret authenticates routes between embedded NATS servers;
	// the same on every node, at least 16 bytes. Required unless
	// NATSClusterListen is a loopback address.
	NATSClusterSecret string `yaml:"nats_cluster_secret"`
	// NATSClusterName is the embedded NATS cluster's name. Default "parley".
	NATSClusterName string `yaml:"nats_cluster_name"`
	// NATSListen opens the embedded NATS to NATS clients (for the nats CLI).
	// Default "": reachable only from inside this process.
	NATSListen string `yaml:"nats_listen"`
	// NATSSubjectPrefix starts every subject Parley uses, so several clusters
	// can share one NATS. Default "parley".
	NATSSubjectPrefix string `yaml:"nats_subject_prefix"`
	// DrainWindow spreads the closing of connections at shutdown (SIGTERM)
	// over this long, so clients reconnect to the other nodes gradually.
	// Default 10s in a cluster, 0 (all at once) on a single node.
	DrainWindow time.Duration `yaml:"drain_window"`

	// NoSync skips fsync after each storage batch: faster, but a machine crash
	// (not a process crash) can lose acknowledged messages. Default false (durable).
	NoSync bool `yaml:"no_sync"`

	// MinFreeDisk is the free-space floor of the embedded store's volume, in
	// bytes: below it, writes (sends, group changes, new accounts) are
	// refused with UNAVAILABLE and /readyz answers 503, so the disk never
	// fills up under the store; they resume by themselves when space is
	// freed. Default 0: 5 % of the volume, at most 1 GiB. -1 turns it off.
	// Ignored with PostgreSQL.
	MinFreeDisk int64 `yaml:"min_free_disk"`

	// UserStorageQuotaBytes caps the message payload bytes each user may
	// store (what they sent, counted once when stored); a send past it is
	// refused with ERROR_CODE_QUOTA_EXCEEDED. Default unlimited (0 or -1).
	UserStorageQuotaBytes int64 `yaml:"user_storage_quota_bytes"`

	// storeFS, when set (tests only), is the embedded store's filesystem.
	storeFS vfs.FS
	// storeWrap, when set (tests only), wraps the opened store.
	storeWrap func(store.Store) store.Store
	// mediaOrphanGrace replaces media.DefaultOrphanGrace (tests).
	mediaOrphanGrace time.Duration
	// pushClients, when set (tests only), are the HTTP clients of the push
	// platforms by kind (trusting the tests' stand-in servers).
	pushClients map[string]*http.Client

	// NodeID distinguishes message ids of different nodes, 0-1023. Default 0.
	NodeID uint16 `yaml:"node_id"`

	// Tracing sends OpenTelemetry traces to an OTLP receiver (tracing.go).
	// Default: off.
	Tracing TracingConfig `yaml:"tracing"`

	// Logger receives the server's logs, instead of the standard error in
	// LogFormat. Not in YAML: a program embedding the server sets it.
	// Default: a handler on os.Stderr (LogOutput) in LogFormat.
	Logger *slog.Logger `yaml:"-"`
	// Version is the version this server reports (/metrics
	// parley_build_info); parley serve sets its own. Not in YAML. Default:
	// the module's version from the build info, else "dev".
	Version string `yaml:"-"`
	// ConfigSource reads the configuration again for a reload (SIGHUP in
	// parley serve, POST /v1/admin/reload); `parley serve --config` sets
	// it. Not in YAML. Default nil: the admin endpoint answers 409.
	ConfigSource func() (Config, error) `yaml:"-" json:"-"`
	// LogOutput is where the server writes its logs when Logger is not
	// set. Not in YAML. Default os.Stderr.
	LogOutput io.Writer `yaml:"-" json:"-"`
	// LogFormat is "text" (key=value) or "json" (one object a line).
	// Default "text". Ignored when Logger is set.
	LogFormat string `yaml:"log_format"`
	// LogLevel: debug, info, warn or error; reloadable. Default info (with
	// Logger set and no LogLevel: whatever Logger's handler passes).
	LogLevel string `yaml:"log_level"`
	// LogSampleFirst: of the records with the same message and level, only
	// the first this many per LogSampleInterval are logged; the rest are
	// counted, and one record at the interval's end says how many were
	// dropped. Default 100; -1: no sampling.
	LogSampleFirst int `yaml:"log_sample_first"`
	// LogSampleInterval is the sampling window. Default 1s.
	LogSampleInterval time.Duration `yaml:"log_sample_interval"`

	// The two fields below are decisions an operator takes for one start
	// (the serve flags --new-secrets and --accept-data-loss), never kept in
	// a config file, so a later restart asks again.

	// NewSecrets lets a data directory that holds a store but no
	// secrets.json start with newly generated secrets: every token and admin
	// API key issued before stops working. Default false: such a directory
	// is refused (restore secrets.json from a backup instead).
	NewSecrets bool `yaml:"-"`
	// AcceptDataLoss opens an embedded store whose write-ahead logs lost
	// synced writes (a WAL missing or cut short) with what survives, logging
	// the loss. Default false: the server refuses to start on it.
	AcceptDataLoss bool `yaml:"-"`
}

// unlimited is how Config spells "no limit" (or "off", "none") for every
// key that can be switched off; 0 means the key's default.
const unlimited = -1

// withDefaults returns a copy with every zero field set to its default.
// After it, a field is either a positive figure or unlimited (-1) for the
// keys that can be switched off; the only zeros left are values that mean
// zero (NodeID, a single node's DrainWindow), MaxOpenFiles when the
// process's limit is unknown, and MinFreeDisk, which the store derives
// from its volume's size when it opens. Secrets stay empty here: New
// generates them (or reads them from DataDir) through auth.
func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.TCPAddr == "" {
		c.TCPAddr = "127.0.0.1:7070"
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 64 << 10
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 30 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 3 * c.Heartbeat
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = 10 * time.Second
	}
	if c.SendQueueFrames == 0 {
		c.SendQueueFrames = 1024
	}
	if c.SendQueueBytes == 0 {
		c.SendQueueBytes = 4 << 20
	}
	if c.PageBytes == 0 {
		c.PageBytes = c.SendQueueBytes / 4
	}
	if c.ReadMemoryBytes == 0 {
		c.ReadMemoryBytes = 64 << 20
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.HTTPHeaderTimeout == 0 {
		c.HTTPHeaderTimeout = 10 * time.Second
	}
	if c.HTTPReadTimeout == 0 {
		c.HTTPReadTimeout = 30 * time.Second
	}
	if c.KickPolicy == "" {
		c.KickPolicy = "device_type"
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = 7 * 24 * time.Hour
	}
	if c.MaxTokenTTL == 0 {
		c.MaxTokenTTL = 30 * 24 * time.Hour
	}
	if c.MaxGroupMembers == 0 {
		c.MaxGroupMembers = 100_000
	}
	if c.UnknownRecipients == "" {
		c.UnknownRecipients = "refuse"
	}
	if c.Search == "" {
		c.Search = "on"
	}
	if c.RetentionSweepInterval == 0 {
		c.RetentionSweepInterval = time.Minute
	}
	if c.RecallWindow == 0 {
		c.RecallWindow = 2 * time.Minute
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = 30 * time.Second
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 1000
	}
	if c.ReceiptListMax == 0 {
		c.ReceiptListMax = 500
	}
	if c.GroupCacheSize == 0 {
		c.GroupCacheSize = 65536
	}
	if c.UserSendRate == 0 {
		c.UserSendRate = 1000
	}
	if c.UserRequestRate == 0 {
		c.UserRequestRate = 2000
	}
	if c.MaxSessionsPerUser == 0 {
		c.MaxSessionsPerUser = 16
	}
	if c.ConnRatePerIP == 0 {
		c.ConnRatePerIP = 1000
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = processFileLimit()
	}
	if c.MaxUnauthConns == 0 {
		c.MaxUnauthConns = c.MaxOpenFiles / 4
		if c.MaxUnauthConns == 0 {
			c.MaxUnauthConns = unlimited // no known limit to take a quarter of
		}
	}
	if c.MaxUnauthConnsPerIP == 0 {
		c.MaxUnauthConnsPerIP = 1024
	}
	if c.FDReserve == 0 {
		c.FDReserve = unlimited // none: no known limit to keep a reserve below
		if c.MaxOpenFiles > 0 {
			c.FDReserve = min(max(c.MaxOpenFiles/20, 16), 1024)
		}
	}
	if c.APIKeyRate == 0 {
		c.APIKeyRate = unlimited
	}
	if c.UserStorageQuotaBytes == 0 {
		c.UserStorageQuotaBytes = unlimited
	}
	if c.PushDelay == 0 {
		c.PushDelay = 3 * time.Second
	}
	if c.PushCoalesce == 0 {
		c.PushCoalesce = 10 * time.Second
	}
	if c.PushTTL == 0 {
		c.PushTTL = 24 * time.Hour
	}
	if c.PushPreview == "" {
		c.PushPreview = "full"
	}
	if c.PushQueue == 0 {
		c.PushQueue = 10_000
	}
	if c.PushWorkers == 0 {
		c.PushWorkers = 64
	}
	if c.MediaMaxFileBytes == 0 {
		c.MediaMaxFileBytes = 100 << 20
	}
	if c.MediaQuotaBytes == 0 {
		c.MediaQuotaBytes = 1 << 30
	}
	if c.MediaUploadRate == 0 {
		c.MediaUploadRate = 10 << 20
	}
	if c.MediaAllowedTypes == nil {
		c.MediaAllowedTypes = []string{"*/*"}
	}
	if c.MediaURLTTL == 0 {
		c.MediaURLTTL = 10 * time.Minute
	}
	if c.MediaUnattachedTTL == 0 {
		c.MediaUnattachedTTL = 24 * time.Hour
	}
	if c.MediaWorkers == 0 {
		c.MediaWorkers = 2
	}
	if c.MediaMaxPixels == 0 {
		c.MediaMaxPixels = 50_000_000
	}
	if c.AccountExportTTL == 0 {
		c.AccountExportTTL = 48 * time.Hour
	}
	if c.AccountExportWorkers == 0 {
		c.AccountExportWorkers = 2
	}
	if c.AccountDeletedMessages == "" {
		c.AccountDeletedMessages = "erase"
	}
	if c.MediaS3Region == "" {
		c.MediaS3Region = "us-east-1"
	}
	if c.WebPushSubject == "" {
		c.WebPushSubject = "https://github.com/parleyim/parley"
	}
	if c.WebhookQueue == 0 {
		c.WebhookQueue = 10_000
	}
	if c.PostgresSchema == "" {
		c.PostgresSchema = "parley"
	}
	if c.NATSClusterName == "" {
		c.NATSClusterName = "parley"
	}
	if c.NATSSubjectPrefix == "" {
		c.NATSSubjectPrefix = "parley"
	}
	if c.ConnRateExempt == nil {
		c.ConnRateExempt = []string{"127.0.0.0/8", "::1/128"}
	}
	if c.DrainWindow == 0 && c.clustered() {
		c.DrainWindow = 10 * time.Second
	}
	if c.AppIssuer == "" {
		c.AppIssuer = "app"
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
	if c.LogLevel == "" && c.Logger == nil {
		c.LogLevel = "info"
	}
	if c.LogSampleFirst == 0 {
		c.LogSampleFirst = 100
	}
	if c.LogSampleInterval == 0 {
		c.LogSampleInterval = time.Second
	}
	return c
}

// clustered reports whether this node is one of several.
func (c Config) clustered() bool { return len(c.NATSURLs) > 0 || c.NATSClusterListen != "" }

// rate turns a configured per-second figure (-1: unlimited) into a limit with a burst of twice the rate.
// (limit.Rate spells unlimited as its zero value.)
func rate(perSecond float64) limit.Rate {
	if perSecond <= 0 {
		return limit.Rate{}
	}
	return limit.Rate{PerSecond: perSecond, Burst: 2 * perSecond}
}

// orZero turns a configured limit (-1: unlimited or none) into the
// spelling of the package configs, where 0 means unlimited or none.
func orZero[T int | int64](n T) T { return max(n, 0) }

func (c Config) exemptPrefixes() ([]netip.Prefix, error) { return prefixes(c.ConnRateExempt) }

// prefixes parses a list of CIDR networks; "none" stands for no network.
func prefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if s == "none" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validate checks a config that already has its defaults.
func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	_, _, err := net.SplitHostPort(c.HTTPAddr)
	check(err == nil, "http_addr %q: %v", c.HTTPAddr, err)
	if c.TCPAddr != "off" {
		_, _, err = net.SplitHostPort(c.TCPAddr)
		check(err == nil, "tcp_addr %q: %v", c.TCPAddr, err)
	}
	check(c.UserStorageQuotaBytes > 0 || c.UserStorageQuotaBytes == unlimited, "user_storage_quota_bytes must be positive or -1 (unlimited), got %d", c.UserStorageQuotaBytes)
	check(c.MinFreeDisk >= unlimited, "min_free_disk must be -1 (off), 0 (default) or a number of bytes, got %d", c.MinFreeDisk)
	check(c.MaxFrameBytes >= 1024 && c.MaxFrameBytes <= 16<<20, "max_frame_bytes must be 1 KiB..16 MiB, got %d", c.MaxFrameBytes)
	check(c.Heartbeat >= time.Second, "heartbeat must be at least 1s")
	check(c.IdleTimeout > c.Heartbeat, "idle_timeout must exceed heartbeat")
	check(c.AuthTimeout > 0, "auth_timeout must be positive")
	check(c.SendQueueFrames > 0 && c.SendQueueBytes >= c.MaxFrameBytes, "send queue caps must be positive and send_queue_bytes >= max_frame_bytes")
	check(c.PageBytes >= 256 && c.PageBytes <= c.SendQueueBytes/2, "page_bytes must be 256..send_queue_bytes/2 (%d), got %d", c.SendQueueBytes/2, c.PageBytes)
	check(c.ReadMemoryBytes >= 2*int64(c.PageBytes), "read_memory_bytes must be at least twice page_bytes, got %d", c.ReadMemoryBytes)
	check(c.WriteTimeout > 0, "write_timeout must be positive")
	check(c.HTTPHeaderTimeout > 0, "http_header_timeout must be positive")
	check(c.HTTPReadTimeout >= c.HTTPHeaderTimeout, "http_read_timeout must be at least http_header_timeout")
	_, ok := session.ParseKickPolicy(c.KickPolicy)
	check(ok, "kick_policy must be device_type, device or none, got %q", c.KickPolicy)
	check(c.TokenTTL > 0 && c.MaxTokenTTL >= c.TokenTTL, "token_ttl must be positive and at most max_token_ttl")
	check(c.TokenKey == "" || len(c.TokenKey) >= 32, "token_key must be at least 32 bytes")
	check(c.AppSecret == "" || len(c.AppSecret) >= 32, "app_secret must be at least 32 bytes")
	check(c.UnknownRecipients == "refuse" || c.UnknownRecipients == "accept", "unknown_recipients must be refuse or accept")
	check(c.Search == "on" || c.Search == "off", "search must be on or off")
	check(c.RetentionDays >= 0 && c.RetentionDays <= 36500, "retention_days must be 0..36500")
	check(c.RetentionMessages >= 0, "retention_messages must be 0 or more")
	check(c.RetentionSweepInterval > 0, "retention_sweep_interval must be positive")
	names := make(map[string]bool)
	for _, k := range c.AdminAPIKeys {
		name, secret := auth.ParseAdminKey(k)
		check(len(secret) >= 16, "admin API keys must be at least 16 bytes")
		check(!names[name], "admin_api_keys: the name %q is given twice", name)
		names[name] = true
	}
	check(c.NodeID < 1024, "node_id must be 0-1023")
	check(c.MaxGroupMembers >= 2, "max_group_members must be at least 2")
	check(c.RecallWindow > 0, "recall_window must be positive")
	check(c.StreamIdleTimeout > 0, "stream_idle_timeout must be positive")
	check(c.MaxStreams > 0, "max_streams must be positive")
	check(c.ReceiptListMax > 0, "receipt_list_max must be positive")
	check(c.GroupCacheSize > 0, "group_cache_size must be positive, got %d", c.GroupCacheSize)
	check(c.UserSendRate > 0 || c.UserSendRate == unlimited, "user_send_rate must be positive or -1 (unlimited)")
	check(c.UserRequestRate > 0 || c.UserRequestRate == unlimited, "user_request_rate must be positive or -1 (unlimited)")
	check(c.MaxSessionsPerUser > 0 || c.MaxSessionsPerUser == unlimited, "max_sessions_per_user must be positive or -1 (unlimited), got %d", c.MaxSessionsPerUser)
	check(c.ConnRatePerIP > 0 || c.ConnRatePerIP == unlimited, "conn_rate_per_ip must be positive or -1 (unlimited)")
	check(c.APIKeyRate > 0 || c.APIKeyRate == unlimited, "api_key_rate must be positive or -1 (unlimited)")
	_, err = c.exemptPrefixes()
	check(err == nil, "conn_rate_exempt: %v", err)
	_, err = prefixes(c.UnauthConnsExempt)
	check(err == nil, "unauth_conns_exempt: %v", err)
	check(c.MaxUnauthConns > 0 || c.MaxUnauthConns == unlimited, "max_unauth_conns must be positive or -1 (unlimited), got %d", c.MaxUnauthConns)
	check(c.MaxUnauthConnsPerIP > 0 || c.MaxUnauthConnsPerIP == unlimited, "max_unauth_conns_per_ip must be positive or -1 (unlimited), got %d", c.MaxUnauthConnsPerIP)
	check(c.MaxOpenFiles >= 0, "max_open_files must not be negative")
	check(c.FDReserve >= unlimited && (c.FDReserve <= 0 || c.FDReserve < c.MaxOpenFiles),
		"fd_reserve must be -1 (none), or positive and below max_open_files (%d), got %d", c.MaxOpenFiles, c.FDReserve)
	check((c.TLSCertFile == "") == (c.TLSKeyFile == ""), "tls_cert_file and tls_key_file go together")
	check(c.WebhookQueue > 0, "webhook_queue must be positive, got %d", c.WebhookQueue)
	check(c.PushDelay > 0 && c.PushCoalesce > 0 && c.PushTTL > 0, "push_delay, push_coalesce and push_ttl must be positive")
	check(c.PushPreview == "full" || c.PushPreview == "hidden", `push_preview must be "full" or "hidden", got %q`, c.PushPreview)
	check(c.PushQueue > 0 && c.PushWorkers > 0, "push_queue and push_workers must be positive")
	check(c.MediaMaxFileBytes > 0, "media_max_file_bytes must be positive")
	check(c.MediaQuotaBytes > 0 || c.MediaQuotaBytes == -1, "media_quota_bytes must be positive or -1")
	check(c.MediaUploadRate > 0 || c.MediaUploadRate == -1, "media_upload_rate must be positive or -1")
	check(c.MediaURLTTL >= time.Second && c.MediaURLTTL <= 7*24*time.Hour, "media_url_ttl must be between 1s and 7 days")
	check(c.MediaUnattachedTTL >= time.Minute, "media_unattached_ttl must be at least 1m")
	check(c.MediaWorkers > 0 && c.MediaMaxPixels > 0, "media_workers and media_max_pixels must be positive")
	check(c.AccountExportTTL >= time.Minute, "account_export_ttl must be at least 1m")
	check(c.AccountExportWorkers > 0, "account_export_workers must be positive")
	check(c.AccountDeletedMessages == "erase" || c.AccountDeletedMessages == "keep",
		`account_deleted_messages must be "erase" or "keep", got %q`, c.AccountDeletedMessages)
	check((c.APNsKeyFile == "") == (c.APNsKeyID == "") && (c.APNsKeyFile == "") == (c.APNsTeamID == ""),
		"APNs needs apns_key_file, apns_key_id and apns_team_id together")
	check((c.WebPushVAPIDPublicKey == "") == (c.WebPushVAPIDPrivateKey == ""),
		"set webpush_vapid_public_key and webpush_vapid_private_key together")
	check(strings.HasPrefix(c.WebPushSubject, "mailto:") || strings.HasPrefix(c.WebPushSubject, "https://"),
		"webpush_subject must be a mailto: or https: URL, got %q", c.WebPushSubject)
	for i, u := range c.WebhookURLs {
		pu, err := url.Parse(u)
		// Named by position: a webhook URL may carry credentials.
		check(err == nil && (pu.Scheme == "http" || pu.Scheme == "https") && pu.Host != "", "webhook_urls[%d] is not an http(s) URL", i)
	}
	for i, h := range c.ModerationHooks {
		_, err := h.config()
		check(err == nil, "moderation_hooks[%d]: %v", i, err)
	}
	for i, l := range c.WordFilterLists {
		_, ok := moderation.ParseAction(l.Action)
		check(ok, "word_filter_lists[%d]: action must be mask or reject", i)
	}
	if c.NATSClusterAdvertise != "" {
		host, port, err := net.SplitHostPort(c.NATSClusterAdvertise)
		n, perr := strconv.Atoi(port)
		check(err == nil && host != "" && perr == nil && n > 0 && n < 65536,
			"nats_cluster_advertise %q is not a host:port", c.NATSClusterAdvertise)
		check(c.NATSClusterListen != "", "nats_cluster_advertise goes with nats_cluster_listen (embedded NATS)")
	}
	if c.clustered() {
		check(c.PostgresURL != "", "a cluster (nats_urls or nats_cluster_listen) needs postgres_url: the embedded store holds one node's data")
		// Secrets generated per node would make one node's tokens and keys
		// worthless on the others.
		check(c.TokenKey != "" && c.AppSecret != "" && len(c.AdminAPIKeys) > 0,
			"a cluster needs token_key, app_secret and admin_api_keys set, the same on every node")
		check(len(c.WebhookURLs) == 0 || c.WebhookSecret != "", "a cluster with webhooks needs webhook_secret set, the same on every node")
		check(len(c.NATSURLs) == 0 || c.NATSClusterListen == "", "set nats_urls (external NATS) or nats_cluster_listen (embedded), not both")
		if c.NATSClusterListen != "" {
			host, _, err := net.SplitHostPort(c.NATSClusterListen)
			check(err == nil, "nats_cluster_listen %q: %v", c.NATSClusterListen, err)
			ip, perr := netip.ParseAddr(host)
			loopback := host == "localhost" || (perr == nil && ip.IsLoopback())
			check(loopback || len(c.NATSClusterSecret) >= 16,
				"nats_cluster_secret (at least 16 bytes) is required when nats_cluster_listen is not a loopback address")
		}
		for _, r := range c.NATSRoutes {
			pu, err := url.Parse(r)
			check(err == nil && pu.Scheme == "nats" && pu.Host != "", "nats_routes: %q is not a nats://host:port URL", r)
		}
	}
	check(c.DrainWindow >= 0, "drain_window must not be negative")
	check(c.LogFormat == "text" || c.LogFormat == "json", `log_format must be "text" or "json", got %q`, c.LogFormat)
	_, err = parseLevel(c.LogLevel)
	check(err == nil, "log_level must be debug, info, warn or error, got %q", c.LogLevel)
	check(c.LogSampleFirst > 0 || c.LogSampleFirst == unlimited, "log_sample_first must be positive or -1 (no sampling), got %d", c.LogSampleFirst)
	check(c.LogSampleInterval > 0, "log_sample_interval must be positive")
	if err := c.Tracing.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
