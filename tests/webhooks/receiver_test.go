// Package webhooks_test proves the reference webhook receiver (tests/webhooks/receiver) that
// the end-to-end tests trust: what it accepts is signed as Standard Webhooks says, and what is
// not is refused, so a delivery it records as verified is one a client's receiver would accept.
package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// sign is the Standard Webhooks signature, written here from the spec and not taken from
// services/connect, so the receiver is checked against an independent signer: base64 of
// HMAC-SHA256 over "id.timestamp.body", keyed with the base64-decoded part after whsec_.
func sign(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.%s", id, ts, body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// post sends one delivery to the receiver as a sender would.
func post(t *testing.T, url string, h map[string]string, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func headers(id string, ts int64, sig string) map[string]string {
	h := map[string]string{}
	if id != "" {
		h["webhook-id"] = id
	}
	if ts != 0 {
		h["webhook-timestamp"] = strconv.FormatInt(ts, 10)
	}
	if sig != "" {
		h["webhook-signature"] = sig
	}
	return h
}

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2Vjb25kLXNlY3JldC1vZi10aGUtdGVzdHMtMDEyMzQ1Njc4OQ=="
	// The example of the Standard Webhooks spec (standardwebhooks.com, "Verifying webhooks"):
	// a signature made by someone else, long ago.
	specID   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS   = 1614265330
	specBody = `{"test": 2432232314}`
	specSig  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestReceiverVerifies(t *testing.T) {
	r := harness.StartReceiver(t)
	tenYears := float64(10 * 365 * 24 * 3600)
	r.Configure(harness.ReceiverConfig{Path: "/one", Secrets: []string{secretA}})
	r.Configure(harness.ReceiverConfig{Path: "/two", Secrets: []string{secretA, secretB}})
	r.Configure(harness.ReceiverConfig{Path: "/spec", Secrets: []string{secretA}, ToleranceSeconds: &tenYears})

	now := time.Now().Unix()
	body := `{"id":"evt_1","type":"ping","createdAt":"2026-01-02T03:04:05.678Z","data":{"endpointId":"we_1"}}`
	tests := []struct {
		name, path, id string
		ts             int64
		sig, body      string
		status         int
		verifiedWith   int
		errContains    string
	}{
		{"signed by hand", "/one", "msg_ok", now, sign(t, secretA, "msg_ok", now, body), body, 200, 0, ""},
		{"tampered body", "/one", "msg_tampered", now, sign(t, secretA, "msg_tampered", now, body),
			strings.Replace(body, "we_1", "we_2", 1), 400, -1, "No matching signature"},
		{"another id than the signed one", "/one", "msg_other", now, sign(t, secretA, "msg_signed", now, body), body, 400, -1, "No matching signature"},
		{"another timestamp than the signed one", "/one", "msg_ts", now, sign(t, secretA, "msg_ts", now-1, body), body, 400, -1, "No matching signature"},
		{"stale timestamp, correctly signed", "/one", "msg_stale", now - 600, sign(t, secretA, "msg_stale", now-600, body), body, 400, -1, "too old"},
		{"future timestamp, correctly signed", "/one", "msg_future", now + 600, sign(t, secretA, "msg_future", now+600, body), body, 400, -1, "too new"},
		{"another secret", "/one", "msg_b", now, sign(t, secretB, "msg_b", now, body), body, 400, -1, "No matching signature"},
		{"no signature", "/one", "msg_nosig", now, "", body, 400, -1, "Missing required headers"},
		{"no id", "/one", "", now, sign(t, secretA, "", now, body), body, 400, -1, "Missing required headers"},
		{"second of two secrets", "/two", "msg_two", now, sign(t, secretB, "msg_two", now, body), body, 200, 1, ""},
		// During a rotation's overlap a sender signs with both secrets, space-separated.
		{"two signatures, one good", "/one", "msg_both", now,
			sign(t, secretB, "msg_both", now, body) + " " + sign(t, secretA, "msg_both", now, body), body, 200, 0, ""},
		{"the spec's example, with the tolerance relaxed", "/spec", specID, specTS, specSig, specBody, 200, 0, ""},
		{"the spec's example, tampered", "/spec", specID + "x", specTS, specSig, specBody, 400, -1, "No matching signature"},
		{"the spec's example at the library's tolerance", "/one", specID, specTS, specSig, specBody, 400, -1, "too old"},
		{"a path never configured", "/nowhere", "msg_x", now, sign(t, secretA, "msg_x", now, body), body, 404, -1, "not configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(r.Received(tt.path))
			if got := post(t, r.URL(tt.path), headers(tt.id, tt.ts, tt.sig), tt.body); got != tt.status {
				t.Fatalf("answered %d, want %d", got, tt.status)
			}
			recs := r.Received(tt.path)
			if len(recs) != before+1 {
				t.Fatalf("%d records, want %d", len(recs), before+1)
			}
			rec := recs[len(recs)-1]
			if rec.VerifiedWith != tt.verifiedWith || rec.Verified() != (tt.errContains == "") {
				t.Fatalf("verifiedWith %d (error %v), want %d", rec.VerifiedWith, rec.Error, tt.verifiedWith)
			}
			if tt.errContains != "" && (rec.Error == nil || !strings.Contains(*rec.Error, tt.errContains)) {
				t.Fatalf("error %v, want one with %q", rec.Error, tt.errContains)
			}
			if rec.Path != tt.path || rec.WebhookID != tt.id || rec.SignatureHeader != tt.sig || rec.RawBody != tt.body ||
				rec.Timestamp != strconv.FormatInt(tt.ts, 10) || rec.Attempt != 1 || rec.ReceivedAt < now*1000 {
				t.Fatalf("record %+v", rec)
			}
			var parsed, sent any
			if err := json.Unmarshal(rec.Body, &parsed); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			_ = json.Unmarshal([]byte(tt.body), &sent)
			if fmt.Sprint(parsed) != fmt.Sprint(sent) {
				t.Fatalf("parsed body %v, sent %v", parsed, sent)
			}
		})
	}
}

// TestReceiverFailsFirst: failFirst answers the configured status to the first attempts of each
// webhook-id, counted per id, then 200; a delay holds every answer.
func TestReceiverFailsFirst(t *testing.T) {
	r := harness.StartReceiver(t)
	r.Configure(harness.ReceiverConfig{Path: "/flaky", Secrets: []string{secretA}, FailFirst: 2, Status: 503})
	r.Configure(harness.ReceiverConfig{Path: "/slow", Secrets: []string{secretA}, DelayMs: 300})
	body := `{"n":1}`
	send := func(path, id string) int {
		ts := time.Now().Unix()
		return post(t, r.URL(path), headers(id, ts, sign(t, secretA, id, ts, body)), body)
	}
	for i, want := range []int{503, 503, 200, 200} {
		if got := send("/flaky", "msg_a"); got != want {
			t.Fatalf("attempt %d of msg_a: %d, want %d", i+1, got, want)
		}
	}
	if got := send("/flaky", "msg_b"); got != 503 {
		t.Fatalf("first attempt of another id: %d, want 503", got)
	}
	recs := r.Received("/flaky")
	var attempts []string
	for _, rec := range recs {
		if !rec.Verified() {
			t.Fatalf("a failing answer is still a verified delivery: %+v", rec)
		}
		attempts = append(attempts, fmt.Sprintf("%s#%d", rec.WebhookID, rec.Attempt))
	}
	if got := strings.Join(attempts, " "); got != "msg_a#1 msg_a#2 msg_a#3 msg_a#4 msg_b#1" {
		t.Fatalf("attempts %s", got)
	}

	start := time.Now()
	if got := send("/slow", "msg_slow"); got != 200 {
		t.Fatalf("slow path: %d", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answered after %s, before the configured delay", d)
	}
	// A bad request to the config is refused, not half applied.
	if err := r.TryConfigure(harness.ReceiverConfig{Path: "/_received"}); err == nil {
		t.Fatal("the receiver accepted a path of its own API")
	}
}
