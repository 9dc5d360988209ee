package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingOn says whether traces are asked for: --otlp-endpoint, or the
// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, unless OTEL_SDK_DISABLED
// is true.
func tracingOn(getenv func(string) string, endpoint string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// openTracer starts an OTLP/HTTP trace exporter and returns the tracer of
// the process, and the closer that flushes what is buffered; a nil tracer
// when tracing is off (the default), which costs nothing. endpoint, when
// set, is the collector's URL (http://collector:4318, whose /v1/traces
// receives them, or the full URL of a path of its own); the exporter reads
// the other OTEL_EXPORTER_OTLP_* variables, the SDK OTEL_TRACES_SAMPLER
// and OTEL_BSP_*, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func openTracer(ctx context.Context, getenv func(string) string, endpoint, name string, errs func(error)) (trace.Tracer, func(), error) {
	if !tracingOn(getenv, endpoint) {
		return nil, func() {}, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, usageErrorf("--otlp-endpoint: %q is not an http(s) URL", endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			// The collector's address, as OTEL_EXPORTER_OTLP_ENDPOINT
			// gives it: traces go to its /v1/traces.
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, usageErrorf("--otlp-endpoint: %v", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "hongbao")),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, nil, fmt.Errorf("tracing resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(errs))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			errs(err)
		}
	}
	return tp.Tracer("github.com/hongbao/hongbao/" + name), stop, nil
}
