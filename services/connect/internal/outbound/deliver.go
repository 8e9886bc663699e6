package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// UserAgent identifies our deliveries to receivers; the version moves only when the request
// format does.
const UserAgent = "mnv-webhook/1"

// maxResponseBody is how much of a response is read before the connection is given up: the
// body is not used, and reading a little of it lets small responses keep the connection
// reusable without letting an endpoint make us download a large one.
const maxResponseBody = 64 << 10

// Request is one attempt to deliver one batch.
type Request struct {
	// URL is the integration's endpoint, validated by Policy.CheckURL when it was stored.
	URL string
	// Method is POST, PUT or PATCH (an integration's httpMethod).
	Method string
	// APIKey, when not empty, is sent as "Authorization: Bearer <APIKey>". It never appears in
	// an error.
	APIKey string
	// MessageID is the Standard Webhooks message id (IDHeader): the same on every attempt of
	// one message, so receivers dedupe (delivery is at least once).
	MessageID string
	// Keys sign the message the Standard Webhooks way (StandardSignatureHeader), one signature
	// per key: two during a secret rotation's overlap. At least one: an unsigned delivery
	// could not be told from a forged one.
	Keys [][]byte
	// Secret, when set, also signs the request the older mnv way (SignatureHeader,
	// DeliveryIDHeader, AttemptHeader), which integrations keep for their deprecation window.
	Secret []byte
	// DeliveryID is sent in DeliveryIDHeader with Secret's signature.
	DeliveryID string
	// Attempt is the attempt number, 1 for the first try.
	Attempt int
	// Body is the JSON array of mapped records.
	Body []byte
}

// Result is the outcome of one attempt, what the worker records as a sync event.
type Result struct {
	// Status is the HTTP status received, 0 when there was no response.
	Status int
	// Duration is the time from sending to having read the response.
	Duration time.Duration
	// Err is nil on a 2xx; otherwise the transport error, the policy refusal (*Error), the
	// request error (*Error) or the non-2xx status. Its text is meant for the client's sync
	// history: it never contains the API key, the URL or an address refused by the policy.
	Err error
	// Retry says whether trying again later may succeed: timeouts, connection errors, a
	// cancelled context (the worker stopping), 408, 429 and 5xx. Other 4xx, 3xx, policy
	// refusals and bad requests are permanent: retrying would only repeat them.
	Retry bool
}

// Deliver makes one attempt to deliver r.Body to r.URL with c, which must come from NewClient
// (Deliver relies on it for the address policy, the timeout and not following redirects). now
// is the signing time (the worker's clock, injected for tests). It sets Content-Type
// application/json, User-Agent, the Standard Webhooks headers, AttemptHeader, with r.Secret
// SignatureHeader and DeliveryIDHeader, and, when r.APIKey is set, Authorization; it reads at most 64 KiB of the response and discards it.
// A 2xx answer is a success even if reading its body then fails: the receiver has the batch.
func Deliver(ctx context.Context, c *http.Client, r Request, now time.Time) Result {
	req, err := newRequest(ctx, c, r, now)
	if err != nil {
		return Result{Err: err}
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		res := classify(err)
		res.Duration = time.Since(start)
		return res
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	_ = resp.Body.Close()
	res := Result{Status: resp.StatusCode, Duration: time.Since(start)}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return res
	}
	res.Err = fmt.Errorf("webhook: endpoint answered HTTP %d", resp.StatusCode)
	res.Retry = resp.StatusCode == http.StatusRequestTimeout ||
		resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode >= 500
	return res
}

// newRequest validates r and builds the signed request. Its errors are *Error values written
// here, never errors of net/url or net/http, whose texts quote URLs and header values.
func newRequest(ctx context.Context, c *http.Client, r Request, now time.Time) (*http.Request, error) {
	if c == nil {
		return nil, refuse("webhook: no HTTP client")
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil, refuse("the HTTP method must be POST, PUT or PATCH")
	}
	u, err := url.Parse(r.URL)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" ||
		(u.Scheme != "https" && u.Scheme != "http") {
		return nil, refuse("the endpoint URL is not a valid http(s) URL")
	}
	if len(r.Keys) == 0 || slices.ContainsFunc(r.Keys, func(k []byte) bool { return len(k) == 0 }) {
		return nil, refuse("webhook: no signing secret")
	}
	if r.MessageID == "" || !headerSafe(r.MessageID) {
		return nil, refuse("webhook: invalid message id")
	}
	if len(r.Secret) > 0 && (r.DeliveryID == "" || !headerSafe(r.DeliveryID)) {
		return nil, refuse("webhook: invalid delivery id")
	}
	if r.Attempt < 1 {
		return nil, refuse("webhook: attempt must be at least 1")
	}
	if r.APIKey != "" && !headerSafe(r.APIKey) {
		return nil, refuse("the API key contains characters that cannot be sent in an HTTP header")
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, refuse("the endpoint URL is not a valid http(s) URL")
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(IDHeader, r.MessageID)
	h.Set(TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	h.Set(StandardSignatureHeader, SignStandard(r.Keys, r.MessageID, now, r.Body))
	if len(r.Secret) > 0 {
		h.Set(SignatureHeader, Sign(r.Secret, r.Body, now))
		h.Set(DeliveryIDHeader, r.DeliveryID)
	}
	h.Set(AttemptHeader, strconv.Itoa(r.Attempt))
	if r.APIKey != "" {
		h.Set("Authorization", "Bearer "+r.APIKey)
	}
	return req, nil
}

// headerSafe accepts visible ASCII only: no spaces, controls (header injection) or non-ASCII.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// classify turns an error of http.Client.Do into a Result. The url.Error wrapper, whose text
// quotes the URL (which may carry a token in its query), is dropped from the message.
func classify(err error) Result {
	var perr *Error
	if errors.As(err, &perr) {
		return Result{Err: perr}
	}
	if errors.Is(err, context.Canceled) {
		return Result{Err: fmt.Errorf("webhook: delivery cancelled: %w", context.Canceled), Retry: true}
	}
	var nerr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()) {
		return Result{Err: fmt.Errorf("webhook: request timed out: %w", context.DeadlineExceeded), Retry: true}
	}
	inner := err
	var uerr *url.Error
	if errors.As(err, &uerr) {
		inner = uerr.Err
	}
	return Result{Err: fmt.Errorf("webhook: request failed: %w", inner), Retry: true}
}
