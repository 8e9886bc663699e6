package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/middleware"
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
