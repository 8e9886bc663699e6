// Package landing answers the root of the gateway's address, "/", for a person who opens it in
// a browser: a small page that says what answers here and links to the API reference, the
// OpenAPI document and the health endpoints. Only the exact root: any other unknown path keeps
// the JSON 404 envelope, since a program that calls a wrong path wants that, not a page.
package landing

import (
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// Path is the page's path: the root only ({$}), not the tree under it.
const Path = "/{$}"

// Links are the addresses the page points to.
type Links struct {
	Reference, OpenAPI, Health, Ready string
}

// CSP is the page's Content-Security-Policy: the page is static HTML with no script, style
// sheet, image or form, so it may load nothing at all.
const CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var page = template.Must(template.New("landing").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mnv</title>
</head>
<body>
<h1>mnv</h1>
<p>This address is the JSON API of mnv, a mobile-number verification service. Programs call it
under /v1/api with an API key; there is nothing to use in a browser here but the pages below.</p>
<ul>
<li><a href="{{.Reference}}">API reference</a></li>
<li><a href="{{.OpenAPI}}">OpenAPI document</a></li>
<li><a href="{{.Health}}">Liveness</a> and <a href="{{.Ready}}">readiness</a></li>
</ul>
</body>
</html>
`))

// Register adds the page to mux. "GET" also answers HEAD, with the headers and no body.
func Register(mux *http.ServeMux, links Links) {
	var b strings.Builder
	if err := page.Execute(&b, links); err != nil {
		panic("landing: " + err.Error()) // a fixed template with strings: cannot fail
	}
	body := []byte(b.String())
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	})
}
