// Package demosite is the demo site make run serves on its own origin: a client's web site as
// README's "Add verification to your site" describes it. Its backend holds the demo client's API
// key and never shows it; its page captures with the browser SDK the gateway serves, and the
// backend resolves and verifies only the transactions its own session created (README's rule
// for your own site).
package demosite

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	texttemplate "text/template"
	"time"
)

//go:embed static
var static embed.FS

var (
	pageTmpl = template.Must(template.ParseFS(static, "static/index.html"))
	// app.js is a template only for the SDK's address in its import: a static import is what a
	// client's own page would write, and it keeps the script under the CSP's script-src.
	appTmpl = texttemplate.Must(texttemplate.ParseFS(static, "static/app.js"))
)

// Flows a page may start: the serviceCode of the transaction.
const (
	FlowVerify    = "VERIFY"
	FlowStuckPlus = "STUCK_PLUS"
)

// CookieName is the session cookie; its value is the only thing the browser holds.
const CookieName = "mnv_demo_session"

// sessionTTL is how long an idle session and its transactions are remembered; a transaction
// lives far shorter, so nothing is lost when a session is forgotten.
const sessionTTL = time.Hour

// maxSessions bounds what a visitor without cookies (a script) can make the server remember.
const maxSessions = 10000

// Client is the demo client's credential: it stays in this server.
type Client struct {
	ID     string
	APIKey string
}

// Server is the demo site: an http.Handler and a process.Service (Listen, Run, Close).
type Server struct {
	addr    string
	gateway string // the gateway's origin, as a browser reaches it: the SDK and the capture
	http    *http.Client
	client  atomic.Pointer[Client]

	mu       sync.Mutex
	sessions map[string]*session
	handler  http.Handler
}

// session is what the server remembers of one browser: the transactions it started, by flow.
// Nothing else may resolve them.
type session struct {
	seen         time.Time
	transactions map[string]string // flow → transaction id
	workflow     string            // the VERIFY flow's workflow, once started
}

// New returns the demo site for addr, whose page loads the SDK from and captures at
// gatewayOrigin (e.g. http://127.0.0.1:8080); its backend calls the API there too. It answers
// 503 until SetClient gives it the demo client.
func New(addr, gatewayOrigin string) *Server {
	s := &Server{
		addr: addr, gateway: strings.TrimSuffix(gatewayOrigin, "/"),
		http:     &http.Client{Timeout: 15 * time.Second},
		sessions: map[string]*session{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /app.js", s.app)
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "static/style.css")
	})
	mux.HandleFunc("POST /demo/api/transactions", s.createTransaction)
	mux.HandleFunc("POST /demo/api/verify", s.verify)
	mux.HandleFunc("GET /demo/api/workflow", s.workflow)
	mux.HandleFunc("GET /demo/api/stuck-plus", s.stuckPlus)
	s.handler = s.headers(mux)
	return s
}

// SetClient gives the site the demo client it acts for.
func (s *Server) SetClient(c Client) { s.client.Store(&c) }

// ServeHTTP serves the site.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Listen binds the site's address.
func (s *Server) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("MNV_DEMO_ADDR: listen on %s: %w", s.addr, err)
	}
	return lis, nil
}

// Run serves on lis until ctx ends, then lets the requests under way finish (a few seconds).
func (s *Server) Run(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// Close releases nothing: Run's server owns the listener.
func (s *Server) Close() error { s.http.CloseIdleConnections(); return nil }

// headers sets what every answer carries: a strict CSP that lets the page run its own script
// and the SDK from the gateway, and talk to itself and the gateway only.
func (s *Server) headers(next http.Handler) http.Handler {
	csp := fmt.Sprintf("default-src 'none'; script-src 'self' %[1]s; connect-src 'self' %[1]s; style-src 'self'; img-src 'self'; "+
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'", s.gateway)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	s.session(w, r) // the cookie comes with the page, before the first API call
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, struct{ Gateway string }{s.gateway}); err != nil {
		http.Error(w, "page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) app(w http.ResponseWriter, _ *http.Request) {
	sdk, _ := json.Marshal(s.gateway + "/sdk/v1/mnv.js")
	var b bytes.Buffer
	if err := appTmpl.Execute(&b, struct{ SDK string }{string(sdk)}); err != nil {
		http.Error(w, "app.js: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// session returns the browser's session, starting one (and setting its cookie) when the
// request has none the server knows.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *session {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, err := r.Cookie(CookieName); err == nil {
		if sess, ok := s.sessions[c.Value]; ok && now.Sub(sess.seen) < sessionTTL {
			sess.seen = now
			return sess
		}
	}
	if len(s.sessions) >= maxSessions {
		for id, sess := range s.sessions {
			if now.Sub(sess.seen) >= sessionTTL {
				delete(s.sessions, id)
			}
		}
		if len(s.sessions) >= maxSessions {
			// Forget any one: a map's order is random enough for a demo.
			for id := range s.sessions {
				delete(s.sessions, id)
				break
			}
		}
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	sess := &session{seen: now, transactions: map[string]string{}}
	s.sessions[id] = sess
	//nolint:gosec // G124: Secure when served over TLS; the demo site is plain HTTP on loopback
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	return sess
}

// transaction is the session's transaction of flow, "" when it started none.
func (s *Server) transaction(sess *session, flow string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sess.transactions[flow]
}

func (s *Server) createTransaction(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Flow string `json:"flow"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	if in.Flow != FlowVerify && in.Flow != FlowStuckPlus {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `flow must be "VERIFY" or "STUCK_PLUS"`)
		return
	}
	sess := s.session(w, r)
	var out struct {
		TransactionID string `json:"transactionId"`
	}
	if !s.call(w, r, http.MethodPost, "/opportunity",
		map[string]string{"serviceCode": in.Flow, "metadataId": "demo-" + strings.ToLower(in.Flow)}, &out) {
		return
	}
	s.mu.Lock()
	sess.transactions[in.Flow] = out.TransactionID
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"transactionId": out.TransactionID, "apiBase": s.gateway + "/v1/api"})
}

// sandboxOperator is the demo's only operator. A capture on Wi-Fi names none (no operator
// saw the request); its blob holds no number, which the silent step finds UNDETERMINED.
const sandboxOperator = "sandbox"

// workflowAnswer is what the demo backend reads of a workflow (GET /v1/api/workflows/{id}).
type workflowAnswer struct {
	WorkflowID   string `json:"workflowId"`
	Status       string `json:"status"`
	DecidedBy    string `json:"decidedBy"`
	Reason       string `json:"reason"`
	MobileNumber string `json:"mobileNumber"` // masked
	Charged      int64  `json:"charged"`
	Steps        []struct {
		Channel string `json:"channel"`
		Status  string `json:"status"`
	} `json:"steps"`
}

// page is what the page is told: the outcome and the masked number, never more.
func (a workflowAnswer) page() map[string]any {
	steps := make([]string, 0, len(a.Steps))
	for _, st := range a.Steps {
		steps = append(steps, st.Channel+":"+st.Status)
	}
	return map[string]any{
		"status": a.Status, "decidedBy": a.DecidedBy, "reason": a.Reason, "verified": a.Status == "VERIFIED",
		"mobileNumberMasked": a.MobileNumber, "steps": steps, "charged": a.Charged,
	}
}

// verify runs the session's VERIFY transaction as a workflow (docs/sdk.md, "A code when the
// network cannot tell"): the silent step with the captured blob first; when the network cannot
// tell (Wi-Fi), the workflow sends a code by SMS and the page takes it on its transaction.
func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	var in struct {
		MobileNumber string `json:"mobileNumber"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	sess := s.session(w, r)
	id := s.transaction(sess, FlowVerify)
	if id == "" {
		writeError(w, http.StatusConflict, "NO_TRANSACTION", "this session has started no VERIFY flow")
		return
	}
	var tx struct {
		Status                string `json:"status"`
		OperatorID            string `json:"operatorId"`
		EncryptedMobileNumber string `json:"encryptedMobileNumber"`
	}
	if !s.call(w, r, http.MethodGet, "/opportunity/"+url.PathEscape(id), nil, &tx) {
		return
	}
	if tx.EncryptedMobileNumber == "" {
		writeError(w, http.StatusConflict, "NOT_CAPTURED", "the transaction is "+tx.Status+": capture it first")
		return
	}
	var flow workflowAnswer
	if !s.call(w, r, http.MethodPost, "/workflows", map[string]string{"mobileNumber": in.MobileNumber, "transactionId": id}, &flow) {
		return
	}
	s.mu.Lock()
	sess.workflow = flow.WorkflowID
	s.mu.Unlock()
	op := tx.OperatorID
	if op == "" {
		op = sandboxOperator
	}
	if !s.call(w, r, http.MethodPost, "/workflows/"+url.PathEscape(flow.WorkflowID)+"/silent", map[string]string{
		"encryptedMobileNumber": tx.EncryptedMobileNumber, "operatorId": op, "serviceType": "HEADER_ENRICHMENT",
	}, &flow) {
		return
	}
	writeJSON(w, http.StatusOK, flow.page())
}

// workflow reads the session's workflow: after the page's code field says how it ended, the
// backend believes the workflow, not the page.
func (s *Server) workflow(w http.ResponseWriter, r *http.Request) {
	sess := s.session(w, r)
	s.mu.Lock()
	id := sess.workflow
	s.mu.Unlock()
	if id == "" {
		writeError(w, http.StatusConflict, "NO_WORKFLOW", "this session has started no workflow")
		return
	}
	var flow workflowAnswer
	if !s.call(w, r, http.MethodGet, "/workflows/"+url.PathEscape(id), nil, &flow) {
		return
	}
	writeJSON(w, http.StatusOK, flow.page())
}

func (s *Server) stuckPlus(w http.ResponseWriter, r *http.Request) {
	id := s.transaction(s.session(w, r), FlowStuckPlus)
	if id == "" {
		writeError(w, http.StatusConflict, "NO_TRANSACTION", "this session has started no STUCK_PLUS flow")
		return
	}
	var list struct {
		Items []struct {
			ID                 string `json:"id"`
			TransactionID      string `json:"transactionId"`
			MetadataID         string `json:"metadataId"`
			OperatorID         string `json:"operatorId"`
			MobileNumberMasked string `json:"mobileNumberMasked"`
			CreatedAt          string `json:"createdAt"`
		} `json:"items"`
	}
	if !s.call(w, r, http.MethodGet, "/me/stuck-plus/sessions?size=100", nil, &list) {
		return
	}
	for _, it := range list.Items {
		if it.TransactionID == id {
			writeJSON(w, http.StatusOK, map[string]any{"transactionId": id, "session": it})
			return
		}
	}
	writeError(w, http.StatusNotFound, "NOT_CAPTURED", "no stuck-plus session for this transaction yet: capture it first")
}

// apiError is an error answer of the mnv API: its status and the envelope's first message.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("mnv API: %d %s: %s", e.status, e.code, e.message)
}

// call is fetch for a handler: on failure it answers the page with the API's code and
// message (never the request, which holds the key) and returns false.
func (s *Server) call(w http.ResponseWriter, r *http.Request, method, path string, body, out any) bool {
	err := s.fetch(r.Context(), method, path, body, out)
	var ae *apiError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ae):
		writeError(w, ae.status, ae.code, ae.message)
	case errors.Is(err, errNoClient):
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the demo client is not ready yet")
	default:
		writeError(w, http.StatusBadGateway, "UNAVAILABLE", "the mnv API did not answer")
	}
	return false
}

var errNoClient = errors.New("no demo client yet")

// fetch calls the mnv API as the demo client and decodes the envelope's data into out.
func (s *Server) fetch(ctx context.Context, method, path string, body, out any) error {
	c := s.client.Load()
	if c == nil {
		return errNoClient
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.gateway+"/v1/api"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-KEY", c.APIKey)
	req.Header.Set("X-CLIENT-ID", c.ID)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Success  bool            `json:"success"`
		Data     json.RawMessage `json:"data"`
		Messages []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env); err != nil {
		return fmt.Errorf("%s %s: %d, not an envelope: %w", method, path, resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 || !env.Success {
		ae := &apiError{status: resp.StatusCode, code: "UNKNOWN", message: http.StatusText(resp.StatusCode)}
		if len(env.Messages) > 0 {
			ae.code, ae.message = env.Messages[0].Code, env.Messages[0].Message
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s %s: data: %w", method, path, err)
	}
	return nil
}

// readJSON decodes a small JSON body. It requires the JSON content type, which a page of
// another site cannot send without a preflight this server never answers: with the Lax
// cookie, a second guard against cross-site requests.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", "send application/json")
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the body is not the JSON expected")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}
