// Package console serves the console, the browser app of the client's people (console/ at the
// repository's root, built by `make generate` into dist/, which is embedded here: go:embed cannot
// reach outside the module, and the console must work with no internet).
//
// Routes: GET and HEAD on /console and everything under it. A path whose last segment has no
// file extension is a client-side route and answers index.html; a file is answered from dist,
// and an unknown file is the envelope's 404 (never index.html, so a missing script fails loudly
// instead of running HTML as JavaScript). Any other method is 405 with Allow.
//
// Every answer carries a strict Content-Security-Policy (the app loads its own script and style
// sheet and talks to its own origin, nothing inline), forbids framing, sniffing and the Referer.
// index.html is revalidated on every load (no-cache with an ETag), so a new gateway's console
// reaches browsers at once; the assets carry their content hash in their names and are cached
// for a year as immutable. Every file is gzipped once at start-up and answered compressed to a
// browser that accepts it.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Prefix is the console's path; its pages are under Prefix + "/".
const Prefix = "/console"

//go:embed dist
var dist embed.FS

// CSP is the Content-Security-Policy of every answer: scripts, styles, fonts and the manifest
// from the gateway's origin only, images from it or data: URLs, fetches to it alone (the
// /v1/api), no framing, no <base>, forms posting to the origin only. No 'unsafe-inline' or
// 'unsafe-eval': the build writes no inline script or style attribute.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// PermissionsPolicy turns off the powerful features the console never uses, and keeps the
// passkey ceremonies (WebAuthn) to the console's own origin.
const PermissionsPolicy = "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), " +
	"payment=(), usb=(), publickey-credentials-get=(self), publickey-credentials-create=(self)"

// Cache-Control of index.html (revalidated on every load) and of the content-hashed assets.
const (
	IndexCacheControl = "no-cache"
	AssetCacheControl = "public, max-age=31536000, immutable"
)

type file struct {
	body, gzipped []byte
	contentType   string
	etag          string
	cacheControl  string
}

// files are dist's files by their path under dist ("index.html", "assets/console-….js").
var files = load(dist)

func load(fsys fs.FS) map[string]file {
	m := map[string]file{}
	err := fs.WalkDir(fsys, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "dist/")
		ct := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) { // not left to the host's mime tables
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		cc := AssetCacheControl
		if name == "index.html" {
			cc = IndexCacheControl
		}
		sum := sha256.Sum256(b)
		m[name] = file{body: b, gzipped: compress(b), contentType: ct, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, cacheControl: cc}
		return nil
	})
	if err != nil {
		panic("console: " + err.Error()) // the embedded folder: cannot fail
	}
	if _, ok := m["index.html"]; !ok {
		panic("console: dist has no index.html: run make generate")
	}
	return m
}

// compress gzips b once, at start-up; nil when that saves nothing worth it (an image).
func compress(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	if buf.Len() >= len(b)*9/10 {
		return nil
	}
	return buf.Bytes()
}

var notFound = envelope.Error{
	Status: http.StatusNotFound, Code: string(fault.NotFound),
	Message: "no such file in the console",
}

// Register adds the console to mux: the exact Prefix and the tree under it, every method (the
// handler answers 405 itself, with Allow, and the security headers).
func Register(mux *http.ServeMux) {
	mux.Handle(Prefix, Handler)
	mux.Handle(Prefix+"/", Handler)
}

// Handler answers the console's paths.
var Handler http.Handler = http.HandlerFunc(serve)

func serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", PermissionsPolicy)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		envelope.WriteError(w, envelope.RoutingError(http.StatusMethodNotAllowed))
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	name := "index.html"
	// The last segment decides: with an extension it is a file, without one a page.
	if last := rest[strings.LastIndex(rest, "/")+1:]; path.Ext(last) != "" {
		name = rest
	}
	f, ok := files[name]
	if !ok || !strings.HasPrefix(r.URL.Path, Prefix) {
		h.Set("Cache-Control", "no-store")
		envelope.WriteError(w, notFound)
		return
	}
	h.Set("Cache-Control", f.cacheControl)
	h.Set("ETag", f.etag)
	if f.gzipped != nil {
		h.Add("Vary", "Accept-Encoding")
	}
	if etagMatches(r.Header.Get("If-None-Match"), f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.body
	if f.gzipped != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = f.gzipped
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a q-value above zero.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		return q > 0
	}
	return false
}

// etagMatches reads If-None-Match: "*" or a list of tags, weak ones compared weakly.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
