// Package tracing is the thin layer between Parley's packages and
// OpenTelemetry: a Tracer the server builds from its configuration and hands
// to each package, W3C trace context for the cluster envelope and outgoing
// HTTP calls, and an HTTP middleware for the API.
//
// A nil *Tracer is tracing off. Every hook in a hot path checks for nil
// first and does nothing else, so a server without tracing allocates
// nothing and takes no lock for it; a span that is not sampled is dropped
// (returned as nil) at once, so the work behind it is skipped too.
package tracing

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracer starts Parley's spans. Build it with New; nil is off.
type Tracer struct {
	t trace.Tracer
}

// New returns a Tracer over tp (nil tp: nil, tracing off).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer("github.com/parleyim/parley")}
}

// Start starts a span under ctx's. It returns nil for the span (and ctx
// unchanged) when the sampler drops it, so callers skip what only a
// recorded span needs.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	sctx, sp := t.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if !sp.IsRecording() {
		sp.End()
		return ctx, nil
	}
	return sctx, sp
}

// StartLinked starts a span with no parent in this process that links to
// the spans of links (the sends a batch serves, say).
func (t *Tracer) StartLinked(name string, links []trace.Link, attrs ...attribute.KeyValue) trace.Span {
	_, sp := t.t.Start(context.Background(), name, trace.WithLinks(links...), trace.WithAttributes(attrs...))
	if !sp.IsRecording() {
		sp.End()
		return nil
	}
	return sp
}

// Fail marks sp as failed with err (no-op for a nil span or error).
func Fail(sp trace.Span, err error) {
	if sp != nil && err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
}

// traceContext is the W3C Trace Context propagator: the "traceparent" (and
// "tracestate") header. It has no state of its own.
var traceContext propagation.TraceContext

// oneHeader carries a traceparent in a string, for the cluster envelope.
type oneHeader struct{ v string }

func (h *oneHeader) Get(key string) string {
	if key == "traceparent" {
		return h.v
	}
	return ""
}
func (h *oneHeader) Set(key, v string) {
	if key == "traceparent" {
		h.v = v
	}
}
func (h *oneHeader) Keys() []string { return []string{"traceparent"} }

// Traceparent returns the W3C traceparent of ctx's span when it is sampled
// ("00-<trace id>-<span id>-01"), else "".
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	var h oneHeader
	traceContext.Inject(ctx, &h)
	return h.v
}

// Remote returns ctx with the span context a traceparent names as its
// remote parent; ctx unchanged when tp is empty or malformed.
func Remote(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, &oneHeader{v: tp})
}

// Handler wraps an HTTP handler with a server span per request, continuing
// a trace the caller's traceparent header names. Requests skip selects are
// passed through untraced (WebSocket upgrades: a connection is not one
// request). The span is named after the route pattern the mux matched.
func (t *Tracer) Handler(h http.Handler, skip func(*http.Request) bool) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			h.ServeHTTP(w, r)
			return
		}
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, sp := t.Start(ctx, "HTTP "+r.Method, trace.SpanKindServer,
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))
		if sp == nil {
			h.ServeHTTP(w, r)
			return
		}
		defer sp.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(ctx)
		h.ServeHTTP(sw, r)
		// ServeMux records the pattern it matched in the request it was
		// given ("GET /v1/users/{id}", or a path alone).
		if p := r.Pattern; p != "" {
			route := p
			if _, path, ok := strings.Cut(p, " "); ok {
				route = path
			}
			sp.SetName(r.Method + " " + route)
			sp.SetAttributes(attribute.String("http.route", route))
		}
		sp.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			sp.SetStatus(codes.Error, strconv.Itoa(sw.status))
		}
	})
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's own writer
// (flushes, deadlines, hijacking).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport wraps base (nil: http.DefaultTransport) with a client span per
// request, under the request context's span, and sends its traceparent so
// the receiving app can continue the trace. name names the span ("webhook",
// "moderation hook").
func (t *Tracer) Transport(base http.RoundTripper, name string) http.RoundTripper {
	if t == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, base: base, name: name}
}

type transport struct {
	t    *Tracer
	base http.RoundTripper
	name string
}

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, sp := tr.t.Start(r.Context(), tr.name, trace.SpanKindClient,
		attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Host))
	if sp == nil {
		return tr.base.RoundTrip(r)
	}
	defer sp.End()
	// A RoundTripper must not change the request it is given.
	r = r.Clone(ctx)
	traceContext.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := tr.base.RoundTrip(r)
	if err != nil {
		Fail(sp, err)
		return nil, err
	}
	sp.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		sp.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}

// CloseIdleConnections passes on to the wrapped transport (http.Client's
// CloseIdleConnections looks for it).
func (tr *transport) CloseIdleConnections() {
	if c, ok := tr.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
