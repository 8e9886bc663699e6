package operatorapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// This file is mnv calling an operator's CAMARA SIM Swap API (and Device Swap API where the
// operator offers it) from its backend, with the token flow CAMARA's identity and consent
// guidelines give such calls: CIBA (a backchannel authentication request naming the line and the
// purpose, then the token endpoint polled with the CIBA grant), or, where the operator's
// onboarding agreed on it, the two-legged client credentials grant. Nothing here decides what a
// swap means for a verification: the answer is swapped, not swapped or unknown, with why, and
// the workflow's policy decides (docs/architecture.md, "SIM swap client").

// SwapKind names which of the two APIs is asked.
type SwapKind int

// The swap APIs.
const (
	SIMSwap SwapKind = iota
	DeviceSwap
)

func (k SwapKind) String() string {
	if k == DeviceSwap {
		return "device-swap"
	}
	return "sim-swap"
}

// Outcome is what a swap check found.
type Outcome int

// The outcomes of a swap check. Unknown is the zero value: an answer that says nothing is not a
// clean line.
const (
	// SwapUnknown: no answer to rely on (the operator unavailable or refusing, the number not
	// served, consent refused); Reason says which.
	SwapUnknown Outcome = iota
	// NotSwapped: no change within the period asked.
	NotSwapped
	// Swapped: a change within the period asked.
	Swapped
)

func (o Outcome) String() string {
	switch o {
	case NotSwapped:
		return "NOT_SWAPPED"
	case Swapped:
		return "SWAPPED"
	}
	return "UNKNOWN"
}

// The reasons of an unknown outcome: stable words for the policy, an event or a metric label.
const (
	// ReasonUnavailable: no answer (network error, timeout, 5xx, 429, an answer not the API's,
	// the backchannel flow not finished in time).
	ReasonUnavailable = "UNAVAILABLE"
	// ReasonNotServed: the operator does not serve the number (404 IDENTIFIER_NOT_FOUND, or
	// unknown_user_id at the backchannel authentication).
	ReasonNotServed = "NOT_SERVED"
	// ReasonNotOffered: no operator of the registry offers the API for the number.
	ReasonNotOffered = "NOT_OFFERED"
	// ReasonConsent: the backchannel authentication was refused (access_denied) or expired.
	ReasonConsent = "CONSENT_REFUSED"
	// ReasonClientRefused: the operator refused mnv's client (invalid_client, 401, 403): a
	// configuration fault, worth an operator's look.
	ReasonClientRefused = "CLIENT_REFUSED"
	// ReasonRefused: any other refusal (400 OUT_OF_RANGE, 422 SERVICE_NOT_APPLICABLE…); the
	// answer's CAMARA code is in SwapAnswer.Code.
	ReasonRefused = "REFUSED"
)

// SwapAnswer is a swap check's answer.
type SwapAnswer struct {
	Outcome Outcome
	// Reason says why an outcome is unknown ("" otherwise).
	Reason string
	// Code is the operator's CAMARA or OAuth error code, when it sent one.
	Code string
	// OperatorID is the operator that answered (or the last one asked).
	OperatorID string
	// Err is the underlying error of an unknown outcome, for the log; it holds no number.
	Err error
}

func unknown(reason, code string, err error) SwapAnswer {
	return SwapAnswer{Outcome: SwapUnknown, Reason: reason, Code: code, Err: err}
}

// ChangeDate is a retrieve-date answer.
type ChangeDate struct {
	// Known: the operator answered. Outcome is then Swapped with At, or NotSwapped when it
	// answered null (no change it can tell of, within MonitoredDays when it said); otherwise
	// SwapUnknown with Reason, Code and Err as in a check.
	Known bool
	// At is the latest change; zero when the operator answered null.
	At time.Time
	// MonitoredDays is the period the operator watches, when it said (with a null date: no
	// change within it).
	MonitoredDays int
	SwapAnswer
}

// SwapOptions tune a SwapClient.
type SwapOptions struct {
	// PollUnit is what one second of the operator's CIBA polling interval is waited for:
	// time.Second (default); tests shrink it so a pending flow takes milliseconds.
	PollUnit time.Duration
	// MaxWait bounds the whole backchannel flow (authentication request and polls), besides the
	// caller's context; default 30 s.
	MaxWait time.Duration
}

// SwapClient calls one operator's swap APIs.
type SwapClient struct {
	op   operators.Operator
	cfg  operators.Swap
	http *http.Client
	reg  registration
	opts SwapOptions

	mu        sync.Mutex
	endpoints *swapEndpoints
	cc        *ccToken // the two-legged token, reused until shortly before it expires
}

type swapEndpoints struct{ token, backchannel string }

type ccToken struct {
	value   string
	expires time.Time
}

// NewSwap returns the swap client of op, which must have swap settings. The HTTP client's
// timeout bounds each request to the operator.
func NewSwap(op operators.Operator, hc *http.Client, o SwapOptions) (*SwapClient, error) {
	if op.Swap == nil {
		return nil, fmt.Errorf("operatorapi: operator %q has no swap settings", op.ID)
	}
	if o.PollUnit <= 0 {
		o.PollUnit = time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	reg, err := newRegistration(op.ID, "swap.", op.Swap.Registration)
	if err != nil {
		return nil, err
	}
	c := &SwapClient{op: op, cfg: *op.Swap, http: hc, reg: reg, opts: o}
	if c.cfg.DiscoveryURL == "" {
		c.endpoints = &swapEndpoints{token: c.cfg.TokenEndpoint, backchannel: c.cfg.BackchannelEndpoint}
	}
	return c, nil
}

// Offers reports whether the operator offers kind.
func (c *SwapClient) Offers(kind SwapKind) bool { return c.version(kind) != "" }

func (c *SwapClient) version(kind SwapKind) string {
	if kind == DeviceSwap {
		return c.cfg.DeviceSwapVersion
	}
	return c.cfg.SIMSwapVersion
}

// Check asks whether the line e164's SIM (or device) changed within maxAge, which the API takes
// in whole hours from 1 to 2400: a shorter maxAge is asked as 1 hour, a longer one refused
// locally (unknown, REFUSED, OUT_OF_RANGE) rather than answered for a shorter period.
func (c *SwapClient) Check(ctx context.Context, kind SwapKind, e164 string, maxAge time.Duration, correlator string) SwapAnswer {
	hours := int(math.Ceil(maxAge.Hours()))
	if hours < 1 {
		hours = 1
	}
	if hours > 2400 {
		return c.tag(unknown(ReasonRefused, "OUT_OF_RANGE", errors.New("operatorapi: maxAge above the API's 2400 hours")))
	}
	raw, a := c.call(ctx, kind, "check", e164, map[string]any{"maxAge": hours}, correlator)
	if a.Reason != "" {
		return c.tag(a)
	}
	var ok struct {
		Swapped *bool `json:"swapped"`
	}
	if json.Unmarshal(raw, &ok) != nil || ok.Swapped == nil {
		return c.tag(unknown(ReasonUnavailable, "", fmt.Errorf("%w: a 200 without swapped", ErrUnavailable)))
	}
	if *ok.Swapped {
		return c.tag(SwapAnswer{Outcome: Swapped})
	}
	return c.tag(SwapAnswer{Outcome: NotSwapped})
}

// RetrieveDate asks for the line e164's latest SIM (or device) change.
func (c *SwapClient) RetrieveDate(ctx context.Context, kind SwapKind, e164, correlator string) ChangeDate {
	raw, a := c.call(ctx, kind, "retrieve-date", e164, map[string]any{}, correlator)
	if a.Reason != "" {
		return ChangeDate{SwapAnswer: c.tag(a)}
	}
	field := "latestSimChange"
	if kind == DeviceSwap {
		field = "latestDeviceChange"
	}
	var body map[string]json.RawMessage
	at, present := json.RawMessage(nil), false
	if json.Unmarshal(raw, &body) == nil {
		at, present = body[field]
	}
	if !present {
		return ChangeDate{SwapAnswer: c.tag(unknown(ReasonUnavailable, "", fmt.Errorf("%w: a 200 without %s", ErrUnavailable, field)))}
	}
	d := ChangeDate{Known: true, SwapAnswer: c.tag(SwapAnswer{Outcome: NotSwapped})}
	if mp, ok := body["monitoredPeriod"]; ok {
		_ = json.Unmarshal(mp, &d.MonitoredDays)
	}
	if string(at) == "null" {
		return d
	}
	var s string
	if json.Unmarshal(at, &s) != nil {
		return ChangeDate{SwapAnswer: c.tag(unknown(ReasonUnavailable, "", fmt.Errorf("%w: %s is not a date", ErrUnavailable, field)))}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return ChangeDate{SwapAnswer: c.tag(unknown(ReasonUnavailable, "", fmt.Errorf("%w: %s is not RFC 3339", ErrUnavailable, field)))}
	}
	d.At, d.Outcome = t, Swapped
	return d
}

func (c *SwapClient) tag(a SwapAnswer) SwapAnswer {
	a.OperatorID = c.op.ID
	return a
}

// scope is the operation's scope.
func scope(kind SwapKind, op string) string { return kind.String() + ":" + op }

// call gets a token for the operation and calls it. The answer's Reason is "" when raw is a 200's
// body.
func (c *SwapClient) call(ctx context.Context, kind SwapKind, op, e164 string, body map[string]any, correlator string) ([]byte, SwapAnswer) {
	v := c.version(kind)
	if v == "" {
		return nil, unknown(ReasonNotOffered, "", fmt.Errorf("operatorapi: operator %q does not offer %s", c.op.ID, kind))
	}
	tok, a := c.token(ctx, scope(kind, op), e164)
	if a.Reason != "" {
		return nil, a
	}
	if c.cfg.Grant == operators.GrantClientCredentials {
		// A two-legged token names no line: the number goes in the body. A three-legged one
		// does, and the API refuses a number beside it.
		body["phoneNumber"] = e164
	}
	b, _ := json.Marshal(body)
	ans, err := callAPI(ctx, c.http, http.MethodPost, c.cfg.APIRoot+"/"+kind.String()+"/"+v+"/"+op, tok, b, correlator)
	if err != nil {
		return nil, unknown(ReasonUnavailable, ans.code, fmt.Errorf("operatorapi: %s %s: %w", kind, op, err))
	}
	if ans.status == http.StatusOK {
		return ans.raw, SwapAnswer{}
	}
	err = fmt.Errorf("operatorapi: %s %s: status %d %s", kind, op, ans.status, ans.code)
	switch ans.status {
	case http.StatusNotFound:
		return nil, unknown(ReasonNotServed, ans.code, err)
	case http.StatusUnauthorized, http.StatusForbidden:
		if ans.status == http.StatusUnauthorized {
			c.dropToken() // an expired or revoked two-legged token is asked for again next time
		}
		return nil, unknown(ReasonClientRefused, ans.code, err)
	}
	return nil, unknown(ReasonRefused, ans.code, err)
}

// discover finds the token and backchannel endpoints on first use (an operator down at start-up
// must not stop mnv) and keeps them once found.
func (c *SwapClient) discover(ctx context.Context) (swapEndpoints, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpoints != nil {
		return *c.endpoints, nil
	}
	p, err := discover(ctx, c.http, c.cfg.DiscoveryURL)
	if err != nil {
		return swapEndpoints{}, err
	}
	var extra struct {
		Backchannel string `json:"backchannel_authentication_endpoint"`
	}
	_ = p.Claims(&extra)
	e := swapEndpoints{token: p.Endpoint().TokenURL, backchannel: extra.Backchannel}
	if c.cfg.Grant == operators.GrantCIBA && e.backchannel == "" {
		return swapEndpoints{}, fmt.Errorf("%w: discovery names no backchannel_authentication_endpoint", ErrUnavailable)
	}
	c.endpoints = &e
	return e, nil
}

// token returns an access token for scope: the CIBA flow for the line (a token per call: it
// names the line), or the operator's two-legged token, reused while it lives.
func (c *SwapClient) token(ctx context.Context, scope, e164 string) (string, SwapAnswer) {
	e, err := c.discover(ctx)
	if err != nil {
		return "", unknown(ReasonUnavailable, "", err)
	}
	if c.cfg.Grant == operators.GrantClientCredentials {
		return c.clientCredentials(ctx, e)
	}
	return c.ciba(ctx, e, scope, e164)
}

func (c *SwapClient) dropToken() {
	c.mu.Lock()
	c.cc = nil
	c.mu.Unlock()
}

// clientCredentials gets (or reuses) the two-legged token. It asks for every scope of the APIs
// the operator offers, so one token serves all of them.
func (c *SwapClient) clientCredentials(ctx context.Context, e swapEndpoints) (string, SwapAnswer) {
	c.mu.Lock()
	if c.cc != nil && time.Now().Before(c.cc.expires) {
		t := c.cc.value
		c.mu.Unlock()
		return t, SwapAnswer{}
	}
	c.mu.Unlock()
	var scopes []string
	for _, k := range []SwapKind{SIMSwap, DeviceSwap} {
		if c.Offers(k) {
			scopes = append(scopes, scope(k, "check"), scope(k, "retrieve-date"))
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	t, a := c.tokenRequest(ctx, e.token, form)
	if a.Reason != "" {
		return "", a
	}
	c.mu.Lock()
	// A minute's margin (or half a short life): a token must not expire on its way.
	life := time.Duration(t.ExpiresIn) * time.Second
	c.cc = &ccToken{value: t.AccessToken, expires: time.Now().Add(life - min(time.Minute, life/2))}
	c.mu.Unlock()
	return t.AccessToken, SwapAnswer{}
}

// CIBA's grant type at the token endpoint.
const grantCIBA = "urn:openid:params:grant-type:ciba"

// ciba runs one backchannel flow: the authentication request (login_hint tel:+…, scope openid,
// the purpose and the operation's scope), then the token endpoint polled every interval
// (5 s when the operator names none), slow_down adding 5 s as CIBA says, until tokens, a
// refusal, the request's expiry, MaxWait or ctx.
func (c *SwapClient) ciba(ctx context.Context, e swapEndpoints, scope, e164 string) (string, SwapAnswer) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.MaxWait)
	defer cancel()
	form := url.Values{
		"scope":      {"openid " + c.cfg.Purpose + " " + scope},
		"login_hint": {"tel:" + e164},
	}
	var auth struct {
		ID        string `json:"auth_req_id"`
		ExpiresIn int    `json:"expires_in"`
		Interval  *int   `json:"interval"`
	}
	raw, a := c.post(ctx, e.backchannel, form)
	if a.Reason != "" {
		return "", a
	}
	if json.Unmarshal(raw, &auth) != nil || auth.ID == "" {
		return "", unknown(ReasonUnavailable, "", fmt.Errorf("%w: bc-authorize: an answer without auth_req_id", ErrUnavailable))
	}
	interval := 5
	if auth.Interval != nil && *auth.Interval >= 0 {
		interval = *auth.Interval
	}
	if auth.ExpiresIn > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, time.Duration(auth.ExpiresIn)*c.opts.PollUnit)
		defer stop()
	}
	poll := url.Values{"grant_type": {grantCIBA}, "auth_req_id": {auth.ID}}
	for {
		select {
		case <-ctx.Done():
			return "", unknown(ReasonUnavailable, "", fmt.Errorf("%w: the backchannel authentication did not finish in time", ErrUnavailable))
		case <-time.After(time.Duration(interval) * c.opts.PollUnit):
		}
		t, a := c.tokenRequest(ctx, e.token, poll)
		switch {
		case a.Reason == "":
			return t.AccessToken, SwapAnswer{}
		case a.Code == "authorization_pending":
			continue
		case a.Code == "slow_down":
			interval += 5
			continue
		case a.Code == "access_denied" || a.Code == "expired_token":
			return "", unknown(ReasonConsent, a.Code, a.Err)
		}
		return "", a
	}
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
}

func (c *SwapClient) tokenRequest(ctx context.Context, endpoint string, form url.Values) (tokenAnswer, SwapAnswer) {
	raw, a := c.post(ctx, endpoint, form)
	if a.Reason != "" {
		return tokenAnswer{}, a
	}
	var t tokenAnswer
	if json.Unmarshal(raw, &t) != nil || t.AccessToken == "" {
		return tokenAnswer{}, unknown(ReasonUnavailable, "", fmt.Errorf("%w: token: an answer without access_token", ErrUnavailable))
	}
	return t, SwapAnswer{}
}

// post sends an OAuth form request to endpoint with mnv's client authentication (the secret in
// the Basic header, or a private_key_jwt assertion whose audience is endpoint). An OAuth error
// answer is unknown with its error code: invalid_client is CLIENT_REFUSED, unknown_user_id
// NOT_SERVED, the others REFUSED (ciba tells pending and slow_down by the code).
func (c *SwapClient) post(ctx context.Context, endpoint string, form url.Values) ([]byte, SwapAnswer) {
	form = cloneValues(form)
	if c.cfg.ClientAuth == operators.PrivateKeyJWT {
		params, err := c.reg.assertion(endpoint)
		if err != nil {
			return nil, unknown(ReasonClientRefused, "", err)
		}
		form.Set("client_id", c.cfg.ClientID)
		for k := range params {
			form.Set(k, params.Get(k))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, unknown(ReasonUnavailable, "", fmt.Errorf("operatorapi: %w", err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.cfg.ClientAuth == operators.ClientSecretBasic {
		// RFC 6749 2.3.1: both form-encoded before the Basic encoding.
		req.SetBasicAuth(url.QueryEscape(c.cfg.ClientID), url.QueryEscape(c.cfg.ClientSecret))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, unknown(ReasonUnavailable, "", fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, unknown(ReasonUnavailable, "", fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	if resp.StatusCode == http.StatusOK {
		return raw, SwapAnswer{}
	}
	var oe struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &oe)
	err = fmt.Errorf("operatorapi: %s: status %d %s", endpoint, resp.StatusCode, oe.Error)
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, unknown(ReasonUnavailable, oe.Error, fmt.Errorf("%w: %w", ErrUnavailable, err))
	case oe.Error == "invalid_client" || oe.Error == "unauthorized_client" || resp.StatusCode == http.StatusUnauthorized:
		return nil, unknown(ReasonClientRefused, oe.Error, err)
	case oe.Error == "unknown_user_id":
		return nil, unknown(ReasonNotServed, oe.Error, err)
	}
	return nil, unknown(ReasonRefused, oe.Error, err)
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Swaps are the swap clients of a registry, in its order.
type Swaps struct {
	clients []*SwapClient
}

// NewSwaps builds the swap client of every operator of ops with swap settings.
func NewSwaps(ops []operators.Operator, hc *http.Client, o SwapOptions) (*Swaps, error) {
	s := &Swaps{}
	for _, op := range ops {
		if op.Swap == nil {
			continue
		}
		c, err := NewSwap(op, hc, o)
		if err != nil {
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

// Len is how many operators are asked.
func (s *Swaps) Len() int { return len(s.clients) }

// candidates are the operators to ask about a number of region (ISO 3166-1 alpha-2): those of
// its country offering kind, in registry order, then sandbox operators (country ZZ, present only
// with the sandbox switched on), which serve any number. CAMARA gives no way to ask which
// operator serves a number, so each is asked until one serves it.
func (s *Swaps) candidates(kind SwapKind, region string) []*SwapClient {
	var own, sandbox []*SwapClient
	for _, c := range s.clients {
		switch {
		case !c.Offers(kind):
		case region != "" && c.op.Country == region:
			own = append(own, c)
		case c.op.Sandbox:
			sandbox = append(sandbox, c)
		}
	}
	return append(own, sandbox...)
}

// Check asks the operators of the number's country (region, from the number's parse) whether
// its SIM (or device) changed within maxAge: the first that serves the number answers; one that
// says it does not serve it passes to the next. An unknown answer carries the last operator's
// reason (NOT_OFFERED when none offers the API for the region).
func (s *Swaps) Check(ctx context.Context, kind SwapKind, e164, region string, maxAge time.Duration, correlator string) SwapAnswer {
	a := unknown(ReasonNotOffered, "", fmt.Errorf("operatorapi: no operator offers %s for the region", kind))
	for _, c := range s.candidates(kind, region) {
		a = c.Check(ctx, kind, e164, maxAge, correlator)
		if a.Reason != ReasonNotServed {
			return a
		}
	}
	return a
}

// RetrieveDate asks as Check does, for the latest change's date.
func (s *Swaps) RetrieveDate(ctx context.Context, kind SwapKind, e164, region, correlator string) ChangeDate {
	d := ChangeDate{SwapAnswer: unknown(ReasonNotOffered, "", fmt.Errorf("operatorapi: no operator offers %s for the region", kind))}
	for _, c := range s.candidates(kind, region) {
		d = c.RetrieveDate(ctx, kind, e164, correlator)
		if d.Reason != ReasonNotServed {
			return d
		}
	}
	return d
}

// ErrSwapUnknown is the error of a check that got no answer to rely on (SIMSwapGate): the
// policy decides what that means. It wraps the answer's reason and cause.
var ErrSwapUnknown = errors.New("operatorapi: the swap check has no answer")

// SIMSwapGate is Swaps as a workflow asks it (workflows.SwapChecker): a SIM swap (or, with
// Kind DeviceSwap, device swap) check of a number within maxAge, the country taken from the
// number, the operator found as Swaps.Check finds it.
type SIMSwapGate struct {
	Swaps *Swaps
	// Kind is the API asked (SIMSwap, the zero value, or DeviceSwap).
	Kind SwapKind
}

// Check reports whether the number's SIM (or device) changed within maxAge and when the
// operator said so; an unknown outcome is a *GateError, wrapping ErrSwapUnknown (and
// ErrUnavailable when the operator did not answer).
func (g SIMSwapGate) Check(ctx context.Context, number string, maxAge time.Duration) (bool, time.Time, error) {
	n, err := phone.Parse(number)
	if err != nil {
		return false, time.Time{}, &GateError{Reason: ReasonRefused, err: err}
	}
	a := g.Swaps.Check(ctx, g.Kind, n.E164, n.Region, maxAge, "")
	if a.Outcome == SwapUnknown {
		return false, time.Time{}, &GateError{Reason: a.Reason, OperatorID: a.OperatorID, err: a.Err}
	}
	return a.Outcome == Swapped, time.Now(), nil
}

// GateError is a gate's check with no answer to rely on: the answer's reason and operator, and
// its cause (which holds no number).
type GateError struct {
	Reason     string
	OperatorID string
	err        error
}

func (e *GateError) Error() string {
	return fmt.Sprintf("%v: %s (%s): %v", ErrSwapUnknown, e.Reason, e.OperatorID, e.err)
}

func (e *GateError) Unwrap() []error { return []error{ErrSwapUnknown, e.err} }

// NotOffered reports that no operator offers the API for the number: the workflow tells it
// apart from an operator that did not answer (NOT_OFFERED, not UNAVAILABLE).
func (e *GateError) NotOffered() bool { return e.Reason == ReasonNotOffered }
