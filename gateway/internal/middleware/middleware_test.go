package middleware_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/gateway/internal/middleware"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/requestid"
)

func TestStripUntrusted(t *testing.T) {
	var seen http.Header
	h := middleware.StripUntrusted(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }))
	req := httptest.NewRequest(http.MethodGet, "/v1/api/clients", nil)
	for _, k := range []string{"Authorization", "X-Forwarded-For", "X-Forwarded-Host", "Forwarded", "Grpc-Timeout"} {
		req.Header.Set(k, "x")
	}
	req.Header.Set("X-Api-Key", "kept")
	h.ServeHTTP(httptest.NewRecorder(), req)
	for k := range seen {
		if k != "X-Api-Key" {
			t.Errorf("%s reached the handler", k)
		}
	}
	if seen.Get("X-Api-Key") != "kept" {
		t.Error("X-Api-Key was removed")
	}
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		name string
		sent []string
		echo bool
	}{
		{"none", nil, false},
		{"valid", []string{"abc-123"}, true},
		{"too long", []string{strings.Repeat("a", 129)}, false},
		{"with space", []string{"a b"}, false},
		{"twice", []string{"a", "b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inCtx, inHeader string
			h := middleware.RequestID(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				inCtx, inHeader = requestid.From(r.Context()), r.Header.Get(requestid.Header)
			}))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, v := range tt.sent {
				req.Header.Add(requestid.Header, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			got := w.Header().Get(requestid.Header)
			if got == "" || got != inCtx || got != inHeader {
				t.Fatalf("response %q, context %q, forwarded %q: want one id everywhere", got, inCtx, inHeader)
			}
			if echoed := len(tt.sent) > 0 && got == tt.sent[0]; echoed != tt.echo {
				t.Fatalf("echoed %v, want %v", echoed, tt.echo)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	h := middleware.BodyLimit(10, nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, tt := range []struct {
		body    string
		chunked bool
		want    int
	}{
		{"0123456789", false, http.StatusNoContent},
		{"0123456789A", false, http.StatusRequestEntityTooLarge},
		{"0123456789A", true, http.StatusRequestEntityTooLarge},
		{"", false, http.StatusNoContent},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		if tt.chunked {
			req.ContentLength = -1
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Errorf("body of %d bytes (chunked %v): %d, want %d", len(tt.body), tt.chunked, w.Code, tt.want)
		}
	}
}

// TestObserveBoundsMethods sends requests with many made-up methods over HTTP: the metrics and
// the access log name them all OTHER, so the series stay as few as the standard methods.
func TestObserveBoundsMethods(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := middleware.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	srv := httptest.NewServer(middleware.Observe(zap.New(core), m)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed)
	})))
	defer srv.Close()
	send := func(method string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/v1/api/clients", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	const made = 300
	for i := range made {
		send(fmt.Sprintf("FOO%d", i))
	}
	for _, method := range []string{"GET", "POST", "DELETE"} {
		send(method)
	}

	series := metricstest.Gather(t, reg)
	methods := map[string]bool{}
	for k := range series {
		if !strings.HasPrefix(k, "mnv_gateway_http_requests_total{") {
			continue
		}
		for _, l := range strings.Split(strings.Trim(strings.TrimPrefix(k, "mnv_gateway_http_requests_total"), "{}"), ",") {
			if v, ok := strings.CutPrefix(l, "method="); ok {
				methods[v] = true
			}
		}
	}
	if len(methods) != 4 || !methods["OTHER"] || !methods["GET"] || !methods["POST"] || !methods["DELETE"] {
		t.Errorf("method labels %v, want GET, POST, DELETE and OTHER", methods)
	}
	if got := metricstest.Sum(series, "mnv_gateway_http_requests_total", "method=OTHER"); got != made {
		t.Errorf("%v requests counted as OTHER, want %d", got, made)
	}
	if got := metricstest.Sum(series, "mnv_gateway_http_request_duration_seconds", "method=OTHER"); got != made {
		t.Errorf("%v durations observed as OTHER, want %d", got, made)
	}
	for _, e := range logs.FilterMessage("http request").All() {
		if method := e.ContextMap()["method"]; strings.HasPrefix(fmt.Sprint(method), "FOO") {
			t.Fatalf("the access log names the method %v", method)
		}
	}
}

// TestDrainBody: an answer to a body read to its end keeps its Content-Length (no flush, no
// chunks); an early answer to a body left unread reaches a client that writes its whole body
// first, and the rest of that body is drained.
func TestDrainBody(t *testing.T) {
	for _, tc := range []struct {
		name       string
		read       bool
		body       int
		wantLength bool // a Content-Length, not chunked
	}{
		{"read to its end", true, 100, true},
		{"answered early, small body", false, 100, false},
		{"answered early, large body", false, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := middleware.DrainBody(4<<20, 2*time.Second)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.read {
					_, _ = io.ReadAll(r.Body)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"ok":true}`))
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(strings.Repeat("x", tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if string(got) != `{"ok":true}` {
				t.Fatalf("answer %q", got)
			}
			chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
			if tc.wantLength && (chunked || resp.ContentLength != int64(len(got))) {
				t.Errorf("Content-Length %d, transfer encoding %v: want the length, not chunks", resp.ContentLength, resp.TransferEncoding)
			}
			if !tc.wantLength && !chunked {
				t.Errorf("transfer encoding %v: an early answer is flushed before the drain", resp.TransferEncoding)
			}
		})
	}
}
