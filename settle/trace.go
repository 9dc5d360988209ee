package settle

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// batchSpan starts the span of one settlement batch (the entries written
// in one ledger transaction, then acknowledged); nil when not tracing.
func (w *Worker) batchSpan(ctx context.Context, sh shard, es []redisstore.Entry) (context.Context, trace.Span) {
	if w.cfg.Tracer == nil || len(es) == 0 {
		return ctx, nil
	}
	stream, kind := sh.names()
	return w.cfg.Tracer.Start(ctx, "hongbao.settle.batch", trace.WithAttributes(
		attribute.String("hongbao."+kind, sh.id), attribute.String("hongbao.stream", stream),
		attribute.Int("hongbao.settle.entries", len(es))))
}

// ledgerSpan starts the span of one ledger transaction writing items
// items; nil when not tracing.
func (w *Worker) ledgerSpan(ctx context.Context, name string, items int) (context.Context, trace.Span) {
	if w.cfg.Tracer == nil {
		return ctx, nil
	}
	return w.cfg.Tracer.Start(ctx, name, trace.WithAttributes(attribute.Int("hongbao.ledger.items", items)))
}

// endSpan ends span, if any, marked failed by err when not nil.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
