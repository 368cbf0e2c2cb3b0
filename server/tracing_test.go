package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// Tracing is checked against a real OTLP/HTTP receiver: a loopback HTTP
// server that decodes each export with the OpenTelemetry proto module, as a
// collector would, and keeps the spans with the service that sent them.

type gotSpan struct {
	*tracepb.Span
	service string
}

func (s gotSpan) attr(key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []gotSpan
	bad   []string // requests that were not valid exports
}

func startOTLP(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var ex coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &ex)
		}
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.mu.Lock()
			r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
			r.mu.Unlock()
			http.Error(w, "not an OTLP export", 400)
			return
		}
		r.keep(&ex)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// keep records the spans of one export.
func (r *otlpReceiver) keep(ex *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range ex.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				r.spans = append(r.spans, gotSpan{Span: sp, service: service})
			}
		}
	}
}

// otlpGRPC is the same receiver over OTLP/gRPC: the proto module's own
// service definition on a real gRPC server.
type otlpGRPC struct {
	coltracepb.UnimplementedTraceServiceServer
	otlpReceiver
	addr    string
	apiKeys []string // the x-api-key metadata of each export
}

func (g *otlpGRPC) Export(ctx context.Context, ex *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.mu.Lock()
	g.apiKeys = append(g.apiKeys, md.Get("x-api-key")...)
	g.mu.Unlock()
	g.keep(ex)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startOTLPGRPC(t *testing.T) *otlpGRPC {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &otlpGRPC{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, g)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return g
}

func (r *otlpReceiver) all(t *testing.T) []gotSpan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("the exporter sent requests that are not OTLP exports: %v", r.bad)
	}
	return append([]gotSpan(nil), r.spans...)
}

// named returns the spans called name, and those with parent as parent
// span when parent is not nil.
func named(spans []gotSpan, name string, parent *gotSpan) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if s.Name == name && (parent == nil || bytes.Equal(s.ParentSpanId, parent.SpanId) && bytes.Equal(s.TraceId, parent.TraceId)) {
			out = append(out, s)
		}
	}
	return out
}

// only returns the one span called name under parent, failing t otherwise.
func only(t *testing.T, spans []gotSpan, name string, parent *gotSpan) gotSpan {
	t.Helper()
	got := named(spans, name, parent)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.service+":"+s.Name)
		}
		t.Fatalf("%d spans %q under %v, want 1; all spans: %v", len(got), name, parent.GetSpanId(), names)
	}
	return got[0]
}

// With an endpoint configured, a node exports a span per login and HTTP
// request, and a send's spans chain send → commit → ack → deliver; a
// duplicate is marked at its commit and not delivered again; a webhook call
// is a client span whose traceparent the app receives.
func TestTracingSpans(t *testing.T) {
	t.Parallel()
	otlp := startOTLP(t)
	var hookMu sync.Mutex
	var hookParents []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookMu.Lock()
		hookParents = append(hookParents, r.Header.Get("Traceparent"))
		hookMu.Unlock()
	}))
	defer hook.Close()
	ts := startServer(t, func(c *server.Config) {
		c.Tracing = server.TracingConfig{Endpoint: otlp.URL, SampleRatio: 1, ServiceName: "parley-test",
			Headers: map[string]string{"x-api-key": "k"}}
		c.WebhookURLs, c.WebhookEvents = []string{hook.URL}, []string{"message.stored"}
	})
	tcp := transports[2]
	alice, _ := ts.connect(t, "alice", "a1", "phone", tcp)
	_, bobRec := ts.connect(t, "bob", "b1", "phone", tcp)
	ctx := ctx10(t)
	send := &pb.Send{ClientMsgId: "m1", To: "bob", ContentType: "text", Payload: []byte("traced")}
	ack, err := alice.Send(ctx, send)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the message", func() bool { return bobRec.count() == 1 })
	if again, err := alice.Send(ctx, send); err != nil || !again.Duplicate {
		t.Fatalf("the retry: %v, %v; want a duplicate ACK", again, err)
	}
	eventually(t, "the webhook is called", func() bool { hookMu.Lock(); defer hookMu.Unlock(); return len(hookParents) > 0 })

	// An HTTP call that carries a trace of its caller's is continued.
	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	code, _ := httpDo(t, "GET", ts.httpBase+"/v1/admin/users/alice/sessions", map[string]string{
		"Authorization": "Bearer " + testAPIKey, "traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}, nil)
	if code != 200 {
		t.Fatalf("sessions: HTTP %d", code)
	}
	shutdown(t, ts) // exports what is batched
	spans := otlp.all(t)

	logins := named(spans, "parley.login", nil)
	if len(logins) != 2 {
		t.Fatalf("%d login spans, want 2", len(logins))
	}
	for _, l := range logins {
		if l.service != "parley-test" || l.attr("parley.session").GetStringValue() == "" || l.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Fatalf("login span %v from %q", l, l.service)
		}
	}

	sends := named(spans, "parley.send", nil)
	if len(sends) != 2 {
		t.Fatalf("%d send spans, want 2 (the send and its retry)", len(sends))
	}
	var delivered, dup int
	for _, s := range sends {
		s := s
		if len(s.ParentSpanId) != 0 {
			t.Fatalf("a send span has a parent: %x", s.ParentSpanId)
		}
		commit := only(t, spans, "parley.commit", &s)
		if commit.attr("parley.batch.size").GetIntValue() < 1 || commit.attr("parley.seq").GetIntValue() != int64(ack.Seq) ||
			commit.attr("parley.conversation").GetStringValue() != ack.ConversationId {
			t.Fatalf("commit span attributes %v, want the ACK's conversation and seq %d", commit.Attributes, ack.Seq)
		}
		ackSpan := only(t, spans, "parley.ack", &commit)
		if commit.attr("parley.duplicate").GetBoolValue() {
			dup++
			if n := len(named(spans, "parley.deliver", &ackSpan)); n != 0 {
				t.Fatalf("a duplicate has %d delivery spans", n)
			}
			continue
		}
		delivered++
		d := only(t, spans, "parley.deliver", &ackSpan)
		if d.Kind != tracepb.Span_SPAN_KIND_PRODUCER || d.EndTimeUnixNano < d.StartTimeUnixNano {
			t.Fatalf("delivery span %v", d)
		}
	}
	if delivered != 1 || dup != 1 {
		t.Fatalf("%d delivered and %d duplicate sends, want 1 and 1", delivered, dup)
	}

	var api *gotSpan
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == callerTrace {
			api = &s
		}
	}
	if api == nil || hex.EncodeToString(api.ParentSpanId) != callerSpan || api.Name != "GET /v1/admin/users/{id}/sessions" ||
		api.attr("http.route").GetStringValue() != "/v1/admin/users/{id}/sessions" || api.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		api.attr("http.response.status_code").GetIntValue() != 200 || !strings.Contains(api.attr("url.path").GetStringValue(), "/sessions") {
		t.Fatalf("no server span continuing the caller's trace: %v", api)
	}

	hooks := named(spans, "parley.webhook", nil)
	if len(hooks) == 0 {
		t.Fatal("no webhook span")
	}
	hookMu.Lock()
	defer hookMu.Unlock()
	want := "00-" + hex.EncodeToString(hooks[0].TraceId) + "-" + hex.EncodeToString(hooks[0].SpanId) + "-01"
	if hookParents[0] != want || hooks[0].Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Fatalf("the webhook got traceparent %q; its span is %s", hookParents[0], want)
	}
}

// A sample ratio of -1 records only what a sampled caller's trace
// continues: sends and logins are not traced, an HTTP call that says its
// trace is sampled is.
func TestTracingParentOnly(t *testing.T) {
	t.Parallel()
	otlp := startOTLP(t)
	ts := startServer(t, func(c *server.Config) {
		c.Tracing = server.TracingConfig{Endpoint: otlp.URL + "/", SampleRatio: -1}
	})
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "m1", To: "bob", ContentType: "text", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tp := range []string{"", "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", caller} {
		if code, _ := httpDo(t, "GET", ts.httpBase+"/healthz", map[string]string{"traceparent": tp}, nil); code != 200 {
			t.Fatalf("healthz: %d", code)
		}
	}
	shutdown(t, ts)
	spans := otlp.all(t)
	if len(spans) != 1 || hex.EncodeToString(spans[0].ParentSpanId) != "b7ad6b7169203331" || spans[0].service != "parley" {
		t.Fatalf("spans %v; want only the sampled caller's HTTP call, from service parley", spans)
	}
}

// A bad tracing configuration is refused at start, naming the key.
func TestTracingConfigRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []server.TracingConfig{
		{Endpoint: "collector:4318"},
		{Endpoint: "ftp://collector"},
		{Endpoint: "http://collector:4318", SampleRatio: 2},
		{Endpoint: "http://collector:4318", SampleRatio: -0.5},
		{Endpoint: "http://collector:4318", Protocol: "thrift"},
	} {
		_, err := server.New(server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0", Tracing: tc})
		if err == nil || !strings.Contains(err.Error(), "tracing.") {
			t.Fatalf("%+v: %v, want an error naming the tracing key", tc, err)
		}
	}
}

// A delivery to another node continues the sender's trace there: the
// receiving node's span has the sending node's delivery span as parent.
func TestTracingAcrossNodes(t *testing.T) {
	otlp := startOTLP(t)
	nodes := startCluster(t, 2, func(i int, c *server.Config) {
		c.Tracing = server.TracingConfig{Endpoint: otlp.URL, ServiceName: []string{"node-a", "node-b"}[i]}
	})
	alice, _ := dialObserved(t, nodes[0], "alice", "a1", "phone")
	_, bobRec := dialObserved(t, nodes[1], "bob", "b1", "phone")
	waitKnown(t, nodes, "alice", "bob")
	if _, err := alice.SendToConversation(ctx10(t), "p:alice:bob", "text/plain", []byte("across")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets it on the other node", func() bool { return len(bobRec.texts("p:alice:bob")) == 1 })
	shutdown(t, nodes[0])
	shutdown(t, nodes[1])
	spans := otlp.all(t)
	send := only(t, spans, "parley.send", nil)
	commit := only(t, spans, "parley.commit", &send)
	ack := only(t, spans, "parley.ack", &commit)
	deliver := only(t, spans, "parley.deliver", &ack)
	hop := only(t, spans, "parley.cluster.receive", &deliver)
	if send.service != "node-a" || hop.service != "node-b" || hop.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Fatalf("send from %q, cluster receive from %q (%v); want node-a then node-b", send.service, hop.service, hop.Kind)
	}
}

// protocol: grpc exports the same spans over OTLP/gRPC, with the headers
// as metadata.
func TestTracingGRPC(t *testing.T) {
	t.Parallel()
	otlp := startOTLPGRPC(t)
	ts := startServer(t, func(c *server.Config) {
		c.Tracing = server.TracingConfig{Endpoint: "http://" + otlp.addr, Protocol: "grpc", Headers: map[string]string{"x-api-key": "k1"}}
	})
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "m1", To: "bob", ContentType: "text", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	shutdown(t, ts)
	spans := otlp.all(t)
	send := only(t, spans, "parley.send", nil)
	commit := only(t, spans, "parley.commit", &send)
	only(t, spans, "parley.ack", &commit)
	only(t, spans, "parley.login", nil)
	otlp.mu.Lock()
	defer otlp.mu.Unlock()
	if len(otlp.apiKeys) == 0 || otlp.apiKeys[0] != "k1" {
		t.Fatalf("exports carried x-api-key %v, want k1", otlp.apiKeys)
	}
}

// A receiver that does not answer fails no request and stops no node: the
// node says once, in its own log, that spans are being dropped.
func TestTracingReceiverDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	var logMu sync.Mutex
	var logBuf bytes.Buffer
	ts := startServer(t, func(c *server.Config) {
		c.Tracing = server.TracingConfig{Endpoint: down}
		c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	})
	for range 3 {
		if code, _ := httpDo(t, "GET", ts.httpBase+"/healthz", nil, nil); code != 200 {
			t.Fatalf("healthz with the receiver down: %d", code)
		}
	}
	shutdown(t, ts)
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logBuf.String(), "spans not exported"); n != 1 || !strings.Contains(logBuf.String(), down) {
		t.Fatalf("%d warnings about dropped spans, want 1 naming %s; log:\n%s", n, down, logBuf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
