package chat

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/tracing"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Tracing of a send (docs/architecture.md, "Tracing"). A sampled send is a
// trace of its own:
//
//	parley.send             the Send frame, from its arrival to its ACK
//	  parley.hook           the before-send hooks' decision, if asked
//	  parley.commit         the storage batch that stored it (de-dup included)
//	    parley.ack          its SendAck and the hand-off to delivery
//	      parley.deliver    its delivery, until the batch's writes are flushed
//	        parley.cluster.receive   (on every other node it reaches)
//
// A commit batch serves many sends: each sampled send gets a commit span of
// its own over the same interval, with the batch's size and number, so one
// send's trace reads top to bottom; the batch is not a span of its own.
// Every hook here is reached only when s.tr != nil, and the spans of a send
// the sampler dropped are never made (p.trace stays nil).

// sendTrace is a sampled send's spans, handed along with its pendingSend.
type sendTrace struct {
	send, commit trace.Span // commit: nil until its batch is stored
	ack          trace.Span // nil until deliverLoop takes it
}

// startSend starts the span of a Send frame; st is nil when not sampled.
func (s *Service) startSend(ctx context.Context, m *pb.Send) (context.Context, *sendTrace) {
	ctx, sp := s.tr.Start(ctx, "parley.send", trace.SpanKindServer,
		attribute.Int("parley.payload_bytes", len(m.Payload)))
	if sp == nil {
		return ctx, nil
	}
	return ctx, &sendTrace{send: sp}
}

// refused ends a send answered with err before it was stored.
func (st *sendTrace) refused(err error) {
	if st != nil {
		tracing.Fail(st.send, err)
		st.send.End()
	}
}

// end ends a send whose storage failed with err.
func (st *sendTrace) end(err error) {
	tracing.Fail(st.commit, err)
	if st.commit != nil {
		st.commit.End()
	}
	st.refused(err)
}

// acked ends a stored send's spans once it is ACKed and handed to delivery.
func (st *sendTrace) acked() {
	if st.ack != nil {
		st.ack.End()
	}
	st.send.End()
}

// traceCommit starts the commit span of each sampled send of batch, all
// with the batch's size and number. Called by the committer only.
func (s *Service) traceCommit(batch []*pendingSend) {
	n := s.stats.batches.Load() + 1
	for _, p := range batch {
		if p.trace == nil {
			continue
		}
		_, p.trace.commit = s.tr.Start(trace.ContextWithSpan(context.Background(), p.trace.send), "parley.commit",
			trace.SpanKindInternal, attribute.Int("parley.batch.size", len(batch)), attribute.Int64("parley.batch", int64(n)))
	}
}

// traceCommitted records what storage answered each sampled send (de-dup
// happens in the same write: a retry is found there, marked duplicate) and
// ends the commit spans of the stored ones.
func traceCommitted(batch []*pendingSend, res []store.AppendResult, errs []error) {
	for i, p := range batch {
		if p.trace == nil || p.trace.commit == nil {
			continue
		}
		if errs[i] != nil {
			continue // ended with the error by deliverLoop
		}
		m := res[i].Msg
		p.trace.commit.SetAttributes(attribute.Bool("parley.duplicate", res[i].Duplicate),
			attribute.String("parley.conversation", m.GetConversationId()), attribute.Int64("parley.seq", int64(m.GetSeq())))
		p.trace.commit.End()
	}
}

// traceAck starts the ack span of a stored send and, unless it is a
// duplicate, its delivery span; it returns the context to deliver under
// (which carries the delivery span to other nodes). The delivery spans end
// when the batch's held writes are flushed (tracedDelivered).
func (s *Service) traceAck(ctx context.Context, st *sendTrace, r store.AppendResult) context.Context {
	parent := st.commit
	if parent == nil {
		parent = st.send
	}
	actx, ack := s.tr.Start(trace.ContextWithSpan(ctx, parent), "parley.ack", trace.SpanKindInternal)
	if ack == nil {
		return ctx
	}
	st.ack = ack
	if r.Duplicate {
		return ctx
	}
	dctx, d := s.tr.Start(actx, "parley.deliver", trace.SpanKindProducer,
		attribute.String("parley.conversation", r.Msg.GetConversationId()))
	if d == nil {
		return ctx
	}
	s.delivering = append(s.delivering, d)
	return dctx
}

// tracedDelivered ends the delivery spans of a batch whose writes were
// flushed. deliverLoop only.
func (s *Service) tracedDelivered() {
	for _, d := range s.delivering {
		d.End()
	}
	clear(s.delivering)
	s.delivering = s.delivering[:0]
}

// traceHook starts the span of a before-send hook decision under a sampled
// send's span (nil when not traced).
func (s *Service) traceHook(ctx context.Context, st *sendTrace, event string) trace.Span {
	if st == nil {
		return nil
	}
	_, sp := s.tr.Start(ctx, "parley.hook", trace.SpanKindClient, attribute.String("parley.hook.event", event))
	return sp
}

// endSpan ends sp (if any), failed when err is set.
func endSpan(sp trace.Span, err error) {
	if sp != nil {
		tracing.Fail(sp, err)
		sp.End()
	}
}

// startLogin starts the span of an Auth frame (nil: not traced or sampled).
func (s *Service) startLogin(ctx context.Context) trace.Span {
	if s.tr == nil {
		return nil
	}
	_, sp := s.tr.Start(ctx, "parley.login", trace.SpanKindServer)
	return sp
}

// endLogin ends a login's span: failed with the code it was refused with
// (UNSPECIFIED: admitted as session sess).
func endLogin(sp trace.Span, refused pb.ErrorCode, sess string) {
	if refused != pb.ErrorCode_ERROR_CODE_UNSPECIFIED {
		sp.SetAttributes(attribute.String("parley.error", refused.String()))
		sp.SetStatus(codes.Error, refused.String())
	} else {
		sp.SetAttributes(attribute.String("parley.session", sess))
	}
	sp.End()
}
