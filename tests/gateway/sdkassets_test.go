package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSDKAssets: the gateway serves sdk/web's files, byte for byte, at /sdk/v1/, as public
// static files any page may import (CORS "*"), cached an hour and revalidated by ETag; anything
// else under /sdk/v1/ is the envelope's 404. Its bodies are compared with sdk/web itself, so a
// stale embedded copy fails here as well as in make check-generated.
func TestSDKAssets(t *testing.T) {
	s := start(t)
	files := []struct{ path, file, contentType string }{
		{"/sdk/v1/mnv.js", "src/mnv.js", "text/javascript; charset=utf-8"},
		{"/sdk/v1/mnv.global.js", "dist/mnv.global.js", "text/javascript; charset=utf-8"},
		{"/sdk/v1/mnv.d.ts", "src/mnv.d.ts", "application/typescript; charset=utf-8"},
	}
	etags := map[string]bool{}
	for _, f := range files {
		t.Run(f.path, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "..", "sdk", "web", f.file))
			if err != nil {
				t.Fatal(err)
			}
			a := s.do(t, call{method: "GET", path: f.path, headers: map[string]string{"Origin": "https://shop.example"}})
			if a.status != http.StatusOK || string(a.body) != string(want) {
				t.Fatalf("GET %s: %d, body equal to sdk/web/%s: %v", f.path, a.status, f.file, string(a.body) == string(want))
			}
			for k, v := range map[string]string{
				"Content-Type":                f.contentType,
				"Content-Length":              strconv.Itoa(len(want)),
				"Cache-Control":               "public, max-age=3600",
				"Access-Control-Allow-Origin": "*",
				"X-Content-Type-Options":      "nosniff",
			} {
				if got := a.headers.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if a.headers.Get("Access-Control-Allow-Credentials") != "" || a.headers.Get("Set-Cookie") != "" {
				t.Errorf("credentials involved: %v", a.headers)
			}
			etag := a.headers.Get("ETag")
			if !strings.HasPrefix(etag, `"`) || len(etag) < 18 || etags[etag] {
				t.Fatalf("ETag %q: not a strong tag of its own", etag)
			}
			etags[etag] = true

			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag} {
				again := s.do(t, call{method: "GET", path: f.path, headers: map[string]string{"If-None-Match": inm}})
				if again.status != http.StatusNotModified || len(again.body) != 0 || again.headers.Get("ETag") != etag {
					t.Errorf("If-None-Match %s: %d, %d bytes, ETag %q", inm, again.status, len(again.body), again.headers.Get("ETag"))
				}
			}
			if stale := s.do(t, call{method: "GET", path: f.path, headers: map[string]string{"If-None-Match": `"stale"`}}); stale.status != http.StatusOK || len(stale.body) != len(want) {
				t.Errorf("stale If-None-Match: %d, %d bytes", stale.status, len(stale.body))
			}
			head := s.do(t, call{method: "HEAD", path: f.path})
			if head.status != http.StatusOK || len(head.body) != 0 || head.headers.Get("Content-Length") != strconv.Itoa(len(want)) ||
				head.headers.Get("ETag") != etag {
				t.Errorf("HEAD: %d, %d bytes, %v", head.status, len(head.body), head.headers)
			}
			post := s.do(t, call{method: "POST", path: f.path})
			if post.status != http.StatusMethodNotAllowed || post.headers.Get("Allow") != "GET, HEAD" {
				t.Errorf("POST: %d, Allow %q: %s", post.status, post.headers.Get("Allow"), post.body)
			}
		})
	}

	for _, p := range []string{"/sdk/v1/", "/sdk/v1", "/sdk/v1/mnv.css", "/sdk/v1/src/mnv.js", "/sdk/v1/files/mnv.js", "/sdk/v1/../v1/mnv.js", "/sdk/v2/mnv.js", "/sdk/v1/MNV.JS"} {
		a := s.do(t, call{method: "GET", path: p})
		var env struct {
			Success  bool `json:"success"`
			Messages []struct {
				Code string `json:"code"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || a.status != http.StatusNotFound || env.Success || len(env.Messages) != 1 || env.Messages[0].Code != "NOT_FOUND" {
			t.Errorf("GET %s: %d %s", p, a.status, a.body)
		}
	}
}
