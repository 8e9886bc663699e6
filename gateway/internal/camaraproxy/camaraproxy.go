// Package camaraproxy passes the CAMARA facade's routes (OIDC discovery, the provider's
// /oauth2/ endpoints, the Number Verification API under /number-verification/v2/) to the
// verification service's HTTP listener, as they are: those routes answer OAuth2 and CAMARA
// bodies, not the envelope.
//
// The gateway speaks for the client's network here as it does on the capture routes: the
// facade gets the client address it resolved (auth.MDClientIP) and, on the authorization
// endpoint only (where the line is identified), the operators' number headers
// (auth.MDHeaderPrefix + name), with the gateway's own token in auth.HTTPCallerHeader, the
// only token the facade believes them from. Whatever of those a client sent is dropped.
package camaraproxy

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/internal/clientip"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/logging"
)

// Paths are the trees the proxy serves (http.ServeMux patterns).
var Paths = []string{"/.well-known/openid-configuration", "/oauth2/", "/number-verification/v2/"}

// authorizePath is where the device comes over mobile data: the one path given number headers.
const authorizePath = "/oauth2/authorize"

type authKey struct{}

// KeepAuthorization keeps the Authorization header of a request to the facade's paths before
// the edge strips it (middleware.StripUntrusted): there it is the client's credential (client
// authentication at the token endpoint, the access token on the API), for the facade alone.
func KeepAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Values("Authorization"); len(v) > 0 && facadePath(r.URL.Path) {
			r = r.WithContext(context.WithValue(r.Context(), authKey{}, v))
		}
		next.ServeHTTP(w, r)
	})
}

func facadePath(p string) bool {
	return p == Paths[0] || strings.HasPrefix(p, Paths[1]) || strings.HasPrefix(p, Paths[2])
}

// New returns the proxy to the facade at addr (host:port), presenting token. With tlsConfig
// (the services' CA, grpcclient.TLSConfig) it speaks HTTPS and verifies the facade's
// certificate against the host part of addr, as the gRPC calls do: a client's secret, its
// tokens and the gateway's own token cross this hop. nil: plain HTTP.
func New(addr, token string, numberHeaders []string, tlsConfig *tls.Config, log *zap.Logger) http.Handler {
	target := &url.URL{Scheme: "http", Host: addr}
	if tlsConfig != nil {
		target.Scheme = "https"
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			out, in := pr.Out, pr.In
			out.Host = target.Host
			for k := range out.Header {
				if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-mnv-") || lk == "authorization" || lk == "cookie" {
					out.Header.Del(k)
				}
			}
			for _, h := range numberHeaders {
				out.Header.Del(h)
			}
			if v, ok := in.Context().Value(authKey{}).([]string); ok {
				out.Header["Authorization"] = v
			}
			out.Header.Set(auth.HTTPCallerHeader, token)
			if a, ok := clientip.FromContext(in.Context()); ok {
				out.Header.Set(auth.MDClientIP, a.String())
			}
			if in.URL.Path == authorizePath {
				for _, h := range numberHeaders {
					if v := in.Header.Values(h); len(v) == 1 {
						out.Header.Set(auth.MDHeaderPrefix+strings.ToLower(h), v[0])
					}
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			// The facade's CORS answers are its own; the gateway adds nothing.
			resp.Header.Del("Server")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("camara facade unreachable", zap.Error(err), logging.Request(r.Context()))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":503,"code":"UNAVAILABLE","message":"Service Unavailable."}`))
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second, TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second,
		},
	}
}
