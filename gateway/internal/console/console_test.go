package console_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/console"
)

// assets reads the script and style sheet index.html names, as the browser finds them.
func assets(t *testing.T, mux http.Handler) (js, css string) {
	t.Helper()
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/console", nil))
	body := w.Body.String()
	m := regexp.MustCompile(`<script type="module" src="(/console/assets/[^"]+\.js)"></script>`).FindStringSubmatch(body)
	c := regexp.MustCompile(`<link rel="stylesheet" href="(/console/assets/[^"]+\.css)">`).FindStringSubmatch(body)
	if m == nil || c == nil {
		t.Fatalf("index.html names no script or style sheet:\n%s", body)
	}
	return m[1], c[1]
}

func TestConsole(t *testing.T) {
	mux := http.NewServeMux()
	console.Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	js, css := assets(t, mux)

	tests := []struct {
		name, method, target, encoding string
		status                         int
		contentType, cacheControl      string
		index, gzipped, body           bool
	}{
		{name: "root", method: "GET", target: "/console", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "root slash", method: "GET", target: "/console/", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "client route", method: "GET", target: "/console/keys", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "deep client route", method: "GET", target: "/console/webhooks/abc-123", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "route with a query", method: "GET", target: "/console/sign-in?next=x", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "index by name", method: "GET", target: "/console/index.html", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "index gzipped", method: "GET", target: "/console/team", encoding: "gzip, deflate, br", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, gzipped: true, body: true},
		{name: "gzip refused by q=0", method: "GET", target: "/console/team", encoding: "gzip;q=0, br", status: 200, contentType: "text/html", cacheControl: "no-cache", index: true, body: true},
		{name: "script", method: "GET", target: js, status: 200, contentType: "text/javascript", cacheControl: "public, max-age=31536000, immutable", body: true},
		{name: "script gzipped", method: "GET", target: js, encoding: "gzip", status: 200, contentType: "text/javascript", cacheControl: "public, max-age=31536000, immutable", gzipped: true, body: true},
		{name: "style sheet", method: "GET", target: css, status: 200, contentType: "text/css", cacheControl: "public, max-age=31536000, immutable", body: true},
		{name: "HEAD index", method: "HEAD", target: "/console/ledger", status: 200, contentType: "text/html", cacheControl: "no-cache"},
		{name: "HEAD script", method: "HEAD", target: js, encoding: "gzip", status: 200, contentType: "text/javascript", cacheControl: "public, max-age=31536000, immutable", gzipped: true},
		{name: "unknown asset", method: "GET", target: "/console/assets/console-NOPE.js", status: 404},
		{name: "unknown file at the root", method: "GET", target: "/console/favicon.ico", status: 404},
		{name: "a source map is not served", method: "GET", target: js + ".map", status: 404},
		{name: "POST", method: "POST", target: "/console/keys", status: 405},
		{name: "DELETE an asset", method: "DELETE", target: js, status: 405},
		{name: "PUT the root", method: "PUT", target: "/console", status: 405},
		{name: "another tree", method: "GET", target: "/consoles", status: http.StatusTeapot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			if tt.encoding != "" {
				r.Header.Set("Accept-Encoding", tt.encoding)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			h := w.Header()
			if tt.status == http.StatusTeapot {
				return
			}
			// The security headers are on every answer of the console, errors included.
			for k, v := range map[string]string{
				"Content-Security-Policy":    console.CSP,
				"X-Frame-Options":            "DENY",
				"X-Content-Type-Options":     "nosniff",
				"Referrer-Policy":            "no-referrer",
				"Cross-Origin-Opener-Policy": "same-origin",
				"Permissions-Policy":         console.PermissionsPolicy,
			} {
				if got := h.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			switch tt.status {
			case 405:
				if h.Get("Allow") != "GET, HEAD" {
					t.Errorf("Allow %q", h.Get("Allow"))
				}
				fallthrough
			case 404:
				var env struct {
					Success  bool `json:"success"`
					Messages []struct {
						Code string `json:"code"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Success || len(env.Messages) != 1 {
					t.Errorf("not the error envelope: %s", w.Body.String())
				}
				return
			}
			if !strings.HasPrefix(h.Get("Content-Type"), tt.contentType) {
				t.Errorf("Content-Type %q, want %s", h.Get("Content-Type"), tt.contentType)
			}
			if h.Get("Cache-Control") != tt.cacheControl {
				t.Errorf("Cache-Control %q, want %q", h.Get("Cache-Control"), tt.cacheControl)
			}
			if h.Get("ETag") == "" || h.Get("Content-Length") == "" {
				t.Errorf("no ETag or Content-Length: %v", h)
			}
			if (h.Get("Content-Encoding") == "gzip") != tt.gzipped {
				t.Errorf("Content-Encoding %q, gzipped %v", h.Get("Content-Encoding"), tt.gzipped)
			}
			if !strings.Contains(h.Get("Vary"), "Accept-Encoding") {
				t.Errorf("Vary %q", h.Get("Vary"))
			}
			body := w.Body.Bytes()
			if !tt.body {
				if len(body) != 0 {
					t.Errorf("HEAD answered %d bytes", len(body))
				}
				return
			}
			if tt.gzipped {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if tt.index {
				s := string(body)
				if !strings.Contains(s, `<div id="app">`) {
					t.Errorf("not index.html:\n%s", s)
				}
				// What the CSP would refuse: an inline script or style, or a style attribute.
				for _, bad := range []string{"<script>", "<style", "style=", "javascript:", "http://", "https://"} {
					if strings.Contains(s, bad) {
						t.Errorf("index.html holds %q", bad)
					}
				}
			}
		})
	}
}

// TestRevalidation: an If-None-Match with the ETag is 304 with no body, for the page and an asset.
func TestRevalidation(t *testing.T) {
	mux := http.NewServeMux()
	console.Register(mux)
	js, _ := assets(t, mux)
	for _, target := range []string{"/console/overview", js} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		etag := w.Header().Get("ETag")
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("If-None-Match", `"other", W/`+etag)
		w = httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusNotModified || w.Body.Len() != 0 || w.Header().Get("ETag") != etag {
			t.Errorf("%s: status %d, %d bytes, ETag %q", target, w.Code, w.Body.Len(), w.Header().Get("ETag"))
		}
		if w.Header().Get("Content-Security-Policy") != console.CSP {
			t.Errorf("%s: 304 without the CSP", target)
		}
	}
}

// TestCSP: the policy allows nothing inline and nothing from another origin.
func TestCSP(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
		if strings.Contains(console.CSP, bad) {
			t.Errorf("CSP allows %q", bad)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(console.CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
}
