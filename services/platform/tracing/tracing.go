// Package tracing is OpenTelemetry tracing for every mnv process: gateway → services → Postgres,
// with W3C trace context between them.
//
// It is off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the standard variables). Off means off: the HTTP handler,
// the gRPC stats handlers and the pgx tracer are not installed at all, so the request path
// pays nothing. Setup decides once, at process start (process.Main), before the apps are
// built; the constructors ask Enabled when they build their servers, clients and pools.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/mnvhq/mnv/services/platform/config"
)

var enabled atomic.Bool

// Enabled reports whether spans are recorded and exported in this process.
func Enabled() bool { return enabled.Load() }

// Install makes tp the process's tracer provider, with W3C trace context and baggage
// propagation, and turns the instrumentation on for what is built afterwards. It returns a
// function that puts back what was there (for tests).
func Install(tp trace.TracerProvider) (restore func()) {
	prevTP, prevProp, prevOn := otel.GetTracerProvider(), otel.GetTextMapPropagator(), enabled.Load()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
	return func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		enabled.Store(prevOn)
	}
}

// Setup turns tracing on when env configures an OTLP endpoint, naming the process service
// (OTEL_SERVICE_NAME overrides it). The returned shutdown flushes the spans not yet exported;
// it is a no-op when tracing is off.
//
// Variables: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns it on;
// OTEL_EXPORTER_OTLP_PROTOCOL (or …_TRACES_PROTOCOL) is "http/protobuf" (the default, port
// 4318) or "grpc" (port 4317); OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keep it
// off. The exporters and the SDK read the other standard variables themselves
// (OTEL_EXPORTER_OTLP_HEADERS, …_TIMEOUT, …_CERTIFICATE, OTEL_TRACES_SAMPLER[_ARG],
// OTEL_RESOURCE_ATTRIBUTES).
func Setup(ctx context.Context, env *config.Env, service string, log *zap.Logger) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	endpoint := env.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env.String("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
	if endpoint == "" || env.Bool("OTEL_SDK_DISABLED", false) || strings.EqualFold(env.String("OTEL_TRACES_EXPORTER", "otlp"), "none") {
		return noop, nil
	}
	protocol := env.String("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.String("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
	var exp sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return noop, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return noop, fmt.Errorf("trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// An exporter that cannot reach its collector says so here, not on stderr.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", zap.Error(err)) }))
	restore := Install(tp)
	log.Info("tracing on", zap.String("protocol", protocol))
	return func(ctx context.Context) error {
		defer restore()
		return tp.Shutdown(ctx)
	}, nil
}

// notTraced leaves health checks and scrapes out of traces: they are frequent and say nothing.
func notTraced(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// Handler wraps the HTTP edge: one server span per request, named by the route once it is known
// (see SetRoute). A trace context sent by the client starts a new trace linked to it, never a
// child of it: the internet does not choose our trace ids or sampling. Without tracing, h.
//
// A span holds neither the ids of the request's path (a browser flow's transaction id is the
// capability to capture it, and trace backends are read by more people than the database) nor
// a method the client made up (each would be a span name of its own).
func Handler(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	redacted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attrs := []attribute.KeyValue{semconv.URLPath(redactPath(r.URL.Path))}
		if !standardMethod(r.Method) {
			attrs = append(attrs, semconv.HTTPRequestMethodOriginal("_OTHER"))
		}
		trace.SpanFromContext(r.Context()).SetAttributes(attrs...)
		h.ServeHTTP(w, r)
	})
	return otelhttp.NewHandler(redacted, "http",
		otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }),
		otelhttp.WithFilter(func(r *http.Request) bool { return !notTraced(r.URL.Path) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if standardMethod(r.Method) {
				return r.Method
			}
			return "HTTP"
		}),
	)
}

// standardMethod reports whether m is one of the methods of RFC 9110 and PATCH.
func standardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// redactPath keeps the words of a path (the fixed segments of our routes: lower-case letters,
// dots and dashes, short) and replaces every other segment, the ids, with "{id}".
func redactPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s != "" && s != "v1" && (len(s) > 20 || strings.ContainsFunc(s, func(r rune) bool {
			return (r < 'a' || r > 'z') && r != '-' && r != '.'
		})) {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}

// SetRoute names the request's server span by its route pattern, once the router knows it
// (spans are named by route, never by raw path: ids would make every name unique).
func SetRoute(ctx context.Context, method, pattern string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetName(method + " " + pattern)
	span.SetAttributes(semconv.HTTPRoute(pattern))
}

// ServerOptions are the options of a gRPC server: a server span per call, continuing the
// caller's trace (callers are our own services). Health checks are not traced.
func ServerOptions() []grpc.ServerOption {
	if !Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))))}
}

// DialOptions are the options of a gRPC client of another mnv service: a client span per call,
// and the trace context passed on in the metadata.
func DialOptions() []grpc.DialOption {
	if !Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))))}
}

// ShutdownTimeout bounds the final flush of spans at exit.
const ShutdownTimeout = 5 * time.Second
