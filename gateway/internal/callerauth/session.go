package callerauth

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// A person's console session (docs/api-decisions.md#console) is the cookie
// principal.SessionCookie, taken on the routes whose RPC accepts it (rpcrule.Edge.Session). The
// gateway resolves it with accounts every time (never cached: each use moves its idle timeout),
// asserts the principal like a key's, and passes the session on as metadata so that the
// service's guard sees the credential of the method's kind. A request that carries the cookie,
// or opens a session, must come from the console's own origin when it is not a read
// (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin against Host); the cookie is
// SameSite=Strict besides. Every such request that changes something is audited once answered.

// Auditor records what a person did through their session: accounts.
type Auditor interface {
	RecordAudit(ctx context.Context, e accountsclient.AuditEvent) error
}

// WithAuditor makes a audit every state-changing request of a session through q.
func (a *Auth) WithAuditor(q *AuditQueue) *Auth {
	a.auditor = q
	return a
}

// consolePrefix is where the console's own routes are: signing in opens a session, so it is
// held to the console's origin too (no login forgery from another site).
const consolePrefix = "/v1/api/console/"

// sessionCookie is the one value of the session cookie, if the request carries exactly one.
func sessionCookie(r *http.Request) (string, bool) {
	cs := r.CookiesNamed(principal.SessionCookie)
	if len(cs) != 1 || cs[0].Value == "" {
		return "", false
	}
	return cs[0].Value, true
}

var (
	errSessionMissing  = "the console session cookie is missing: sign in (POST /v1/api/console/sign-in)"
	errSessionEnded    = envelope.Error{Status: http.StatusUnauthorized, Code: string(fault.Unauthenticated), Message: "the console session has ended: sign in again"}
	errAuthUnavailable = envelope.Error{Status: http.StatusServiceUnavailable, Code: string(fault.Unavailable), Message: "authentication is unavailable, try again"}
	errCrossOrigin     = envelope.Error{Status: http.StatusForbidden, Code: string(fault.PermissionDenied), Message: "a console request must come from the console's own origin"}
)

// unsafe reports whether the method may change something.
func unsafe(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// session serves a request made with the session cookie on a route that takes it. It reports
// whether it handled the request (false: no cookie, take the header rules' path).
func (a *Auth) session(w http.ResponseWriter, r *http.Request, rt route, params map[string]string, next runtime.HandlerFunc) bool {
	token, hasCookie := sessionCookie(r)
	if rt.edge.Credential != principal.Session && (!hasCookie || r.Header.Get(principal.APIKey.Header()) != "") {
		// An API key wins where both are taken: a backend's call that happens to carry a cookie.
		return false
	}
	if !hasCookie {
		envelope.WriteErrors(w, Unauthenticated([]string{errSessionMissing}))
		return true
	}
	if unsafe(r.Method) && a.origins.Check(r) != nil {
		envelope.WriteError(w, errCrossOrigin)
		return true
	}
	// Nothing but the cookie speaks for the caller.
	for _, k := range principal.ClientKinds() {
		if h := k.Header(); h != "" {
			r.Header.Del(h)
		}
	}
	r.Header.Del(principal.HeaderClientID)
	if !principal.Session.WellFormed(token) {
		envelope.WriteError(w, errSessionEnded)
		return true
	}
	p, err := principal.Resolve(r.Context(), a.cache, principal.Session, token, "")
	switch {
	case errors.Is(err, principal.ErrUnauthenticated):
		envelope.WriteError(w, errSessionEnded)
		return true
	case err != nil:
		envelope.WriteError(w, errAuthUnavailable)
		return true
	}
	v, err := auth.AssertPrincipal(p)
	if err != nil {
		envelope.WriteError(w, envelope.Internal(r.Context()))
		return true
	}
	as := assertion{value: v, clientID: p.ClientID, write: rt.write, session: token}
	ctx := context.WithValue(r.Context(), assertionKey{}, as)
	if !unsafe(r.Method) || a.auditor == nil {
		next(w, r.WithContext(ctx), params)
		return true
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	next(sw, r.WithContext(ctx), params)
	a.audit(r, p, rt, params, sw.status)
	return true
}

// audit records the request once answered, whatever it answered: a refusal is worth reading
// too. It outlives the request (a client that hangs up still did it); the queue retries it when
// accounts cannot take it at once (audit.go).
func (a *Auth) audit(r *http.Request, p principal.Principal, rt route, params map[string]string, status int) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var target []string
	for _, k := range keys {
		target = append(target, params[k])
	}
	addr := r.RemoteAddr
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		addr = strings.Trim(addr[:i], "[]")
	}
	a.auditor.Record(r.Context(), accountsclient.AuditEvent{
		ID: uuid.NewString(), At: time.Now(), ClientID: p.ClientID, UserID: p.UserID, SessionID: p.SessionID,
		Action: rt.action, Target: strings.Join(target, ","), Status: status, Addr: addr, UserAgent: r.UserAgent(),
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// The metadata an answer opens or ends the caller's session with (accounts' server): the
// gateway turns it into the cookie and forwards none of it (outgoing headers are an allow-list).
const (
	mdSessionSet    = "x-mnv-session-set"
	mdSessionMaxAge = "x-mnv-session-max-age"
	mdSessionClear  = "x-mnv-session-clear"
	mdSSOSet        = "x-mnv-sso-set"
	mdSSOMaxAge     = "x-mnv-sso-max-age"
	mdSSOClear      = "x-mnv-sso-clear"
	mdSSOBinding    = "x-mnv-sso"
	mdPriorSession  = "x-mnv-session-prior"
	mdRedirect      = "x-mnv-redirect"
)

// ssoCookie binds a single sign-on to the browser that began it: set when it leaves for the
// provider, read when it comes back, then cleared. SameSite=Lax, not Strict: the browser comes
// back by a top-level navigation from the provider's site, which a Strict cookie would miss.
const ssoCookie = "__Host-mnv-sso"

type ssoBindingKey struct{}

// priorSessionKey holds the session cookie a request to a route that opens a session carries:
// accounts ends that session when it opens the new one, so a browser that signs in again or
// accepts an invitation while signed in is left with one identity, not a second one alive
// behind the replaced cookie.
type priorSessionKey struct{}

// withConsoleCookies keeps the request's single sign-on cookie and session cookie for
// Metadata, on the console's own routes that take no session.
func withConsoleCookies(r *http.Request) *http.Request {
	ctx := r.Context()
	if cs := r.CookiesNamed(ssoCookie); len(cs) == 1 && cs[0].Value != "" {
		ctx = context.WithValue(ctx, ssoBindingKey{}, cs[0].Value)
	}
	if token, ok := sessionCookie(r); ok && principal.Session.WellFormed(token) {
		ctx = context.WithValue(ctx, priorSessionKey{}, token)
	}
	return r.WithContext(ctx)
}

// SetCookie is the grpc-gateway forward-response option that turns an answer's session
// metadata into the cookie. The cookie is __Host- (Secure, Path=/, no Domain), HttpOnly (no
// script reads it) and SameSite=Strict (no other site's page sends it).
func SetCookie(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return nil
	}
	c := &http.Cookie{Name: principal.SessionCookie, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	switch {
	case len(md.HeaderMD.Get(mdSessionSet)) == 1:
		c.Value = md.HeaderMD.Get(mdSessionSet)[0]
		age, err := strconv.Atoi(first(md.HeaderMD.Get(mdSessionMaxAge)))
		if err != nil || age <= 0 {
			return errors.New("session cookie without a max age")
		}
		c.MaxAge = age
	case len(md.HeaderMD.Get(mdSessionClear)) > 0:
		c.MaxAge = -1
	default:
		c = nil
	}
	if c != nil {
		http.SetCookie(w, c)
		// An answer that carries a session is nobody's to keep.
		w.Header().Set("Cache-Control", "no-store")
	}
	sso := &http.Cookie{Name: ssoCookie, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	switch {
	case len(md.HeaderMD.Get(mdSSOSet)) == 1:
		sso.Value = md.HeaderMD.Get(mdSSOSet)[0]
		age, err := strconv.Atoi(first(md.HeaderMD.Get(mdSSOMaxAge)))
		if err != nil || age <= 0 {
			return errors.New("single sign-on cookie without a max age")
		}
		sso.MaxAge = age
		http.SetCookie(w, sso)
	case len(md.HeaderMD.Get(mdSSOClear)) > 0:
		sso.MaxAge = -1
		http.SetCookie(w, sso)
	}
	if to := md.HeaderMD.Get(mdRedirect); len(to) == 1 {
		// Only into the console, on this host: the answer never sends a browser elsewhere.
		if !strings.HasPrefix(to[0], "/console/") || strings.HasPrefix(to[0], "//") {
			return errors.New("a redirect out of the console")
		}
		h := w.Header()
		h.Set("Location", to[0])
		// The URL that brought the browser here holds the provider's code and the state.
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusSeeOther)
	}
	return nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
