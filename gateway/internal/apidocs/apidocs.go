// Package apidocs serves the API reference page: /v1/api/openapi.json rendered by Redoc, which
// is vendored here (vendor.sh, pinned version and npm integrity; MIT, LICENSE beside it) and
// embedded in the binary, so the page loads nothing from elsewhere. It is public, like the
// document, and served under a strict Content-Security-Policy: scripts from the gateway only;
// styles may be inline because Redoc injects its own.
package apidocs

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"
)

// Paths of the page and its script.
const (
	PagePath   = "/v1/api/docs"
	ScriptPath = "/v1/api/docs/redoc.standalone.js"
	// SpecPath is the document the page renders.
	SpecPath = "/v1/api/openapi.json"
)

//go:embed redoc.standalone.js
var script []byte

// The script runs as it loads and renders the <redoc> element before it, so it comes last.
var page = []byte(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mnv API reference</title>
</head>
<body>
<redoc spec-url="` + SpecPath + `"></redoc>
<script src="` + ScriptPath + `"></script>
</body>
</html>
`)

// CSP is the page's Content-Security-Policy. Redoc fetches the document (connect-src), runs
// its search in a worker it makes from a blob, and draws icons as data: images.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// scriptETag names the vendored script's content, so browsers revalidate it cheaply.
var scriptETag = func() string {
	d := sha256.Sum256(script)
	return `"` + hex.EncodeToString(d[:8]) + `"`
}()

// Register adds the page and its script to mux.
func Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PagePath, func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(page)))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET "+ScriptPath, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "public, max-age=3600")
		h.Set("ETag", scriptETag)
		if r.Header.Get("If-None-Match") == scriptETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(script)))
		_, _ = w.Write(script)
	})
}
