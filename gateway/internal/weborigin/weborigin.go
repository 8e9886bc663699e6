// Package weborigin binds the browser routes (/v1/api/web/transactions/{id}/capture, /complete,
// and a workflow's /code typed on the page, its /workflow read and its /resend)
// to the web origins the transaction's client allowed (docs/api-decisions.md#credentials). Those
// routes take no credential, so without the binding any page could have a visitor's browser capture
// a transaction it obtained elsewhere; a browser always says which page is calling in its Origin
// header, and a page cannot forge it.
//
// Every request, the CORS preflight included, must carry an Origin that the transaction's
// client allowed: otherwise it is 403 PERMISSION_DENIED and goes no further. An allowed origin
// is echoed in Access-Control-Allow-Origin (never "*", never with credentials). The
// verification service checks the origin again when it captures, which is what makes it hold
// for every caller; this layer is what the browser's CORS needs, and it refuses early.
//
// The way back is bound alike: after an operator's authorization of a capture (NETWORK_API),
// Redirect sends the browser to the page the capture named, which the verification service
// took only on the capturing page's own, allowed, origin, and the page completes the capture
// on the complete route.
package weborigin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
)

// Checker asks whether an origin may call a transaction's browser routes;
// verificationv1.VerificationServiceClient is one.
type Checker interface {
	CheckWebOrigin(ctx context.Context, in *verificationv1.CheckWebOriginRequest, opts ...grpc.CallOption) (*verificationv1.CheckWebOriginResponse, error)
}

// prefix is the path of a transaction's browser routes, followed by its id; the routes'
// patterns are as the mux writes them (logs name them: the path holds the transaction id, the
// flow's capability, which logs never do).
const (
	prefix        = "/v1/api/web/transactions/"
	captureRoute  = "/v1/api/web/transactions/{transaction_id=*}/capture"
	completeRoute = "/v1/api/web/transactions/{transaction_id=*}/complete"
	codeRoute     = "/v1/api/web/transactions/{transaction_id=*}/code"
	workflowRoute = "/v1/api/web/transactions/{transaction_id=*}/workflow"
	resendRoute   = "/v1/api/web/transactions/{transaction_id=*}/resend"
)

// checkTimeout bounds the origin check: a browser waiting on a preflight gives up soon anyway.
const checkTimeout = 3 * time.Second

var forbidden = envelope.Error{
	Status: http.StatusForbidden, Code: string(fault.PermissionDenied),
	Message: "this page's origin is not one the account allows to capture its transactions; the account lists its web origins with PUT /v1/api/me/web-origins",
}

// Middleware applies the binding in front of next. allowHeaders are the request headers a page
// may send besides Content-Type and X-Request-Id (the sandbox's number header, so a demo page
// can play the operator's proxy).
func Middleware(check Checker, allowHeaders []string, log *zap.Logger) func(http.Handler) http.Handler {
	allowed := strings.Join(append([]string{"Content-Type", "X-Request-Id"}, allowHeaders...), ", ")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, route, ok := transactionRoute(r.URL.Path)
			if !ok {
				next.ServeHTTP(w, r) // not a browser route: the mux answers 404
				return
			}
			h := w.Header()
			// The answer depends on the Origin: caches must not serve one page's to another.
			h.Add("Vary", "Origin")
			origins := r.Header.Values("Origin")
			if len(origins) != 1 || origins[0] == "" {
				envelope.WriteError(w, forbidden)
				return
			}
			origin := origins[0]
			ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
			resp, err := check.CheckWebOrigin(ctx, &verificationv1.CheckWebOriginRequest{TransactionId: id, Origin: origin})
			cancel()
			if err != nil {
				e := envelope.FromErr(r.Context(), err)
				if e.Status >= 500 {
					log.Warn("request failed", logging.Request(r.Context()),
						zap.String("route", route), zap.String("grpc_code", apierr.Parse(err).Code.String()))
				}
				envelope.WriteError(w, e)
				return
			}
			if !resp.GetAllowed() {
				envelope.WriteError(w, forbidden)
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", allowed)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// transactionRoute returns the id of a browser route's path (prefix + "{id}/capture",
// "{id}/complete", "{id}/code", "{id}/workflow" or "{id}/resend"), unvalidated (the verification service decides what
// exists), and the route's pattern.
func transactionRoute(path string) (id, route string, ok bool) {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return "", "", false
	}
	id, action, ok := strings.Cut(rest, "/")
	switch {
	case !ok || id == "":
		return "", "", false
	case action == "capture":
		return id, captureRoute, true
	case action == "complete":
		return id, completeRoute, true
	case action == "code":
		return id, codeRoute, true
	case action == "workflow":
		return id, workflowRoute, true
	case action == "resend":
		return id, resendRoute, true
	}
	return "", "", false
}

// Redirect is the mux's forward-response option that sends a browser back to the client's page
// once the operator's authorization of its capture is complete: the callback's answer names
// that page (CompleteSessionAuthorizationResponse.redirect_url, on an origin the client
// allowed, checked by the verification service when the capture gave it), and the browser
// gets 303 to it. Any other answer is left as it is.
func Redirect(_ context.Context, w http.ResponseWriter, m proto.Message) error {
	r, ok := m.(*verificationv1.CompleteSessionAuthorizationResponse)
	if !ok || r.RedirectUrl == nil {
		return nil
	}
	u, err := url.Parse(r.GetRedirectUrl())
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("weborigin: the callback named no page to go back to: %q", r.GetRedirectUrl())
	}
	h := w.Header()
	h.Set("Location", u.String())
	// The callback's URL holds the operator's code and the state; the page must not get it as
	// its Referer.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
	return nil
}
