// Package app composes the gateway: the HTTP edge that serves /v1/api as JSON, authenticates
// headers, wraps every answer in the envelope and calls the services over gRPC. The gateway's
// own binary (cmd/gateway) and the all-in-one developer binary both start it through here.
package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/gateway/internal/allow"
	"github.com/mnvhq/mnv/gateway/internal/apidocs"
	"github.com/mnvhq/mnv/gateway/internal/backends"
	"github.com/mnvhq/mnv/gateway/internal/callerauth"
	"github.com/mnvhq/mnv/gateway/internal/camaraproxy"
	"github.com/mnvhq/mnv/gateway/internal/clientip"
	"github.com/mnvhq/mnv/gateway/internal/console"
	"github.com/mnvhq/mnv/gateway/internal/dispatch"
	"github.com/mnvhq/mnv/gateway/internal/edgelimit"
	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/gateway/internal/jsonpb"
	"github.com/mnvhq/mnv/gateway/internal/landing"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	"github.com/mnvhq/mnv/gateway/internal/sdkassets"
	"github.com/mnvhq/mnv/gateway/internal/upload"
	"github.com/mnvhq/mnv/gateway/internal/weborigin"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/accountsclient/principalcache"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/idempotency/idemkey"
	"github.com/mnvhq/mnv/services/platform/lifecycle"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// Config is the gateway's configuration.
type Config struct {
	// HTTPAddr is where the API listens (MNV_HTTP_ADDR).
	HTTPAddr string
	// AccountsAddr is the accounts service's gRPC address (MNV_ACCOUNTS_ADDR).
	AccountsAddr string
	// VerificationAddr is the verification service's gRPC address (MNV_VERIFICATION_ADDR).
	VerificationAddr string
	// ConnectAddr is the connect service's gRPC address (MNV_CONNECT_ADDR).
	ConnectAddr string
	// CAMARAAddr is the verification service's CAMARA facade, host:port (MNV_CAMARA_ADDR):
	// the gateway proxies OIDC discovery, /oauth2/ and /number-verification/v2/ to it. Empty:
	// those paths are 404 (the default; `make run` sets it).
	CAMARAAddr string
	// TrustedProxies may speak for the client address in X-Forwarded-For (MNV_TRUSTED_PROXIES,
	// comma-separated CIDRs); empty: the socket address is the client.
	TrustedProxies []netip.Prefix
	// NumberHeaders are the headers operators' proxies put the number in (MNV_NUMBER_HEADERS,
	// comma-separated): passed to the verification service on the capture routes only. They
	// must list every numberHeader of the operator registry.
	NumberHeaders []string
	// InternalToken is the gateway's own credential, presented to the services
	// (MNV_INTERNAL_TOKEN): the one token they believe about a client's network.
	InternalToken string
	// TLSCAFile, when set, makes the calls to the services TLS, verified against it
	// (MNV_GRPC_TLS_CA): the gRPC calls and the proxy to the CAMARA facade.
	TLSCAFile string
	// MaxBodyBytes bounds JSON request bodies (MNV_MAX_BODY_BYTES); beyond it, 413.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful stop (MNV_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// Limits per client address (gateway/internal/edgelimit): IPRate and IPBurst on the routes
	// without a credential (MNV_IP_RATE, MNV_IP_BURST), AuthFailureRate and AuthFailureBurst on
	// failed authentications (MNV_AUTH_FAILURE_RATE, MNV_AUTH_FAILURE_BURST); a rate of 0
	// disables a limit. RedisURL shares them between replicas (MNV_REDIS_URL[_FILE]).
	IPRate           float64
	IPBurst          int
	AuthFailureRate  float64
	AuthFailureBurst int
	RedisURL         string
	// PrincipalCache keeps the principals of the credentials the gateway resolved
	// (MNV_PRINCIPAL_CACHE_SIZE, MNV_PRINCIPAL_CACHE_MAX_AGE), kept in step with accounts as the
	// services' caches are (gateway/internal/callerauth).
	PrincipalCache principalcache.Config
	// AuditQueue bounds the retries of console audit events accounts could not take at once
	// (MNV_AUDIT_QUEUE_SIZE, MNV_AUDIT_RETRY_FOR; gateway/internal/callerauth/audit.go).
	AuditQueue callerauth.AuditQueueConfig
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		HTTPAddr: "127.0.0.1:8080", AccountsAddr: "127.0.0.1:9091", VerificationAddr: "127.0.0.1:9092", ConnectAddr: "127.0.0.1:9093",
		NumberHeaders: []string{"X-Mnv-Sandbox-Msisdn"},
		MaxBodyBytes:  1 << 20, ShutdownTimeout: 15 * time.Second,
		IPRate: 10, IPBurst: 50, AuthFailureRate: 1, AuthFailureBurst: 30,
		AuditQueue: callerauth.DefaultAuditQueueConfig(),
	}
}

// LoadConfig reads the configuration from env over the defaults.
func LoadConfig(env *config.Env) (Config, error) {
	c := DefaultConfig()
	c.HTTPAddr = env.String("MNV_HTTP_ADDR", c.HTTPAddr)
	c.AccountsAddr = env.String("MNV_ACCOUNTS_ADDR", c.AccountsAddr)
	c.VerificationAddr = env.String("MNV_VERIFICATION_ADDR", c.VerificationAddr)
	c.ConnectAddr = env.String("MNV_CONNECT_ADDR", c.ConnectAddr)
	c.CAMARAAddr = env.String("MNV_CAMARA_ADDR", c.CAMARAAddr)
	proxies, err := clientip.ParsePrefixes(env.String("MNV_TRUSTED_PROXIES", ""))
	if err != nil {
		return c, fmt.Errorf("MNV_TRUSTED_PROXIES: %w", err)
	}
	c.TrustedProxies = proxies
	if h := env.String("MNV_NUMBER_HEADERS", ""); h != "" {
		c.NumberHeaders = nil
		for _, name := range strings.Split(h, ",") {
			if name = strings.TrimSpace(name); name != "" {
				c.NumberHeaders = append(c.NumberHeaders, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	c.InternalToken = env.Secret("MNV_INTERNAL_TOKEN")
	c.TLSCAFile = env.String("MNV_GRPC_TLS_CA", "")
	c.MaxBodyBytes = int64(env.Int("MNV_MAX_BODY_BYTES", int(c.MaxBodyBytes)))
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	c.IPRate = env.Float("MNV_IP_RATE", c.IPRate)
	c.IPBurst = env.Int("MNV_IP_BURST", c.IPBurst)
	c.AuthFailureRate = env.Float("MNV_AUTH_FAILURE_RATE", c.AuthFailureRate)
	c.AuthFailureBurst = env.Int("MNV_AUTH_FAILURE_BURST", c.AuthFailureBurst)
	c.RedisURL = env.Secret("MNV_REDIS_URL")
	c.AuditQueue.Size = env.Int("MNV_AUDIT_QUEUE_SIZE", c.AuditQueue.Size)
	c.AuditQueue.MaxAge = env.Duration("MNV_AUDIT_RETRY_FOR", c.AuditQueue.MaxAge)
	c.PrincipalCache = principalcache.LoadConfig(env)
	env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	if err := env.Err(); err != nil {
		return c, err
	}
	if err := c.PrincipalCache.Validate(); err != nil {
		return c, err
	}
	if err := c.AuditQueue.Validate(); err != nil {
		return c, err
	}
	if c.MaxBodyBytes < 1024 {
		return c, errors.New("MNV_MAX_BODY_BYTES: must be at least 1024")
	}
	if c.IPRate < 0 || c.IPBurst < 1 || c.AuthFailureRate < 0 || c.AuthFailureBurst < 1 {
		return c, errors.New("MNV_IP_RATE, MNV_IP_BURST, MNV_AUTH_FAILURE_RATE, MNV_AUTH_FAILURE_BURST: must not be negative (bursts at least 1)")
	}
	return c, nil
}

// successMessages are the success texts the routes' RPCs declare (mnv.options.v1.rule), by
// full method name.
func successMessages(routes []openapigen.Route) map[string]string {
	m := make(map[string]string, len(routes))
	for _, rt := range routes {
		if r, ok := rpcrule.Lookup(rt.RPC); ok && r.GetSuccessMessage() != "" {
			m[rt.RPC] = r.GetSuccessMessage()
		}
	}
	return m
}

// How much of a body the gateway reads, after answering, so that a client still writing it
// gets the answer rather than a reset: a few MiB beyond the JSON limit, for a few seconds.
const (
	drainBeyondLimit = 4 << 20
	drainWait        = 3 * time.Second
)

// Gateway is the HTTP edge.
type Gateway struct {
	cfg      Config
	log      *zap.Logger
	handler  http.Handler
	backends []*backends.Backend
	// closer holds what New opened (the backend connections, their health checks, the rate
	// limits), closed by Run's end or Close.
	closer lifecycle.Closer
}

// New builds the gateway. gatherer is what /metrics serves (the gateway's own registry, or in
// the all-in-one binary every service's).
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer) (_ *Gateway, err error) {
	g := &Gateway{cfg: cfg, log: log}
	defer g.closer.CloseOnError(&err)
	accounts, err := g.dial(ctx, "accounts", cfg.AccountsAddr)
	if err != nil {
		return nil, err
	}
	verification, err := g.dial(ctx, "verification", cfg.VerificationAddr)
	if err != nil {
		return nil, err
	}
	connect, err := g.dial(ctx, "connect", cfg.ConnectAddr)
	if err != nil {
		return nil, err
	}

	principals, accountsAuth, err := g.principals(ctx, reg)
	if err != nil {
		return nil, err
	}
	callers, err := callerauth.New(principals, openapigen.Routes)
	if err != nil {
		return nil, fmt.Errorf("header rules: %w", err)
	}
	// Opened after the accounts connection it records through, so closed before it: Close
	// retries what is queued while accounts can still be reached.
	audits, err := callerauth.NewAuditQueue(accountsAuth, cfg.AuditQueue, log, reg)
	if err != nil {
		return nil, fmt.Errorf("audit queue: %w", err)
	}
	g.closer.Add("console audit queue", audits.Close)
	callers.WithAuditor(audits)

	metrics, err := middleware.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	limits, err := ratelimit.Open(ratelimit.Options{Service: "gateway", RedisURL: cfg.RedisURL, Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	g.closer.Add("rate limits", limits.Close)
	perAddress := edgelimit.Middleware(
		limits.Limiter("address", ratelimit.Limit{Rate: cfg.IPRate, Burst: cfg.IPBurst}),
		limits.Limiter("auth_failure", ratelimit.Limit{Rate: cfg.AuthFailureRate, Burst: cfg.AuthFailureBurst}), log)
	rewrite := envelope.ResponseRewriter(successMessages(openapigen.Routes))
	allowed := allow.New(openapigen.Routes).Of
	newMux := func() *runtime.ServeMux {
		return runtime.NewServeMux(
			runtime.WithMarshalerOption(runtime.MIMEWildcard, &jsonpb.Marshaler{MaxBody: cfg.MaxBodyBytes}),
			runtime.WithIncomingHeaderMatcher(incomingHeaders),
			runtime.WithOutgoingHeaderMatcher(outgoingHeaders),
			runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
			runtime.WithForwardResponseRewriter(rewrite),
			// A client's own write drops its principals from the cache before the answer leaves.
			runtime.WithForwardResponseOption(callers.ForgetWritten),
			// A sign-in, switch or sign-out answers with the session cookie (docs/api-decisions.md#console).
			runtime.WithForwardResponseOption(callerauth.SetCookie),
			// The NETWORK_API callback of a browser capture answers the browser with 303 to the
			// client's page.
			runtime.WithForwardResponseOption(weborigin.Redirect),
			runtime.WithErrorHandler(envelope.ErrorHandler(log, outgoingHeaders)),
			runtime.WithRoutingErrorHandler(envelope.RoutingErrorHandler(allowed)),
			runtime.WithMiddlewares(middleware.RouteMiddleware(), callers.Middleware()),
			runtime.WithMetadata(captureMetadata(callers, cfg.NumberHeaders)),
			runtime.WithMetadata(callerauth.Metadata),
			runtime.WithDisablePathLengthFallback(),
			runtime.WithDisableHTTPMethodOverride(),
			// An escaped slash is a character of its segment (RFC 3986), not a separator. The
			// default (legacy) mode decodes the whole path before matching, so it served
			// /v1/api/me%2Fapi-keys as /v1/api/me/api-keys, past any proxy rule or log filter
			// that reads the path as it was sent.
			runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
			runtime.WithWriteContentLength(),
		)
	}
	// Each service's routes on a mux of their own, which a route's request reaches through
	// dispatch, and all of them on one more, which answers what no route names (404, 405).
	accountsMux, verificationMux, connectMux, all := newMux(), newMux(), newMux(), newMux()
	for _, m := range []*runtime.ServeMux{accountsMux, all} {
		if err := accountsv1.RegisterAccountsServiceHandler(ctx, m, accounts); err != nil {
			return nil, fmt.Errorf("register accounts routes: %w", err)
		}
		if err := accountsv1.RegisterPeopleServiceHandler(ctx, m, accounts); err != nil {
			return nil, fmt.Errorf("register people routes: %w", err)
		}
	}
	for _, m := range []*runtime.ServeMux{verificationMux, all} {
		if err := verificationv1.RegisterVerificationServiceHandler(ctx, m, verification); err != nil {
			return nil, fmt.Errorf("register verification routes: %w", err)
		}
	}
	uploads := connectv1.NewConnectServiceClient(connect)
	for _, m := range []*runtime.ServeMux{connectMux, all} {
		if err := connectv1.RegisterConnectServiceHandler(ctx, m, connect); err != nil {
			return nil, fmt.Errorf("register connect routes: %w", err)
		}
		if err := connectv1.RegisterWebhookServiceHandler(ctx, m, connect); err != nil {
			return nil, fmt.Errorf("register webhook routes: %w", err)
		}
		if err := upload.Register(m, uploads); err != nil {
			return nil, fmt.Errorf("register upload routes: %w", err)
		}
	}
	mux, err := dispatch.New(openapigen.Routes, map[string]http.Handler{
		accountsv1.AccountsService_ServiceDesc.ServiceName:         accountsMux,
		accountsv1.PeopleService_ServiceDesc.ServiceName:           accountsMux,
		verificationv1.VerificationService_ServiceDesc.ServiceName: verificationMux,
		connectv1.ConnectService_ServiceDesc.ServiceName:           connectMux,
		connectv1.WebhookService_ServiceDesc.ServiceName:           connectMux,
	}, all)
	if err != nil {
		return nil, err
	}

	// Operational endpoints and the API description live beside the API, outside the mux's
	// credential rules.
	root := http.NewServeMux()
	root.Handle("/v1/api/", middleware.BodyLimit(cfg.MaxBodyBytes, upload.Streaming)(mux))
	// The browser routes (the capture, the read) take no credential: they are bound to the web
	// origins of the transaction's client, and answer CORS for those origins only.
	root.Handle("/v1/api/web/", weborigin.Middleware(verificationv1.NewVerificationServiceClient(verification), cfg.NumberHeaders, log)(
		middleware.BodyLimit(cfg.MaxBodyBytes, nil)(mux)))
	// The generated document, as it is, and the reference page that renders it.
	root.HandleFunc("GET "+apidocs.SpecPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapigen.JSON)
	})
	apidocs.Register(root)
	// The browser SDK, public static files. Outside the per-address budgets (edgelimit), unlike
	// the other routes without a credential: they cost no backend call, browsers cache them,
	// and a budget per address would refuse the SDK to many subscribers behind one mobile
	// carrier's NAT, the very users the browser flow is for.
	sdkassets.Register(root)
	// The console: the client's people's app, static files embedded in the binary, under a
	// strict CSP; it talks to /v1/api with their session cookie. Outside the per-address
	// budgets for the reasons the SDK is: no backend call, and browsers cache the assets.
	console.Register(root)
	// The CAMARA facade: OAuth2 and CAMARA bodies, proxied as they are to verification's
	// HTTP listener, over TLS with the services' CA when the gRPC calls are.
	if cfg.CAMARAAddr != "" {
		var facadeTLS *tls.Config
		if cfg.TLSCAFile != "" {
			if facadeTLS, err = grpcclient.TLSConfig(cfg.TLSCAFile); err != nil {
				return nil, err
			}
		}
		facade := camaraproxy.New(cfg.CAMARAAddr, cfg.InternalToken, cfg.NumberHeaders, facadeTLS, log)
		for _, p := range camaraproxy.Paths {
			root.Handle(p, middleware.BodyLimit(cfg.MaxBodyBytes, nil)(facade))
		}
	}
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		envelope.WriteSuccess(w, http.StatusOK, "alive", []byte(`{"status":"SERVING"}`))
	})
	root.HandleFunc("GET /readyz", g.ready)
	// A person who opens the address sees what it is, not a JSON 404.
	landing.Register(root, landing.Links{Reference: apidocs.PagePath, OpenAPI: apidocs.SpecPath, Health: "/healthz", Ready: "/readyz"})
	root.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	root.Handle("/", mux) // everything else: the mux's 404 and 405 in the envelope
	// The roots of the trees above, where http.ServeMux would answer an HTML redirect to the
	// tree: /v1/api is the URL `make run` prints, so its 404 points to the reference.
	root.Handle("/v1/api", apiRoot)
	root.Handle("/v1/api/{$}", apiRoot)
	root.Handle("/v1/api/web", mux)

	// The client address is resolved before the forwarding headers are stripped. The trace's
	// server span (when tracing is on) encloses the access log, so the log line can name it.
	// Only the drain of unread bodies is further out: it runs once the answer is complete.
	g.handler = middleware.DrainBody(cfg.MaxBodyBytes+drainBeyondLimit, drainWait)(
		tracing.Handler(middleware.RequestID(middleware.Recover(log)(middleware.Observe(log, metrics)(
			clientip.Middleware(clientip.NewResolver(cfg.TrustedProxies))(camaraproxy.KeepAuthorization(middleware.StripUntrusted(perAddress(middleware.CleanPath(root))))))))))
	return g, nil
}

// apiRoot answers the root of the API, which has no route of its own, with the 404 envelope
// that says where the routes are described.
var apiRoot = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	envelope.WriteError(w, envelope.Error{
		Status: http.StatusNotFound, Code: string(fault.NotFound),
		Message: "no such path: the API's routes are described at " + apidocs.PagePath + " (and as OpenAPI at " + apidocs.SpecPath + ")",
	})
})

// dial connects to the backend name at addr and watches its health until Close, which stops
// the watch before it closes the connection.
func (g *Gateway) dial(ctx context.Context, name, addr string) (*grpc.ClientConn, error) {
	b := backends.New(name)
	conn, err := grpcclient.Dial(addr, grpcclient.Options{Token: g.cfg.InternalToken, CAFile: g.cfg.TLSCAFile}, b.DialOptions()...)
	if err != nil {
		return nil, err
	}
	g.closer.Add(name+" connection", conn.Close)
	b.Attach(conn)
	g.backends = append(g.backends, b)
	// The watch outlives New's ctx, which may end once the gateway is built.
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() { defer close(watched); b.Watch(watchCtx) }()
	g.closer.AddFunc(name+" health checks", func() { stop(); <-watched })
	return conn, nil
}

// principals returns the gateway's principal cache in front of accounts, and keeps the cache's
// WatchPrincipals stream until Close (without it the cache never serves: every request asks
// accounts).
func (g *Gateway) principals(ctx context.Context, reg prometheus.Registerer) (*principalcache.Cache, *accountsclient.Client, error) {
	accounts, err := accountsclient.Dial(g.cfg.AccountsAddr, grpcclient.Options{Token: g.cfg.InternalToken, CAFile: g.cfg.TLSCAFile})
	if err != nil {
		return nil, nil, err
	}
	g.closer.Add("accounts authentication connection", accounts.Close)
	cache, watch, err := accounts.Cached(g.cfg.PrincipalCache, reg, g.log)
	if err != nil {
		return nil, nil, err
	}
	// The watch outlives New's ctx, which may end once the gateway is built.
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() { defer close(watched); watch(watchCtx) }()
	g.closer.AddFunc("principal changes", func() { stop(); <-watched })
	return cache, accounts, nil
}

// captureMetadata passes the client address (as resolved behind the trusted proxies), the
// operator number headers and the page's Origin to the services, on the routes where the
// caller is the end user's device: the SDK session and the browser's routes, which take no
// credential (the capture, and the page's workflow routes: read, code, resend). A number
// header means nothing anywhere else, and is personal data. The verification service reads
// them (auth.MDClientIP, auth.MDHeaderPrefix, auth.MDOrigin) on those routes' RPCs only; on
// the page's workflow routes the address is the end user's for the pumping budget per address
// (docs/architecture.md, "Pumping controls").
func captureMetadata(rules *callerauth.Auth, numberHeaders []string) func(context.Context, *http.Request) metadata.MD {
	type numberHeader struct{ name, key string }
	headers := make([]numberHeader, len(numberHeaders))
	for i, h := range numberHeaders {
		headers[i] = numberHeader{name: h, key: auth.MDHeaderPrefix + strings.ToLower(h)}
	}
	return func(ctx context.Context, r *http.Request) metadata.MD {
		// The routes where the network is the credential: the SDK session and the browser
		// capture, which takes none.
		if e, ok := rules.Edge(r.Method, callerauth.RoutePattern(ctx)); !ok || e.Credential != principal.SDKToken && !e.Public() {
			return nil
		}
		md := metadata.MD{}
		if addr, ok := clientip.FromContext(r.Context()); ok {
			md.Set(auth.MDClientIP, addr.String())
		}
		for _, h := range headers {
			if v := r.Header.Values(h.name); len(v) == 1 {
				md.Set(h.key, v[0])
			}
		}
		if v := r.Header.Values("Origin"); len(v) == 1 {
			md.Set(auth.MDOrigin, v[0])
		}
		return md
	}
}

// incomingHeaders lets exactly the headers the services need through, under lower-case gRPC
// metadata keys. Everything else (Authorization included) stays at the edge.
func incomingHeaders(key string) (string, bool) {
	switch key = strings.ToLower(key); key {
	case principal.MDClientID, requestid.MD, idemkey.MD:
		return key, true
	}
	for _, k := range principal.ClientKinds() {
		if key == k.MD() {
			return key, true
		}
	}
	return "", false
}

// outgoingHeaders passes on the response headers the API documents, nothing else.
func outgoingHeaders(key string) (string, bool) {
	switch strings.ToLower(key) {
	case idemkey.MDReplayed:
		return "Idempotent-Replayed", true
	case "retry-after":
		return "Retry-After", true
	}
	return "", false
}

// ready answers 200 whenever the gateway serves: its readiness is its own (a stopping gateway
// closes its listener first, so probes fail then). The backends' states, checked now, are
// listed for information only: one service down must not take every gateway replica out of
// rotation, and with it the routes of the other services; a route whose service is away
// answers 503 itself.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	var (
		mu     sync.Mutex
		checks sync.WaitGroup
		states = make(map[string]string, len(g.backends))
	)
	for _, b := range g.backends {
		checks.Go(func() {
			s := b.Check(r.Context()).String()
			mu.Lock()
			defer mu.Unlock()
			states[b.Name] = s
		})
	}
	checks.Wait()
	data, err := json.Marshal(struct {
		Status   string            `json:"status"`
		Backends map[string]string `json:"backends"`
	}{"SERVING", states})
	if err != nil {
		envelope.WriteError(w, envelope.Internal(context.Background()))
		return
	}
	envelope.WriteSuccess(w, http.StatusOK, "ready", data)
}

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Listen opens the configured HTTP address.
func (g *Gateway) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", g.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (MNV_HTTP_ADDR): %w", g.cfg.HTTPAddr, err)
	}
	return lis, nil
}

// Run serves on lis until ctx ends, then lets in-flight requests finish (up to the shutdown
// timeout) and closes what New opened.
func (g *Gateway) Run(ctx context.Context, lis net.Listener) (err error) {
	defer func() { err = errors.Join(err, g.Close()) }()
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(g.log),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// Close ends the health checks and closes the backend connections and the rate limits. Run
// closes them itself; Close is for a Gateway that is never run.
func (g *Gateway) Close() error { return g.closer.Close() }
