// Package middleware holds the HTTP middlewares of the gateway, outermost first: the drain of
// unread bodies, request id, panic recovery, access log and metrics, removal of untrusted
// headers, body limit.
package middleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// RequestID gives every request an id: the caller's X-Request-Id when it is sane, else a new
// one. It is echoed on the response, put in the context and forwarded to the services.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestid.Header)
		if len(r.Header.Values(requestid.Header)) != 1 || !requestid.Valid(id) {
			id = requestid.New()
			r.Header.Set(requestid.Header, id)
		}
		w.Header().Set(requestid.Header, id)
		next.ServeHTTP(w, r.WithContext(requestid.With(r.Context(), id)))
	})
}

// untrusted are request headers a client must not be able to pass to the services:
// grpc-gateway forwards Authorization as gRPC metadata whatever the header matcher says (the
// services' own credential travels there), and derives x-forwarded-for/-host from these
// headers when present, which would let a client choose the address the services see.
var untrusted = []string{"Authorization", "X-Forwarded-For", "X-Forwarded-Host", "Forwarded", "Grpc-Timeout"}

// StripUntrusted removes the untrusted headers before anything reads them.
func StripUntrusted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range untrusted {
			r.Header.Del(h)
		}
		next.ServeHTTP(w, r)
	})
}

// Recover answers a panic with a 500 envelope instead of a dropped connection.
func Recover(log *zap.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler { //nolint:errorlint // p is a recovered value, compared as net/http documents
						panic(p)
					}
					log.Error("panic in HTTP handler", zap.Any("panic", p), logging.Request(r.Context()), zap.Stack("stack"))
					envelope.WriteError(w, envelope.Internal(r.Context()))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

type routeKey struct{}

// route is filled in by RouteMiddleware once the mux has matched a route, so the outer access
// log and metrics can label by route pattern rather than by raw path (ids in paths would make
// unbounded label values), and the inner handlers read the pattern without rebuilding it.
type route struct{ pattern string }

// RouteMiddleware records the matched route pattern for Observe and for Pattern, and names the
// request's span (when traced) after it.
func RouteMiddleware() runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			if p, ok := runtime.HTTPPattern(r.Context()); ok {
				pattern := p.String()
				if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
					rt.pattern = pattern
				} else {
					r = r.WithContext(context.WithValue(r.Context(), routeKey{}, &route{pattern: pattern}))
				}
				tracing.SetRoute(r.Context(), r.Method, pattern)
			}
			next(w, r, params)
		}
	}
}

// Pattern returns the route pattern RouteMiddleware recorded for the request of ctx, as
// grpc-gateway's Pattern.String writes it; ok is false before (or without) it.
func Pattern(ctx context.Context) (pattern string, ok bool) {
	rt, _ := ctx.Value(routeKey{}).(*route)
	if rt == nil || rt.pattern == "" {
		return "", false
	}
	return rt.pattern, true
}

// Metrics are the gateway's RED metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "gateway", Name: "http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mnv", Subsystem: "gateway", Name: "http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// methodLabel is the method as metrics and logs name it: the standard methods by their name,
// anything else OTHER. The client chooses the method, and every new label value would be a
// series kept for the life of the process (curl -X FOO$RANDOM, repeated).
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// Observe writes the access log line and the metrics of every request. It logs the request id
// (and the trace's ids when traced), method, route pattern, status, size and duration; never
// headers, bodies or query strings.
func Observe(log *zap.Logger, m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rt := &route{}
			rec := &recorder{ResponseWriter: w}
			next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)))
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			elapsed := time.Since(start)
			pattern := rt.pattern
			if pattern == "" {
				pattern = "unmatched"
			}
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(pattern, method, strconv.Itoa(rec.status)).Inc()
			m.duration.WithLabelValues(pattern, method).Observe(elapsed.Seconds())
			level := zap.DebugLevel
			switch {
			case rec.status >= 500:
				level = zap.ErrorLevel
			case rec.status >= 400:
				level = zap.InfoLevel
			}
			if ce := log.Check(level, "http request"); ce != nil {
				ce.Write(logging.Request(r.Context()), zap.String("method", method),
					zap.String("route", pattern), zap.Int("status", rec.status), zap.Int("bytes", rec.bytes),
					zap.Duration("duration", elapsed))
			}
		})
	}
}

// DrainBody reads what the handler left of a request body, after its answer is flushed, up to
// max bytes and for at most wait. A server that answers early (413, 401, 404 before reading)
// and closes with unread data makes the kernel reset the connection, and a client that writes
// its whole body before reading then gets the reset instead of the answer; net/http itself
// drains only 256 KiB. Beyond the bound, the connection is closed all the same.
func DrainBody(max int64, wait time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			// The body as the server gave it: inner handlers may replace r.Body (BodyLimit does).
			body := &eofReader{ReadCloser: r.Body}
			r.Body = body
			next.ServeHTTP(w, r)
			if body.eof {
				// Read to its end, as every answered request is: nothing to drain, and no flush,
				// which would cost the answer its Content-Length (chunked instead) and a write.
				return
			}
			rc := http.NewResponseController(w)
			// The client reads its answer now, whatever the drain does.
			if err := rc.Flush(); err != nil {
				return
			}
			_ = rc.SetReadDeadline(time.Now().Add(wait))
			_, _ = io.CopyN(io.Discard, body, max)
		})
	}
}

// eofReader tells whether its reader was read to its end.
type eofReader struct {
	io.ReadCloser
	eof bool
}

func (r *eofReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		r.eof = true
	}
	return n, err
}

// BodyLimit reads request bodies up to limit bytes and answers 413 beyond it, before any
// decoding. Routes for which streaming reports true (large uploads) are left alone.
func BodyLimit(limit int64, streaming func(*http.Request) bool) func(http.Handler) http.Handler {
	tooLarge := envelope.Error{
		Status: http.StatusRequestEntityTooLarge, Code: string(fault.PayloadTooLarge),
		Message: "the request body is larger than " + strconv.FormatInt(limit>>10, 10) + " KiB",
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody || (streaming != nil && streaming(r)) {
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > limit {
				envelope.WriteError(w, tooLarge)
				return
			}
			data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				envelope.WriteError(w, envelope.Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument), Message: "the request body could not be read"})
				return
			}
			if int64(len(data)) > limit {
				envelope.WriteError(w, tooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data))
			next.ServeHTTP(w, r)
		})
	}
}

// CleanPath answers 404 in the envelope for a path that is not in its clean form (an empty,
// "." or ".." segment: "//", "/./", "/../"), where http.ServeMux would answer an HTML redirect
// to the cleaned path. A client that built such a path has a bug to fix, and a redirect would
// hide it, or follow it to another route than the one it wrote.
func CleanPath(next http.Handler) http.Handler {
	notClean := envelope.Error{
		Status: http.StatusNotFound, Code: string(fault.NotFound),
		Message: `no such path: a path has no empty, "." or ".." segments (no "//", "/./" or "/../")`,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && cleaned(p) != p {
			envelope.WriteError(w, notClean)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleaned is p as http.ServeMux cleans it: path.Clean, keeping a trailing slash.
func cleaned(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c
}
