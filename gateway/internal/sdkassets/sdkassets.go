// Package sdkassets serves the browser SDK (sdk/web) at /sdk/v1/: the ES module, its classic
// window.Mnv build and its type declarations. go:embed cannot reach outside the gateway module,
// so `make generate` copies them into files/ (checked by make check-generated).
//
// They are public static files: any client's page, on any origin, imports the module, which a
// browser fetches in CORS mode, so Access-Control-Allow-Origin is "*" (no credentials are
// involved). The paths carry no content hash, so the cache is an hour and an ETag revalidates
// it, not "immutable": a new gateway's SDK reaches browsers within the hour.
package sdkassets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Prefix is the path the files are served under.
const Prefix = "/sdk/v1/"

//go:embed files/mnv.js files/mnv.global.js files/mnv.d.ts
var files embed.FS

// CacheControl is the caching of every file.
const CacheControl = "public, max-age=3600"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// assets are the files by the name they are served under.
var assets = func() map[string]asset {
	types := map[string]string{
		"mnv.js":        "text/javascript; charset=utf-8",
		"mnv.global.js": "text/javascript; charset=utf-8",
		"mnv.d.ts":      "application/typescript; charset=utf-8",
	}
	m := make(map[string]asset, len(types))
	for name, ct := range types {
		b, err := files.ReadFile("files/" + name)
		if err != nil {
			panic("sdkassets: " + err.Error()) // the embed directive names them: cannot happen
		}
		d := sha256.Sum256(b)
		m[name] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(d[:16]) + `"`}
	}
	return m
}()

var notFound = envelope.Error{
	Status: http.StatusNotFound, Code: string(fault.NotFound),
	Message: "no such file: the SDK is served as " + Prefix + "mnv.js, " + Prefix + "mnv.global.js and " + Prefix + "mnv.d.ts",
}

// Register adds the files to mux, for GET and HEAD (ServeMux routes HEAD to GET patterns, and
// the server drops a HEAD answer's body).
func Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"{name}", serve)
	// Anything else under the prefix, and the prefix without its slash (where ServeMux would
	// redirect): a file asked with another method is 405, anything else the envelope's 404.
	other := func(w http.ResponseWriter, r *http.Request) {
		if _, ok := assets[strings.TrimPrefix(r.URL.Path, Prefix)]; ok {
			w.Header().Set("Allow", "GET, HEAD")
			envelope.WriteError(w, envelope.RoutingError(http.StatusMethodNotAllowed))
			return
		}
		envelope.WriteError(w, notFound)
	}
	mux.HandleFunc(Prefix, other)
	mux.HandleFunc(strings.TrimSuffix(Prefix, "/"), other)
}

func serve(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("name")]
	if !ok {
		envelope.WriteError(w, notFound)
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", CacheControl)
	h.Set("ETag", a.etag)
	if etagMatches(r.Header.Get("If-None-Match"), a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	_, _ = w.Write(a.body)
}

// etagMatches reads If-None-Match: "*" or a list of tags, weak ones compared weakly (RFC 9110
// 13.1.2), as browsers and caches send them.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
