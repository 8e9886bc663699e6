package sandboxcamara

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scopes of the SIM Swap and Device Swap APIs, one per operation.
const (
	ScopeSIMSwapCheck    = "sim-swap:check"
	ScopeSIMSwapDate     = "sim-swap:retrieve-date"
	ScopeDeviceSwapCheck = "device-swap:check"
	ScopeDeviceSwapDate  = "device-swap:retrieve-date"
)

// GrantCIBA is the grant type of the CIBA token request.
const GrantCIBA = "urn:openid:params:grant-type:ciba"

// Line is what the swap APIs know of one line.
type Line struct {
	// SIMChange and DeviceChange are the line's latest SIM and device changes; zero: none
	// known (retrieve-date answers null, check answers false).
	SIMChange, DeviceChange time.Time
	// MonitoredDays, when set, is the monitoredPeriod a null date is answered with.
	MonitoredDays int
	// Status5xx, when set, is the status every swap call about the line answers (503, 500…).
	Status5xx int
	// NotServed: the operator does not serve the number: 404 IDENTIFIER_NOT_FOUND from the
	// APIs, unknown_user_id from the backchannel authentication endpoint.
	NotServed bool
}

// CIBA is how the backchannel flow answers.
type CIBA struct {
	// Interval is the polling interval, in seconds, the authentication request is answered
	// with (CIBA's unit; 0 leaves it out, which means 5 s to the client).
	Interval int
	// SlowDownPolls token requests are answered slow_down first, then PendingPolls
	// authorization_pending, then the tokens.
	SlowDownPolls, PendingPolls int
	// Deny answers the polls access_denied once the pending ones are spent: the user or the
	// operator's consent check refused.
	Deny bool
}

type cibaRequest struct {
	clientID, msisdn string
	scopes           []string
	expires          time.Time
	polls            int
}

// SetLine sets what the swap APIs know of the line msisdn ("" for every line without its own).
func (f *Fake) SetLine(msisdn string, l Line) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines[msisdn] = l
}

// SetCIBA sets how the backchannel flow answers from the next authentication request on.
func (f *Fake) SetCIBA(c CIBA) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ciba = c
}

// CIBAPolls returns when each CIBA token request arrived, oldest first.
func (f *Fake) CIBAPolls() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.polls)
}

// SwapCalls is how many SIM Swap and Device Swap API calls the fake answered.
func (f *Fake) SwapCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.swapHits
}

func (f *Fake) line(msisdn string) Line {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.lines[msisdn]; ok {
		return l
	}
	return f.lines[""]
}

func (f *Fake) swapRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /bc-authorize", f.bcAuthorize)
	sim := func(l Line) time.Time { return l.SIMChange }
	dev := func(l Line) time.Time { return l.DeviceChange }
	m.HandleFunc("POST /sim-swap/v2/check", f.swapAPI(ScopeSIMSwapCheck, "sim-swap", f.check(sim)))
	m.HandleFunc("POST /sim-swap/v2/retrieve-date", f.swapAPI(ScopeSIMSwapDate, "sim-swap", f.retrieve("latestSimChange", sim)))
	m.HandleFunc("POST /device-swap/v1/check", f.swapAPI(ScopeDeviceSwapCheck, "device-swap", f.check(dev)))
	m.HandleFunc("POST /device-swap/v1/retrieve-date", f.swapAPI(ScopeDeviceSwapDate, "device-swap", f.retrieve("latestDeviceChange", dev)))
}

// bcAuthorize is the backchannel authentication endpoint: an authenticated client, a tel:
// login_hint, openid and at least one swap scope; the answer is the request's id, its life and
// the polling interval.
func (f *Fake) bcAuthorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "malformed form")
		return
	}
	// CIBA has the provider take its issuer, token endpoint or backchannel endpoint as an
	// assertion's audience.
	clientID, err := f.authenticate(r, f.URL, f.URL+"/token", f.URL+"/bc-authorize")
	if err != nil {
		oauthError(w, http.StatusUnauthorized, "invalid_client", err.Error())
		return
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	msisdn, tel := strings.CutPrefix(r.PostForm.Get("login_hint"), "tel:")
	switch {
	case !slices.Contains(scopes, "openid"):
		oauthError(w, http.StatusBadRequest, "invalid_scope", "openid is required")
		return
	case !slices.ContainsFunc(scopes, isSwapScope):
		oauthError(w, http.StatusBadRequest, "invalid_scope", "no scope of an API offered here")
		return
	case !slices.ContainsFunc(scopes, func(s string) bool { return strings.HasPrefix(s, "dpv:") }):
		oauthError(w, http.StatusBadRequest, "invalid_scope", "a purpose (dpv:…) is required")
		return
	case !tel || !phonePattern.MatchString(msisdn):
		oauthError(w, http.StatusBadRequest, "invalid_request", "login_hint must be tel: and an E.164 number")
		return
	}
	if l := f.line(msisdn); l.NotServed {
		oauthError(w, http.StatusBadRequest, "unknown_user_id", "the number is not served here")
		return
	}
	id := random()
	f.mu.Lock()
	c := f.ciba
	f.cibaReqs[id] = &cibaRequest{clientID: clientID, msisdn: msisdn, scopes: scopes, expires: f.now().Add(2 * time.Minute)}
	f.mu.Unlock()
	out := map[string]any{"auth_req_id": id, "expires_in": 120}
	if c.Interval > 0 {
		out["interval"] = c.Interval
	}
	writeJSON(w, http.StatusOK, out)
}

func isSwapScope(s string) bool {
	return slices.Contains([]string{ScopeSIMSwapCheck, ScopeSIMSwapDate, ScopeDeviceSwapCheck, ScopeDeviceSwapDate}, s)
}

// cibaToken is the CIBA grant at the token endpoint: slow_down, then authorization_pending, as
// SetCIBA says, then a three-legged token for the request's line (or access_denied).
func (f *Fake) cibaToken(w http.ResponseWriter, r *http.Request, clientID string) {
	id := r.PostForm.Get("auth_req_id")
	f.mu.Lock()
	f.polls = append(f.polls, f.now())
	req, ok := f.cibaReqs[id]
	c := f.ciba
	if ok {
		req.polls++
	}
	f.mu.Unlock()
	switch {
	case !ok || req.clientID != clientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown auth_req_id")
		return
	case f.now().After(req.expires):
		oauthError(w, http.StatusBadRequest, "expired_token", "the authentication request expired")
		return
	case req.polls <= c.SlowDownPolls:
		oauthError(w, http.StatusBadRequest, "slow_down", "polling too fast")
		return
	case req.polls <= c.SlowDownPolls+c.PendingPolls:
		oauthError(w, http.StatusBadRequest, "authorization_pending", "not yet")
		return
	}
	f.mu.Lock()
	delete(f.cibaReqs, id) // a request gives its tokens once
	f.mu.Unlock()
	if c.Deny {
		oauthError(w, http.StatusBadRequest, "access_denied", "consent refused")
		return
	}
	f.issue(w, &grant{clientID: clientID, msisdn: req.msisdn, scopes: req.scopes, reusable: true})
}

// clientCredentials is the two-legged grant: a token naming no line, with the swap scopes asked.
func (f *Fake) clientCredentials(w http.ResponseWriter, r *http.Request, clientID string) {
	scopes := strings.Fields(r.PostForm.Get("scope"))
	if !slices.ContainsFunc(scopes, isSwapScope) {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "no scope of an API offered here")
		return
	}
	f.issue(w, &grant{clientID: clientID, scopes: scopes, reusable: true})
}

func (f *Fake) issue(w http.ResponseWriter, g *grant) {
	tok := random()
	g.expires = f.now().Add(f.opts.TokenTTL)
	f.mu.Lock()
	f.tokens[tok] = g
	f.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(f.opts.TokenTTL / time.Second),
		"scope": strings.Join(g.scopes, " "),
	})
}

// swapAPI authenticates a swap API call (a token of a backend grant with scope, or the API's
// whole scope family) and finds its line: from a three-legged token, which then must not come
// with phoneNumber (422 UNNECESSARY_IDENTIFIER), or from phoneNumber with a two-legged one (422
// MISSING_IDENTIFIER without it).
func (f *Fake) swapAPI(scope, family string, op func(w http.ResponseWriter, body map[string]json.RawMessage, l Line)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if corr := r.Header.Get("x-correlator"); corr != "" && correlatorPattern.MatchString(corr) {
			w.Header().Set("x-correlator", corr)
		}
		f.mu.Lock()
		f.swapHits++
		f.mu.Unlock()
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		g, known := f.tokens[tok]
		f.mu.Unlock()
		if !ok || !known || !g.reusable || f.now().After(g.expires) {
			camaraError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials.")
			return
		}
		if !slices.Contains(g.scopes, scope) && !slices.Contains(g.scopes, family) {
			camaraError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
			return
		}
		var body map[string]json.RawMessage
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
			camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
			return
		}
		var number string
		if raw, given := body["phoneNumber"]; given {
			if json.Unmarshal(raw, &number) != nil || !phonePattern.MatchString(number) {
				camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
				return
			}
		}
		switch {
		case g.msisdn != "" && number != "":
			camaraError(w, http.StatusUnprocessableEntity, "UNNECESSARY_IDENTIFIER", "The phone number is already identified by the access token.")
			return
		case g.msisdn == "" && number == "":
			camaraError(w, http.StatusUnprocessableEntity, "MISSING_IDENTIFIER", "The phone number cannot be identified.")
			return
		case g.msisdn != "":
			number = g.msisdn
		}
		l := f.line(number)
		switch {
		case l.Status5xx != 0:
			camaraError(w, l.Status5xx, "UNAVAILABLE", "Service Unavailable.")
		case l.NotServed:
			camaraError(w, http.StatusNotFound, "IDENTIFIER_NOT_FOUND", "Device identifier not found.")
		default:
			op(w, body, l)
		}
	}
}

// check answers whether the line's change (SIM or device) is within maxAge hours (1 to 2400,
// 240 when absent).
func (f *Fake) check(change func(Line) time.Time) func(http.ResponseWriter, map[string]json.RawMessage, Line) {
	return func(w http.ResponseWriter, body map[string]json.RawMessage, l Line) {
		hours := 240
		if raw, ok := body["maxAge"]; ok {
			if json.Unmarshal(raw, &hours) != nil {
				camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "maxAge is not an integer")
				return
			}
			if hours < 1 || hours > 2400 {
				camaraError(w, http.StatusBadRequest, "OUT_OF_RANGE", "maxAge must be between 1 and "+strconv.Itoa(2400)+" hours")
				return
			}
		}
		at := change(l)
		writeJSON(w, http.StatusOK, map[string]bool{"swapped": !at.IsZero() && f.now().Sub(at) <= time.Duration(hours)*time.Hour})
	}
}

// retrieve answers the line's latest change under field (null when none is known, with the
// monitored period when set).
func (f *Fake) retrieve(field string, change func(Line) time.Time) func(http.ResponseWriter, map[string]json.RawMessage, Line) {
	return func(w http.ResponseWriter, _ map[string]json.RawMessage, l Line) {
		out := map[string]any{field: nil}
		if at := change(l); !at.IsZero() {
			out[field] = at.UTC().Format(time.RFC3339Nano)
		} else if l.MonitoredDays > 0 {
			out["monitoredPeriod"] = l.MonitoredDays
		}
		writeJSON(w, http.StatusOK, out)
	}
}
