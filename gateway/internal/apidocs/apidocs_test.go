package apidocs_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/apidocs"
)

// TestPage: the page loads its script from the gateway only, under the CSP, and the script is
// the vendored Redoc.
func TestPage(t *testing.T) {
	mux := http.NewServeMux()
	apidocs.Register(mux)
	get := func(path string, h http.Header) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", path, nil)
		for k, v := range h {
			r.Header[k] = v
		}
		mux.ServeHTTP(w, r)
		return w
	}
	page := get(apidocs.PagePath, nil)
	body := page.Body.String()
	if page.Code != http.StatusOK || page.Header().Get("Content-Security-Policy") != apidocs.CSP ||
		!strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %v", page.Code, page.Header())
	}
	if !strings.Contains(body, `<script src="`+apidocs.ScriptPath+`">`) || !strings.Contains(body, `spec-url="`+apidocs.SpecPath+`"`) {
		t.Errorf("page does not load the vendored script with the document:\n%s", body)
	}
	if strings.Contains(body, "http") {
		t.Errorf("page names another origin:\n%s", body)
	}
	for _, d := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(apidocs.CSP, d) {
			t.Errorf("CSP lacks %q", d)
		}
	}
	pinned, err := os.ReadFile("VERSION") // "redoc 2.5.4", written by vendor.sh
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(pinned)), "redoc ")
	js := get(apidocs.ScriptPath, nil)
	if js.Code != http.StatusOK || !strings.Contains(js.Body.String(), `"`+version+`"`) || !strings.HasPrefix(js.Header().Get("Content-Type"), "text/javascript") {
		t.Fatalf("script: %d %v %.100s", js.Code, js.Header(), js.Body.String())
	}
	if again := get(apidocs.ScriptPath, http.Header{"If-None-Match": {js.Header().Get("ETag")}}); again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("revalidation: %d, %d bytes", again.Code, again.Body.Len())
	}
}
