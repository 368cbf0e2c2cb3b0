package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/parleyim/parley/internal/tracing"
)

// TracingConfig sends OpenTelemetry traces to an OTLP receiver (the
// OpenTelemetry Collector, Jaeger, Tempo, ...). Off unless Endpoint is set;
// see docs/operations.md, "Tracing".
type TracingConfig struct {
	// Endpoint is the receiver's URL, e.g. "http://collector:4318" (with
	// http/protobuf the path /v1/traces is added when the URL has none;
	// https: TLS). Default "": off.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "http/protobuf" (OTLP over HTTP, usually port 4318) or
	// "grpc" (usually port 4317), as OTEL_EXPORTER_OTLP_PROTOCOL names
	// them. Default "http/protobuf".
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of new traces recorded, 0 < r <= 1; -1
	// records only the traces an incoming HTTP request's sampled
	// traceparent continues. Either way a span whose parent was sampled is
	// sampled. Default 1 (every trace: lower it on a busy node).
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name resource attribute. Default "parley".
	ServiceName string `yaml:"service_name"`
	// Headers are sent with every export (an API key, say).
	Headers map[string]string `yaml:"headers"`
}

func (c TracingConfig) validate() error {
	if c.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tracing.endpoint %q: want an http:// or https:// URL", c.Endpoint)
	}
	if c.Protocol != "" && c.Protocol != "http/protobuf" && c.Protocol != "grpc" {
		return fmt.Errorf("tracing.protocol %q: want http/protobuf or grpc", c.Protocol)
	}
	if c.SampleRatio != -1 && (c.SampleRatio < 0 || c.SampleRatio > 1) {
		return fmt.Errorf("tracing.sample_ratio %v: want 0 < ratio <= 1, or -1", c.SampleRatio)
	}
	return nil
}

// tracer is the server's tracing: the provider that batches spans to the
// exporter, and the Tracer handed to every part. Both nil when off.
type tracer struct {
	provider *sdktrace.TracerProvider
	t        *tracing.Tracer
}

// newTracer builds the span pipeline of c; an empty endpoint gives the
// zero tracer (off). Nothing is global: the provider goes to each part
// through its config, so several servers in one process trace apart.
func newTracer(c TracingConfig, log *slog.Logger) (tracer, error) {
	if c.Endpoint == "" {
		return tracer{}, nil
	}
	if err := c.validate(); err != nil {
		return tracer{}, err
	}
	var exp sdktrace.SpanExporter
	var err error
	if c.Protocol == "grpc" {
		// The connection is made lazily: a receiver that is down fails
		// exports (retried, then dropped), never the start.
		exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(c.Endpoint),
			otlptracegrpc.WithHeaders(c.Headers), otlptracegrpc.WithTimeout(10*time.Second))
	} else {
		u, _ := url.Parse(c.Endpoint) // validated
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()),
			otlptracehttp.WithHeaders(c.Headers), otlptracehttp.WithTimeout(10*time.Second))
	}
	if err != nil {
		return tracer{}, fmt.Errorf("tracing: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "parley"
	}
	var root sdktrace.Sampler
	switch ratio := c.SampleRatio; {
	case ratio == -1:
		root = sdktrace.NeverSample()
	case ratio == 0 || ratio >= 1:
		root = sdktrace.AlwaysSample()
	default:
		root = sdktrace.TraceIDRatioBased(ratio)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, log: log, endpoint: c.Endpoint}),
		sdktrace.WithSampler(sdktrace.ParentBased(root)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	return tracer{provider: tp, t: tracing.New(tp)}, nil
}

// handler traces the HTTP API's requests; WebSocket connections are left
// out (their frames are traced instead).
func (t tracer) handler(h http.Handler) http.Handler {
	return t.t.Handler(h, func(r *http.Request) bool {
		return r.URL.Path == "/ws" || strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	})
}

// shutdownWait bounds the last export at shutdown: a receiver that does
// not answer must not hold up a node that is stopping.
const shutdownWait = 3 * time.Second

// shutdown exports the spans still batched, within ctx and shutdownWait.
func (t tracer) shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, shutdownWait)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: %w", err)
	}
	return nil
}

// loggedExporter reports failed exports in the server's log, once when
// they start failing and once when they recover, instead of leaving them
// to OpenTelemetry's process-wide error handler (the standard logger, once
// per batch).
type loggedExporter struct {
	sdktrace.SpanExporter
	log      *slog.Logger
	endpoint string
	failing  atomic.Bool
}

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		if !e.failing.Swap(true) {
			e.log.Warn("tracing: spans not exported, dropped until the receiver answers", "endpoint", e.endpoint, "err", err)
		}
		return nil // reported: the batch is dropped either way
	}
	if e.failing.Swap(false) {
		e.log.Info("tracing: the receiver answers again", "endpoint", e.endpoint)
	}
	return nil
}
