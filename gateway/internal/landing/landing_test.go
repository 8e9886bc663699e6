package landing_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/landing"
)

// TestLanding: the root answers the page (and HEAD its headers alone) under a CSP that loads
// nothing; every other path, and other methods on the root, still reach the catch-all.
func TestLanding(t *testing.T) {
	mux := http.NewServeMux()
	links := landing.Links{Reference: "/v1/api/docs", OpenAPI: "/v1/api/openapi.json", Health: "/healthz", Ready: "/readyz"}
	landing.Register(mux, links)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

	tests := []struct {
		method, target string
		status         int
		page           bool
	}{
		{"GET", "/", http.StatusOK, true},
		{"GET", "/?x=1", http.StatusOK, true},
		{"HEAD", "/", http.StatusOK, false},
		{"POST", "/", http.StatusTeapot, false},
		{"GET", "/index.html", http.StatusTeapot, false},
		{"GET", "/nothing-here", http.StatusTeapot, false},
		{"GET", "/v1", http.StatusTeapot, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest(tt.method, tt.target, nil))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			if tt.status != http.StatusOK {
				return
			}
			h := w.Header()
			if h.Get("Content-Security-Policy") != landing.CSP || !strings.HasPrefix(h.Get("Content-Type"), "text/html") ||
				h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Length") == "" {
				t.Errorf("headers %v", h)
			}
			body := w.Body.String()
			if !tt.page {
				if body != "" {
					t.Errorf("HEAD answered a body: %q", body)
				}
				return
			}
			for _, l := range []string{links.Reference, links.OpenAPI, links.Health, links.Ready} {
				if !strings.Contains(body, `href="`+l+`"`) {
					t.Errorf("the page does not link %s:\n%s", l, body)
				}
			}
			if strings.Contains(body, "<script") || strings.Contains(body, "http") {
				t.Errorf("the page runs a script or names another origin:\n%s", body)
			}
		})
	}
	for _, d := range []string{"default-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(landing.CSP, d) {
			t.Errorf("CSP lacks %q", d)
		}
	}
}
