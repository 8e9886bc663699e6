package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/tests/harness"
)

// Benchmark F, CAMARA: what a verification costs the caller, end to end through the real
// processes, by the way the operator vouches for the line. Three flows, each ending in one
// charged VERIFIED answer:
//   - HE: header enrichment through the sandbox operator: the app's SDK session (the number
//     header as the operator's proxy adds it), then POST /v1/api/verify.
//   - NETWORK_API: the app's SDK session for an operator reached through the fake CAMARA operator
//     (platform/testkit/sandboxcamara, in this process, as make run's sandbox-camara), the device
//     following the authorization URL to the fake and its redirect to mnv's callback (which
//     exchanges the code at the fake's token endpoint), then POST /v1/api/verify with serviceType
//     NETWORK_API, which calls the fake's /verify with the session's token.
//   - facade: mnv as the CAMARA provider: the device's authorization code flow through the
//     gateway (the line identified by header enrichment), the client's code exchange with its
//     client secret, then POST /number-verification/v2/verify with that token.
//
// Each flow is timed whole (from the first request until the verify's answer) and the verify
// call alone. First sequentially, the flows interleaved one at a time (HE, NETWORK_API,
// facade, HE, …) so a noisy machine's drift hits them alike, then each flow alone on a few
// concurrent workers. The added latency of NETWORK_API is its percentiles minus HE's.

const (
	// camaraOperator is F's NETWORK_API operator in the suite's registry.
	camaraOperator = "bench-camara"
	// camaraClientID is mnv's client id at the fake operator.
	camaraClientID = "mnv-bench"
	// callbackPath is where NETWORK_API operators send the device back (verification's
	// CallbackPath, on the gateway).
	callbackPath = "/v1/api/sdk/session/callback"
	// facadeOrigin and facadeRedirect are the facade clients' web origin and redirect URI. Nothing
	// listens there: the device's last redirect is read, not followed.
	facadeOrigin   = "https://bench.example"
	facadeRedirect = facadeOrigin + "/camara/callback"
	facadeScope    = "openid " + sandboxcamara.ScopeVerify
	// maxHops bounds the redirects of one authorization.
	maxHops = 4
	// camaraWarmup is the uncounted flows of each kind before each measured run.
	camaraWarmup = 10
	// camaraNumbers prefixes F's numbers, apart from benchmark C's (+97150…).
	camaraNumbers = "+97152"
)

// camaraRegistry is the operator registry of a suite that runs F: the sandbox operator, as the
// built-in registry has it, and F's NETWORK_API operator at the fake, with the client secret in
// the file beside the registry.
const camaraRegistry = `operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    mccMnc: ["001-01"]
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.0/8", "::1/128"]
      numberHeader: X-Mnv-Sandbox-Msisdn
  - id: %s
    name: bench CAMARA operator (sandboxcamara)
    country: ZZ
    methods: [NETWORK_API]
    camara:
      discoveryUrl: %s
      apiRoot: %s
      clientId: %s
      clientAuth: client_secret_basic
      clientSecretFile: camara.secret
      hashedPhoneNumber: true
`

// CAMARAOperator is the fake operator of benchmark F and the registry that points at it.
type CAMARAOperator struct {
	Fake *sandboxcamara.Fake
	// Registry is the operators file for verification (MNV_OPERATORS_FILE).
	Registry string
	dir      string
}

// startCAMARAOperator starts the fake operator on loopback and writes a registry for it, with
// a client secret made for this run, into a temporary folder. It runs before the suite:
// verification reads the registry, and the operator's discovery document, when it starts.
func startCAMARAOperator() (*CAMARAOperator, error) {
	secret := fmt.Sprintf("bench-%d-secret-0123456789abcdef", time.Now().UnixNano())
	f, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: camaraClientID, Secret: secret}}})
	if err != nil {
		return nil, err
	}
	op := &CAMARAOperator{Fake: f}
	if op.dir, err = os.MkdirTemp("", "mnv-bench-camara-"); err == nil {
		op.Registry = filepath.Join(op.dir, "operators.yaml")
		err = os.WriteFile(filepath.Join(op.dir, "camara.secret"), []byte(secret+"\n"), 0o600)
	}
	if err == nil {
		err = os.WriteFile(op.Registry, fmt.Appendf(nil, camaraRegistry, camaraOperator, f.DiscoveryURL(), f.URL, camaraClientID), 0o600)
	}
	if err != nil {
		op.Close()
		return nil, fmt.Errorf("operator registry: %w", err)
	}
	return op, nil
}

// Close stops the fake and removes the registry.
func (o *CAMARAOperator) Close() {
	_ = o.Fake.Close()
	if o.dir != "" {
		_ = os.RemoveAll(o.dir)
	}
}

// FlowResult is one run of one flow of F: the latencies of its successful flows, sorted.
type FlowResult struct {
	Name         string
	Verify, Flow []time.Duration
	Errors       int
	FirstErr     error
	// Elapsed and CPU are of the whole run, which may have interleaved other flows: per flow
	// only when the run had this flow alone.
	Elapsed time.Duration
	CPU     CPU
	Alone   bool
}

// OK is the number of successful flows.
func (r FlowResult) OK() int { return len(r.Verify) }

// Throughput is successful flows per second of the run.
func (r FlowResult) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK()) / r.Elapsed.Seconds()
}

// ErrorRate is failed flows over all flows (1 when none ran).
func (r FlowResult) ErrorRate() float64 {
	if n := r.OK() + r.Errors; n > 0 {
		return float64(r.Errors) / float64(n)
	}
	return 1
}

// AddedLatency is what one flow's percentiles add over another's.
type AddedLatency struct {
	Name                                   string
	VerifyP50, VerifyP99, FlowP50, FlowP99 time.Duration
}

func addedLatency(name string, base, over FlowResult) AddedLatency {
	return AddedLatency{
		Name:      name,
		VerifyP50: percentile(over.Verify, 50) - percentile(base.Verify, 50),
		VerifyP99: percentile(over.Verify, 99) - percentile(base.Verify, 99),
		FlowP50:   percentile(over.Flow, 50) - percentile(base.Flow, 50),
		FlowP99:   percentile(over.Flow, 99) - percentile(base.Flow, 99),
	}
}

// flow runs one flow of F with the i-th client of its kind and returns how long the verify
// call alone took; the runner times the whole flow.
type flow struct {
	name string
	run  func(ctx context.Context, i int) (verify time.Duration, err error)
}

// runFlows runs n flows of each kind on workers goroutines, taking them in turn (a, b, c, a, …),
// so one worker interleaves the kinds one flow at a time; every flow is bounded by timeout.
func runFlows(ctx context.Context, workers, n int, timeout time.Duration, flows ...flow) []FlowResult {
	out := make([]FlowResult, len(flows))
	var mu sync.Mutex
	var next atomic.Int64
	total := int64(n * len(flows))
	cpu0, start := sampleCPU(), time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if k >= total {
					return
				}
				f := int(k % int64(len(flows)))
				cctx, cancel := context.WithTimeout(ctx, timeout)
				t0 := time.Now()
				v, err := flows[f].run(cctx, int(k/int64(len(flows))))
				d := time.Since(t0)
				cancel()
				mu.Lock()
				if err != nil {
					out[f].Errors++
					if out[f].FirstErr == nil {
						out[f].FirstErr = err
					}
				} else {
					out[f].Verify, out[f].Flow = append(out[f].Verify, v), append(out[f].Flow, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), sampleCPU().sub(cpu0)
	for i := range out {
		out[i].Name, out[i].Elapsed, out[i].CPU, out[i].Alone = flows[i].name, elapsed, cpu, len(flows) == 1
		slices.Sort(out[i].Verify)
		slices.Sort(out[i].Flow)
	}
	return out
}

// CAMARAReport is benchmark F.
type CAMARAReport struct {
	// Sequential are the three flows interleaved on one worker; Concurrent each flow alone on
	// Workers workers (none when Workers is 0).
	Sequential, Concurrent []FlowResult
	Workers                int
	Added                  []AddedLatency
	Checks                 []Check
}

// camaraBench holds what F's flows share.
type camaraBench struct {
	hc, device *http.Client // device: the phone's, which reports redirects instead of following them
	url        string
	op         *CAMARAOperator
	numbers    atomic.Int64
	// The clients of each flow, used in turn.
	he, network, facade *blobPool
	// networkVerifies counts POST /v1/api/verify calls with serviceType NETWORK_API: each must
	// reach the operator's /verify once.
	networkVerifies atomic.Int64
}

func (b *camaraBench) number() string { return fmt.Sprintf("%s%07d", camaraNumbers, b.numbers.Add(1)) }

// benchCAMARA is benchmark F. op is the fake operator the suite's registry points at.
func benchCAMARA(ctx context.Context, s *harness.Suite, cfg Config, op *CAMARAOperator, n, workers int, progress io.Writer) (CAMARAReport, error) {
	rep := CAMARAReport{Workers: workers}
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	op.Fake.AddRedirectURI(camaraClientID, s.GatewayURL+callbackPath)
	admin, err := dialAdmin(s)
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	internal, err := dialInternal(s, 1)
	if err != nil {
		return rep, err
	}
	defer internal.Close()
	hc, closeHTTP := newHTTPClient(max(workers, 1))
	defer closeHTTP()
	device := *hc
	device.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b := &camaraBench{hc: hc, device: &device, url: s.GatewayURL, op: op}

	// Each flow has its own clients, one per worker, so the charge check holds per flow and no
	// two workers contend on one balance row.
	perFlow := max(workers, 1)
	t0 := time.Now()
	vb := &verifyBench{hc: hc, url: s.GatewayURL, timeout: cfg.Timeout}
	adminCl := accountsv1.NewAccountsAdminServiceClient(admin)
	clients, err := vb.createClients(ctx, adminCl, 3*perFlow)
	if err != nil {
		return rep, err
	}
	grants := &accountsv1.OperatorEnablement{Grants: []*accountsv1.OperatorGrant{
		{OperatorId: camaraOperator, Methods: []accountsv1.OperatorMethod{accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API}},
		{OperatorId: "sandbox", Methods: []accountsv1.OperatorMethod{accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT}},
	}}
	err = parallel(ctx, len(clients), func(ctx context.Context, i int) error {
		if _, err := adminCl.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: clients[i].ID, Operators: grants}); err != nil {
			return fmt.Errorf("operators of %s: %w", clients[i].ID, err)
		}
		if _, err := adminCl.SetClientWebOrigins(ctx, &accountsv1.SetClientWebOriginsRequest{ClientId: clients[i].ID, Origins: []string{facadeOrigin}}); err != nil {
			return fmt.Errorf("web origins of %s: %w", clients[i].ID, err)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	b.he = &blobPool{name: "F HE", clients: clients[:perFlow]}
	b.network = &blobPool{name: "F NETWORK_API", clients: clients[perFlow : 2*perFlow]}
	b.facade = &blobPool{name: "F facade", clients: clients[2*perFlow:]}
	fmt.Fprintf(progress, "  created %d clients (VERIFY, SANDBOX; sandbox:HEADER_ENRICHMENT and %s:NETWORK_API; origin %s) in %s\n",
		len(clients), camaraOperator, facadeOrigin, time.Since(t0).Round(time.Millisecond))

	flows := []flow{
		{"F HE verify", b.headerEnrichment},
		{"F NETWORK_API verify", b.networkAPI},
		{"F facade verify (CAMARA provider)", b.facadeVerify},
	}
	runFlows(ctx, 1, camaraWarmup, cfg.Timeout, flows...)
	rep.Sequential = runFlows(ctx, 1, n, cfg.Timeout, flows...)
	for i := range rep.Sequential {
		rep.Sequential[i].Name += ", sequential"
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	printFlows(progress, rep.Sequential)
	rep.Added = append(rep.Added, addedLatency("NETWORK_API over HE, sequential", rep.Sequential[0], rep.Sequential[1]))
	if workers > 0 {
		for _, f := range flows {
			runFlows(ctx, workers, camaraWarmup, cfg.Timeout, f)
			r := runFlows(ctx, workers, n, cfg.Timeout, f)[0]
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			r.Name += fmt.Sprintf(", %d concurrent", workers)
			printFlows(progress, []FlowResult{r})
			rep.Concurrent = append(rep.Concurrent, r)
		}
		rep.Added = append(rep.Added, addedLatency(fmt.Sprintf("NETWORK_API over HE, %d concurrent", workers), rep.Concurrent[0], rep.Concurrent[1]))
	}
	for _, a := range rep.Added {
		fmt.Fprintf(progress, "  added latency of %s: verify p50 %s p99 %s, flow p50 %s p99 %s\n",
			a.Name, signedMS(a.VerifyP50), signedMS(a.VerifyP99), signedMS(a.FlowP50), signedMS(a.FlowP99))
	}

	// Every VERIFIED answer, warm-ups included, is one charge; a failed verify may have
	// committed one, which the check then shows.
	cl := accountsv1.NewAccountsInternalServiceClient(internal)
	for _, p := range []*blobPool{b.he, b.network, b.facade} {
		c, err := chargeCheck(ctx, cl, p)
		if err != nil {
			return rep, err
		}
		rep.Checks = append(rep.Checks, c)
	}
	sent, calls := b.networkVerifies.Load(), int64(op.Fake.APICalls())
	rep.Checks = append(rep.Checks, Check{
		Name: "F operator /verify calls", OK: sent == calls && sent > 0,
		Text: fmt.Sprintf("the fake operator answered %d Number Verification calls for %d NETWORK_API verifies", calls, sent),
	})
	return rep, nil
}

func printFlows(progress io.Writer, rs []FlowResult) {
	for _, r := range rs {
		fmt.Fprintf(progress, "  %-50s verify p50 %s p99 %s  flow p50 %s p99 %s  ok %d errors %d\n", r.Name,
			ms(percentile(r.Verify, 50)), ms(percentile(r.Verify, 99)), ms(percentile(r.Flow, 50)), ms(percentile(r.Flow, 99)), r.OK(), r.Errors)
		if r.FirstErr != nil {
			fmt.Fprintf(progress, "    e.g. %v\n", r.FirstErr)
		}
	}
}

// headerEnrichment is the HE flow: the app's session with the number header the sandbox
// operator's proxy adds, then the backend's verify.
func (b *camaraBench) headerEnrichment(ctx context.Context, i int) (time.Duration, error) {
	c, number := b.he.clients[i%len(b.he.clients)], b.number()
	sess, err := openSession(ctx, b.hc, b.url, c, "", "X-Mnv-Sandbox-Msisdn", number)
	if err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	if sess.Status != "CAPTURED" || sess.Sealed == "" {
		return 0, fmt.Errorf("session not captured: %+v", sess)
	}
	t0 := time.Now()
	err = postVerify(ctx, b.hc, b.url, c, number, sess.Sealed, "sandbox", "HEADER_ENRICHMENT")
	return time.Since(t0), err
}

// networkAPI is the NETWORK_API flow: the app's session names the operator and gets its
// authorization URL; the device follows it over "mobile data" (the fake reads the line from the
// sandbox header) and the fake's redirect to mnv's callback, which exchanges the code and
// answers the sealed session; then the backend's verify, which calls the operator's /verify.
func (b *camaraBench) networkAPI(ctx context.Context, i int) (time.Duration, error) {
	c, number := b.network.clients[i%len(b.network.clients)], b.number()
	sess, err := openSession(ctx, b.hc, b.url, c, camaraOperator)
	if err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	if sess.Status != "AUTHORIZATION_PENDING" || sess.AuthorizationURL == "" {
		return 0, fmt.Errorf("session is no pending authorization: %+v", sess)
	}
	back, err := followRedirects(ctx, b.device, sess.AuthorizationURL, b.url+callbackPath, "X-Mnv-Sandbox-Msisdn", number)
	if err != nil {
		return 0, fmt.Errorf("authorization: %w", err)
	}
	raw, err := restCall(ctx, b.hc, http.MethodGet, back.String(), "")
	if err != nil {
		return 0, fmt.Errorf("callback: %w", err)
	}
	var done sessionAnswer
	if err := decodeData(raw, &done); err != nil || done.Status != "CAPTURED" || done.Sealed == "" {
		return 0, fmt.Errorf("callback answered %.200s", raw)
	}
	b.networkVerifies.Add(1)
	t0 := time.Now()
	err = postVerify(ctx, b.hc, b.url, c, number, done.Sealed, camaraOperator, "NETWORK_API")
	return time.Since(t0), err
}

// facadeVerify is the CAMARA provider flow: the device's authorization at the gateway (the line
// by header enrichment), the client's code exchange with its secret, then the CAMARA verify.
func (b *camaraBench) facadeVerify(ctx context.Context, i int) (time.Duration, error) {
	c, number := b.facade.clients[i%len(b.facade.clients)], b.number()
	state := fmt.Sprintf("bench-%d", i)
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {facadeRedirect},
		"scope": {facadeScope}, "state": {state}, "prompt": {"none"},
	}
	back, err := followRedirects(ctx, b.device, b.url+"/oauth2/authorize?"+q.Encode(), facadeRedirect, "X-Mnv-Sandbox-Msisdn", number)
	if err != nil {
		return 0, fmt.Errorf("authorization: %w", err)
	}
	code := back.Query().Get("code")
	if back.Query().Get("state") != state || code == "" {
		return 0, fmt.Errorf("authorization came back without a code or with another state: %s", back.Query().Encode())
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {facadeRedirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	raw, err := doJSON(b.hc, req, http.StatusOK)
	if err != nil {
		return 0, fmt.Errorf("token: %w", err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
		return 0, errors.New("token: the answer holds no access_token")
	}
	t0 := time.Now()
	raw, err = restCall(ctx, b.hc, http.MethodPost, b.url+"/number-verification/v2/verify", fmt.Sprintf(`{"phoneNumber":%q}`, number),
		"Authorization", "Bearer "+tok.AccessToken, "x-correlator", state)
	d := time.Since(t0)
	if err != nil {
		c.failed.Add(1)
		return d, err
	}
	var out struct {
		Verified *bool `json:"devicePhoneNumberVerified"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Verified == nil || !*out.Verified {
		c.failed.Add(1)
		return d, fmt.Errorf("CAMARA verify answered %.200s", raw)
	}
	c.verified.Add(1)
	return d, nil
}

// followRedirects is the device opening start and following the 302s it gets, with the header
// pairs on every request (the line's number header, as an operator's network adds it), until
// one points at until (same scheme, host and path; any query); it returns that URL without
// opening it. A relative Location is resolved against the URL that answered it. Anything but a
// 302 is an error, and so are more than maxHops redirects.
func followRedirects(ctx context.Context, device *http.Client, start, until string, header ...string) (*url.URL, error) {
	next, err := url.Parse(start)
	if err != nil {
		return nil, err
	}
	end, err := url.Parse(until)
	if err != nil {
		return nil, err
	}
	for range maxHops {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := device.Do(req)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			return nil, fmt.Errorf("%s %s: HTTP %d, want a redirect: %.200s", req.Method, next.Redacted(), resp.StatusCode, body)
		}
		loc, err := resp.Location()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", next.Redacted(), err)
		}
		if loc.Scheme == end.Scheme && loc.Host == end.Host && loc.Path == end.Path {
			return loc, nil
		}
		next = loc
	}
	return nil, fmt.Errorf("no redirect to %s within %d hops (last %s)", until, maxHops, next.Redacted())
}

// signedMS is a duration difference in milliseconds with its sign.
func signedMS(d time.Duration) string {
	return fmt.Sprintf("%+.2fms", float64(d)/float64(time.Millisecond))
}
