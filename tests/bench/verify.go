package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/tests/harness"
)

const (
	verifyManyClients = 200
	// sessionTTL is how long a sealed blob verifies: the suite runs with the default
	// MNV_SESSION_TTL. A pool never keeps a blob that could expire before its load ends.
	sessionTTL = 300 * time.Second
	ttlMargin  = 30 * time.Second
	// Pool sizing: verifies/s assumed before anything is measured (about what this 2-core machine
	// reached in 2026-11; a guess too low runs the first round dry), and the headroom over a
	// guessed rate, over this variant's last round and over another variant's last round.
	guessRate      = 2500
	guessFactor    = 1.3
	measuredFactor = 1.5
	borrowedFactor = 2.0
	// pacedInFlight bounds the open loop's outstanding requests, in multiples of -c.
	pacedInFlight = 4
	pacedFactor   = 1.2
	// maxNumbers is how many distinct valid numbers "+97150" and 7 digits give.
	maxNumbers = 9_999_999
)

// VerifyReport is benchmark C.
type VerifyReport struct {
	Many, One Measured
	// Open are the open loops on the many-client pool, one per share of Many's throughput
	// asked for, in that order.
	Open   []OpenLoop
	Checks []Check
}

// OpenLoop is an open loop on the many-client pool at Share of its closed-loop peak (Rate).
type OpenLoop struct {
	Share, Rate float64
	Measured
}

// goalShare is the share of peak where the p99 goal holds; the other shares draw the curve.
const goalShare = 0.5

// shareName names a share of peak: "1/2 peak" for a unit fraction, "0.3 of peak" otherwise.
func shareName(share float64) string {
	if n := math.Round(1 / share); n > 1 && math.Abs(1/n-share) < 1e-9 {
		return fmt.Sprintf("1/%d peak", int(n))
	}
	return fmt.Sprintf("%g of peak", share)
}

// sharesLine lists shares by name, for the report's header.
func sharesLine(shares []float64) string {
	names := make([]string, len(shares))
	for i, sh := range shares {
		names[i] = shareName(sh)
	}
	return strings.Join(names, ", ")
}

// parseShares reads -open-loop: shares of peak, comma-separated, each above 0 and at most 1.
func parseShares(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var shares []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("-open-loop: %q is not a share of peak (above 0, at most 1)", f)
		}
		shares = append(shares, v)
	}
	return shares, nil
}

// openLoop runs the open loop at share of peak (the many-client req/s): a warm-up, then one
// measured run, with the blobs for both opened first.
func (b *verifyBench) openLoop(ctx context.Context, cfg Config, many *blobPool, share, peak float64) (OpenLoop, error) {
	o := OpenLoop{Share: share, Rate: share * peak}
	o.Name = "C verify many, open loop at " + shareName(share)
	inFlight := pacedInFlight * cfg.Workers
	fmt.Fprintf(b.progress, "  open loop at %.1f req/s (%s of %.1f) for %s after a warm-up of %s, at most %d in flight\n",
		o.Rate, shareName(share), peak, cfg.Duration, cfg.Warmup, inFlight)
	span := cfg.Warmup + cfg.Duration
	need := inFlight + int(math.Ceil(o.Rate*span.Seconds()*pacedFactor))
	if err := b.fill(ctx, many, need, span); err != nil {
		return o, err
	}
	if cfg.Warmup > 0 {
		Paced(ctx, o.Rate, cfg.Warmup, inFlight, cfg.Timeout, b.verifyOp(many))
	}
	wait := func() {}
	if cfg.Profile != nil {
		wait = cfg.Profile(ctx, o.Name, cfg.Duration)
	}
	r := Paced(ctx, o.Rate, cfg.Duration, inFlight, cfg.Timeout, b.verifyOp(many))
	wait()
	if err := ctx.Err(); err != nil {
		return o, err
	}
	o.Rounds = []Result{r}
	dry := ""
	if r.Exhausted {
		dry = "  POOL RAN DRY"
	}
	fmt.Fprintf(b.progress, "  open loop  %-34s %9.1f req/s  p50 %s  p99 %s  errors %d%s\n", "(latency from the scheduled send)",
		r.Throughput(), ms(percentile(r.Latencies, 50)), ms(percentile(r.Latencies, 99)), r.Errors, dry)
	return o, nil
}

// verifyClient is a client with the VERIFY and SANDBOX features, its SDK token, and what its
// verifies were answered.
type verifyClient struct {
	harness.Client
	token            string
	verified, failed atomic.Int64
}

// blob is an SDK session's sealed number, waiting to be verified once.
type blob struct {
	client  *verifyClient
	number  string
	sealed  string
	created time.Time // before the session was asked for, so never later than the server's
}

// blobPool holds the sealed blobs of a set of clients, used once each in order. The load takes
// from it concurrently; fill runs only between loads.
type blobPool struct {
	name    string
	clients []*verifyClient
	blobs   []blob
	next    atomic.Int64
}

// take hands out the next unused blob, or ErrExhausted.
func (p *blobPool) take() (blob, error) {
	i := int(p.next.Add(1) - 1)
	if i >= len(p.blobs) {
		return blob{}, ErrExhausted
	}
	return p.blobs[i], nil
}

// verifyBench creates the sessions and sends the verifies of benchmark C.
type verifyBench struct {
	hc       *http.Client
	url      string
	workers  int
	timeout  time.Duration
	progress io.Writer
	numbers  atomic.Int64 // numbers handed out so far, over the whole run: each is used once
}

// benchVerify is benchmark C: POST /v1/api/verify, each consuming one sealed blob of an SDK
// session opened before the round, with the sessions spread over many clients against all on
// one client; then an open loop on the many-client pool at each of shares of its peak, for the
// latency. Afterwards every client must have been charged exactly once per VERIFIED answer.
func benchVerify(ctx context.Context, s *harness.Suite, cfg Config, shares []float64, progress io.Writer) (VerifyReport, error) {
	var rep VerifyReport
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
	hc, closeHTTP := newHTTPClient(pacedInFlight * cfg.Workers)
	defer closeHTTP()
	b := &verifyBench{hc: hc, url: s.GatewayURL, workers: cfg.Workers, timeout: cfg.Timeout, progress: progress}

	t0 := time.Now()
	clients, err := b.createClients(ctx, accountsv1.NewAccountsAdminServiceClient(admin), verifyManyClients+1)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "  created %d clients (VERIFY, SANDBOX) with balance %d and SDK tokens in %s\n",
		len(clients), initialBalance, time.Since(t0).Round(time.Millisecond))
	many := &blobPool{name: "many", clients: clients[1:]}
	one := &blobPool{name: "one", clients: clients[:1]} // not among the many

	measured, err := Compare(ctx, cfg, progress,
		Variant{Name: fmt.Sprintf("C verify many (%d clients)", len(many.clients)), Op: b.verifyOp(many), Prepare: b.prepare(many, 0)},
		Variant{Name: "C verify one (1 client)", Op: b.verifyOp(one), Prepare: b.prepare(one, 1)},
	)
	if err != nil {
		return rep, err
	}
	rep.Many, rep.One = measured[0], measured[1]

	if peak := rep.Many.Throughput(); peak > 0 {
		for _, share := range shares {
			o, err := b.openLoop(ctx, cfg, many, share, peak)
			if err != nil {
				return rep, err
			}
			rep.Open = append(rep.Open, o)
		}
	}

	// Every VERIFIED answer, first calls, warm-ups and the open loop included, is one charge.
	cl := accountsv1.NewAccountsInternalServiceClient(internal)
	for _, p := range []*blobPool{many, one} {
		c, err := chargeCheck(ctx, cl, p)
		if err != nil {
			return rep, err
		}
		rep.Checks = append(rep.Checks, c)
	}
	return rep, nil
}

// createClients creates n clients that may verify against the sandbox operator, with an API
// key each, and mints each an SDK token over REST, as a client's backend would.
func (b *verifyBench) createClients(ctx context.Context, admin accountsv1.AccountsAdminServiceClient, n int) ([]*verifyClient, error) {
	created, err := createClients(ctx, admin, n, true, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	if err != nil {
		return nil, err
	}
	clients := make([]*verifyClient, n)
	err = parallel(ctx, n, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		raw, err := restCall(ctx, b.hc, http.MethodPost, b.url+"/v1/api/me/sdk-tokens", `{"label":"bench"}`,
			"X-API-KEY", created[i].APIKey)
		if err != nil {
			return fmt.Errorf("SDK token of client %d: %w", i, err)
		}
		var out struct {
			Data struct {
				SDKToken string `json:"sdkToken"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || out.Data.SDKToken == "" {
			return fmt.Errorf("SDK token of client %d: no token in %.200s", i, raw)
		}
		clients[i] = &verifyClient{Client: created[i], token: out.Data.SDKToken}
		return nil
	})
	return clients, err
}

// prepare sizes p for a load of span before it runs: the measured rate of this variant's last
// round (self is its index in Compare), else the latest of another variant, else a guess, times
// a headroom that is larger the less the rate is known; plus one blob per worker for the first
// call and the requests in flight at the deadline.
func (b *verifyBench) prepare(p *blobPool, self int) func(context.Context, time.Duration, []Measured) error {
	return func(ctx context.Context, span time.Duration, done []Measured) error {
		need := b.workers
		if span > 0 {
			rate, factor := float64(guessRate), guessFactor
			if rs := done[self].Rounds; len(rs) > 0 {
				rate, factor = rs[len(rs)-1].Throughput(), measuredFactor
			} else {
				var other float64
				for i, m := range done {
					if n := len(m.Rounds); i != self && n > 0 {
						other = max(other, m.Rounds[n-1].Throughput())
					}
				}
				if other > 0 {
					rate, factor = other, borrowedFactor
				}
			}
			need += int(math.Ceil(rate * span.Seconds() * factor))
		}
		return b.fill(ctx, p, need, span)
	}
}

// fill tops p up to need unused blobs that stay valid for a load of span starting now: it
// drops the used ones and those too old, and opens new SDK sessions on -c workers, the numbers
// new and the clients taken in turn, so consecutive blobs belong to different clients.
func (b *verifyBench) fill(ctx context.Context, p *blobPool, need int, span time.Duration) error {
	oldest := time.Now().Add(span + ttlMargin - sessionTTL)
	kept := p.blobs[min(int(p.next.Load()), len(p.blobs)):]
	for len(kept) > 0 && kept[0].created.Before(oldest) {
		kept = kept[1:]
	}
	p.blobs = append([]blob(nil), kept...)
	p.next.Store(0)
	n := need - len(p.blobs)
	if n <= 0 {
		fmt.Fprintf(b.progress, "  %s pool: %d kept, %d needed, no sessions opened\n", p.name, len(p.blobs), need)
		return nil
	}
	if b.numbers.Load()+int64(n) > maxNumbers {
		return fmt.Errorf("more than %d distinct numbers needed", maxNumbers)
	}
	fresh := make([]blob, n)
	t0 := time.Now()
	err := parallelN(ctx, b.workers, n, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		c := p.clients[i%len(p.clients)]
		bl := blob{client: c, number: fmt.Sprintf("+97150%07d", b.numbers.Add(1)), created: time.Now()}
		sess, err := openSession(ctx, b.hc, b.url, c, "", "X-Mnv-Sandbox-Msisdn", bl.number)
		if err != nil {
			return fmt.Errorf("session for %s: %w", bl.number, err)
		}
		if sess.Status != "CAPTURED" || sess.Sealed == "" {
			return fmt.Errorf("session for %s not captured: %+v", bl.number, sess)
		}
		bl.sealed = sess.Sealed
		fresh[i] = bl
		return nil
	})
	if err != nil {
		return err
	}
	p.blobs = append(p.blobs, fresh...)
	d := time.Since(t0)
	fmt.Fprintf(b.progress, "  %s pool: %d kept, %d sessions opened in %s (%.0f/s, not measured), %d ready\n",
		p.name, len(kept), n, d.Round(time.Millisecond), float64(n)/d.Seconds(), len(p.blobs))
	return nil
}

// verifyOp verifies the next blob of p with its client's API key; only a 200 whose verification
// is VERIFIED is a success.
func (b *verifyBench) verifyOp(p *blobPool) Op {
	return func(ctx context.Context) error {
		bl, err := p.take()
		if err != nil {
			return err
		}
		return postVerify(ctx, b.hc, b.url, bl.client, bl.number, bl.sealed, "sandbox", "HEADER_ENRICHMENT")
	}
}

// sessionAnswer is what POST /v1/api/sdk/session (and the NETWORK_API callback) answers.
type sessionAnswer struct {
	Status           string `json:"status"`
	Sealed           string `json:"encryptedMobileNumber"`
	AuthorizationURL string `json:"authorizationUrl"`
}

// openSession opens an SDK session for c as its app would, with its SDK token, naming the
// operator unless operatorID is empty, and with the header pairs given (the sandbox's number
// header, as the operator's proxy adds it).
func openSession(ctx context.Context, hc *http.Client, gatewayURL string, c *verifyClient, operatorID string, header ...string) (sessionAnswer, error) {
	body := `{"platform":"ANDROID","appVersion":"bench"}`
	if operatorID != "" {
		body = fmt.Sprintf(`{"platform":"ANDROID","appVersion":"bench","operatorId":%q}`, operatorID)
	}
	raw, err := restCall(ctx, hc, http.MethodPost, gatewayURL+"/v1/api/sdk/session", body,
		append([]string{"X-SDK-TOKEN", c.token, "X-CLIENT-ID", c.ID}, header...)...)
	if err != nil {
		return sessionAnswer{}, err
	}
	var out struct {
		Data sessionAnswer `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return sessionAnswer{}, fmt.Errorf("session answered %.200s: %w", raw, err)
	}
	return out.Data, nil
}

// postVerify verifies number against a sealed blob with c's API key, counting the answer on c:
// only a 200 whose verification is VERIFIED is a success.
func postVerify(ctx context.Context, hc *http.Client, gatewayURL string, c *verifyClient, number, sealed, operatorID, serviceType string) error {
	body := fmt.Sprintf(`{"mobileNumber":%q,"encryptedMobileNumber":%q,"operatorId":%q,"serviceType":%q}`,
		number, sealed, operatorID, serviceType)
	raw, err := restCall(ctx, hc, http.MethodPost, gatewayURL+"/v1/api/verify", body, "X-API-KEY", c.APIKey, "X-CLIENT-ID", c.ID)
	if err != nil {
		c.failed.Add(1)
		return err
	}
	// One decode, not decodeData's two: this is benchmark C's measured path.
	var out struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Data.Status != "VERIFIED" {
		c.failed.Add(1)
		return fmt.Errorf("verify of %s answered %.200s", number, raw)
	}
	c.verified.Add(1)
	return nil
}

// chargeCheck compares what each client of p was charged with its VERIFIED answers.
func chargeCheck(ctx context.Context, cl accountsv1.AccountsInternalServiceClient, p *blobPool) (Check, error) {
	charged := make([]int64, len(p.clients))
	err := parallel(ctx, len(p.clients), func(ctx context.Context, i int) error {
		resp, err := cl.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: p.clients[i].ID})
		if err != nil {
			return fmt.Errorf("balance of %s: %w", p.clients[i].ID, err)
		}
		charged[i] = initialBalance - resp.GetBalance()
		return nil
	})
	if err != nil {
		return Check{}, err
	}
	var total, verified, failed int64
	var off []string
	for i, c := range p.clients {
		v := c.verified.Load()
		total, verified, failed = total+charged[i], verified+v, failed+c.failed.Load()
		if charged[i] != v {
			off = append(off, fmt.Sprintf("%s charged %d for %d", c.ID, charged[i], v))
		}
	}
	name := fmt.Sprintf("charges of %d %s client(s)", len(p.clients), p.name)
	if len(off) == 0 {
		return Check{Name: name, OK: true, Text: fmt.Sprintf("%d charged = %d VERIFIED answers, client by client", total, verified)}, nil
	}
	return Check{Name: name, Text: fmt.Sprintf("%d clients' charges differ from their VERIFIED answers, e.g. %s (%d charged in all for %d; %d verifies failed and may have committed)",
		len(off), off[0], total, verified, failed)}, nil
}
