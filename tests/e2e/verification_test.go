package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

const sandboxHeader = "X-Mnv-Sandbox-Msisdn"

// numberSeq hands out distinct valid numbers, so the per-number limit never meets two tests.
var numberSeq atomic.Int64

func nextNumber() string { return fmt.Sprintf("+97150%07d", 1000000+numberSeq.Add(1)) }

type verification struct {
	VerificationID string `json:"verificationId"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	Verified       bool   `json:"verified"`
	MobileNumber   string `json:"mobileNumber"`
	OperatorID     string `json:"operatorId"`
	ServiceType    string `json:"serviceType"`
	SessionID      string `json:"sessionId"`
	Charged        int64  `json:"charged"`
	BalanceAfter   *int64 `json:"balanceAfter"`
	CreatedAt      string `json:"createdAt"`
}

type session struct {
	SessionID             string  `json:"sessionId"`
	Status                string  `json:"status"`
	EncryptedMobileNumber *string `json:"encryptedMobileNumber"`
	OperatorID            *string `json:"operatorId"`
	ExpiresAt             string  `json:"expiresAt"`
}

// sdkToken mints an SDK token for c.
func sdkToken(t *testing.T, s *harness.Suite, c harness.Client) string {
	t.Helper()
	r := callSuite(t, s, "POST", "/v1/api/me/sdk-tokens", meOf(c), `{"label":"app"}`)
	if r.status != http.StatusOK {
		t.Fatalf("sdk token: %d %s", r.status, r.raw)
	}
	var tok struct {
		SDKToken string `json:"sdkToken"`
	}
	r.decode(t, &tok)
	return tok.SDKToken
}

// openSession opens an SDK session as the app would, with extra headers (the operator's number
// header, X-Forwarded-For).
func openSession(t *testing.T, s *harness.Suite, c harness.Client, token string, extra headers) session {
	t.Helper()
	h := headers{"X-Sdk-Token": token, "X-Client-Id": c.ID}
	for k, v := range extra {
		h[k] = v
	}
	r := callSuite(t, s, "POST", "/v1/api/sdk/session", h, `{"platform":"ANDROID","appVersion":"1.2.3"}`)
	if r.status != http.StatusOK {
		t.Fatalf("session: %d %s", r.status, r.raw)
	}
	var out session
	r.decode(t, &out)
	return out
}

func verifyBody(number, blob string) string {
	return fmt.Sprintf(`{"mobileNumber":%q,"encryptedMobileNumber":%q,"operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`, number, blob)
}

func balanceOf(t *testing.T, s *harness.Suite, c harness.Client) int64 {
	t.Helper()
	var got client
	r := callSuite(t, s, "GET", "/v1/api/clients", keyOf(c), "")
	if r.status != http.StatusOK {
		t.Fatalf("client: %d %s", r.status, r.raw)
	}
	r.decode(t, &got)
	return got.Balance
}

// TestNativeFlow: an app opens a session through the operator's network, the backend verifies
// what the user typed against it.
func TestNativeFlow(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	token := sdkToken(t, suite, c)

	t.Run("VERIFIED", func(t *testing.T) {
		n := nextNumber()
		sess := openSession(t, suite, c, token, headers{sandboxHeader: n})
		if sess.Status != "CAPTURED" || sess.EncryptedMobileNumber == nil || *sess.OperatorID != "sandbox" {
			t.Fatalf("session %+v", sess)
		}
		if strings.Contains(*sess.EncryptedMobileNumber, n[1:]) {
			t.Fatal("the blob shows the number")
		}
		var v verification
		ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)).decode(t, &v)
		if v.Status != "VERIFIED" || !v.Verified || v.Charged != 1 || v.BalanceAfter == nil || *v.BalanceAfter != 9 ||
			v.MobileNumber != n || v.SessionID != sess.SessionID || v.Reason != "NUMBER_MATCH" {
			t.Fatalf("verification %+v", v)
		}
		// Kept, with the number masked.
		var kept verification
		ok(t, "GET", "/v1/api/verifications/"+v.VerificationID, keyOf(c), "").decode(t, &kept)
		if kept.Status != "VERIFIED" || kept.MobileNumber != n[:6]+"*****"+n[len(n)-2:] {
			t.Fatalf("kept %+v", kept)
		}
		// One verify per blob; the refusal names the verification, so a caller whose first
		// answer was lost can read it.
		if r := call(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)); r.status != http.StatusConflict || r.code() != "ALREADY_USED" ||
			!strings.Contains(r.env.Messages[0].Message, v.VerificationID) {
			t.Fatalf("second verify: %d %s", r.status, r.raw)
		}
	})
	t.Run("NOT_VERIFIED", func(t *testing.T) {
		sess := openSession(t, suite, c, token, headers{sandboxHeader: nextNumber()})
		var v verification
		ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(nextNumber(), *sess.EncryptedMobileNumber)).decode(t, &v)
		if v.Status != "NOT_VERIFIED" || v.Verified || v.Charged != 1 || v.Reason != "NUMBER_MISMATCH" {
			t.Fatalf("verification %+v", v)
		}
	})
	t.Run("UNDETERMINED without a number header", func(t *testing.T) {
		before := balanceOf(t, suite, c)
		sess := openSession(t, suite, c, token, nil)
		if sess.Status != "NO_NETWORK_IDENTITY" {
			t.Fatalf("session %+v", sess)
		}
		var v verification
		ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(nextNumber(), *sess.EncryptedMobileNumber)).decode(t, &v)
		if v.Status != "UNDETERMINED" || v.Charged != 0 || v.BalanceAfter != nil || v.Reason != "NO_NETWORK_IDENTITY" {
			t.Fatalf("verification %+v", v)
		}
		if after := balanceOf(t, suite, c); after != before {
			t.Fatalf("UNDETERMINED charged: %d -> %d", before, after)
		}
	})
	t.Run("a number header from an untrusted address is ignored", func(t *testing.T) {
		for _, xff := range []string{"203.0.113.7", "127.0.0.1, 203.0.113.7"} {
			n := nextNumber()
			sess := openSession(t, suite, c, token, headers{sandboxHeader: n, "X-Forwarded-For": xff})
			if sess.Status != "NO_NETWORK_IDENTITY" || sess.OperatorID != nil {
				t.Fatalf("from %s: session %+v", xff, sess)
			}
			// Verifying the number the header claimed proves nothing: UNDETERMINED, free.
			var v verification
			ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)).decode(t, &v)
			if v.Status != "UNDETERMINED" || v.Charged != 0 {
				t.Fatalf("from %s: verification %+v", xff, v)
			}
		}
	})
	t.Run("an invalid number header captures nothing", func(t *testing.T) {
		sess := openSession(t, suite, c, token, headers{sandboxHeader: "12345"})
		if sess.Status != "NO_NETWORK_IDENTITY" {
			t.Fatalf("session %+v", sess)
		}
	})
}

func TestVerifyRefusals(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	other := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	token := sdkToken(t, suite, c)
	n := nextNumber()
	blob := *openSession(t, suite, c, token, headers{sandboxHeader: n}).EncryptedMobileNumber
	otherBlob := *openSession(t, suite, other, sdkToken(t, suite, other), headers{sandboxHeader: n}).EncryptedMobileNumber
	tampered := []byte(blob)
	tampered[len(tampered)/2] ^= 1

	tests := []struct {
		name   string
		h      headers
		body   string
		status int
		code   string
		field  string
	}{
		{"blob of another client", keyOf(c), verifyBody(n, otherBlob), 400, "INVALID_ARGUMENT", "encryptedMobileNumber"},
		{"tampered blob", keyOf(c), verifyBody(n, string(tampered)), 400, "INVALID_ARGUMENT", "encryptedMobileNumber"},
		{"not a blob", keyOf(c), verifyBody(n, "hello"), 400, "INVALID_ARGUMENT", "encryptedMobileNumber"},
		{"number not E.164", keyOf(c), verifyBody("0501234567", blob), 400, "INVALID_ARGUMENT", "mobileNumber"},
		{"invalid number", keyOf(c), verifyBody("+99912345678", blob), 400, "INVALID_ARGUMENT", "mobileNumber"},
		{"unknown operator", keyOf(c), strings.Replace(verifyBody(n, blob), `"sandbox"`, `"nope"`, 1), 400, "FEATURE_NOT_ENABLED", "operatorId"},
		{"unknown service type", keyOf(c), strings.Replace(verifyBody(n, blob), "HEADER_ENRICHMENT", "CARRIER_PIGEON", 1), 400, "FEATURE_NOT_ENABLED", "serviceType"},
		{"planned service type", keyOf(c), strings.Replace(verifyBody(n, blob), "HEADER_ENRICHMENT", "NETWORK_API", 1), 400, "FEATURE_NOT_ENABLED", "serviceType"},
		{"unknown field", keyOf(c), strings.Replace(verifyBody(n, blob), `{`, `{"x":1,`, 1), 400, "INVALID_ARGUMENT", "x"},
		{"SDK token instead of key", headers{"X-Sdk-Token": token, "X-Client-Id": c.ID}, verifyBody(n, blob), 401, "UNAUTHENTICATED", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, "POST", "/v1/api/verify", tt.h, tt.body)
			field := ""
			if len(r.env.Messages) > 0 && r.env.Messages[0].Field != nil {
				field = *r.env.Messages[0].Field
			}
			if r.status != tt.status || r.code() != tt.code || field != tt.field {
				t.Fatalf("%d %s, want %d %s on %q", r.status, r.raw, tt.status, tt.code, tt.field)
			}
		})
	}
	// None of it cost anything, and the blob still verifies once.
	if b := balanceOf(t, suite, c); b != 10 {
		t.Fatalf("balance %d after refused verifies", b)
	}
	ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, blob))

	t.Run("an API key on the session path", func(t *testing.T) {
		r := call(t, "POST", "/v1/api/sdk/session", keyOf(c), `{"platform":"IOS"}`)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("a client without the SANDBOX feature", func(t *testing.T) {
		plain := newClient(t, 10, "--features", "VERIFY")
		var ops struct {
			Items []map[string]any `json:"items"`
		}
		ok(t, "GET", "/v1/api/operators", keyOf(plain), "").decode(t, &ops)
		if len(ops.Items) != 0 {
			t.Fatalf("operators %v", ops.Items)
		}
		sess := openSession(t, suite, plain, sdkToken(t, suite, plain), headers{sandboxHeader: nextNumber()})
		if sess.Status != "NO_NETWORK_IDENTITY" {
			t.Fatalf("session %+v", sess)
		}
	})
	t.Run("a client without VERIFY", func(t *testing.T) {
		connectOnly := newClient(t, 10, "--features", "CONNECT,SANDBOX")
		r := call(t, "POST", "/v1/api/sdk/session", headers{"X-Sdk-Token": sdkToken(t, suite, connectOnly), "X-Client-Id": connectOnly.ID}, `{"platform":"IOS"}`)
		if r.status != http.StatusBadRequest || r.code() != "FEATURE_NOT_ENABLED" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("a foreign verification id", func(t *testing.T) {
		var v verification
		sess := openSession(t, suite, other, sdkToken(t, suite, other), headers{sandboxHeader: n})
		ok(t, "POST", "/v1/api/verify", keyOf(other), verifyBody(n, *sess.EncryptedMobileNumber)).decode(t, &v)
		if r := call(t, "GET", "/v1/api/verifications/"+v.VerificationID, keyOf(c), ""); r.status != http.StatusNotFound {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
}

// TestIdempotentVerify: a verify retried with the same Idempotency-Key is answered the same and
// charged once.
func TestIdempotentVerify(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	n := nextNumber()
	blob := *openSession(t, suite, c, sdkToken(t, suite, c), headers{sandboxHeader: n}).EncryptedMobileNumber
	h := keyOf(c)
	h["Idempotency-Key"] = "verify-" + n
	first := ok(t, "POST", "/v1/api/verify", h, verifyBody(n, blob))
	second := ok(t, "POST", "/v1/api/verify", h, verifyBody(n, blob))
	if string(first.env.Data) != string(second.env.Data) || second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay differs:\n%s\n%s", first.env.Data, second.env.Data)
	}
	if r := call(t, "POST", "/v1/api/verify", h, verifyBody(nextNumber(), blob)); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("same key, other body: %d %s", r.status, r.raw)
	}
	if b := balanceOf(t, suite, c); b != 9 {
		t.Fatalf("balance %d, want 9 (charged once)", b)
	}
}

// TestConcurrentVerifies: 300 verifies race for a balance of 150. Exactly 150 are charged, the
// rest are 402, the balance ends at 0, and every charge in the ledger is a kept verification.
func TestConcurrentVerifies(t *testing.T) {
	const n, balance = 300, 150
	c := newClient(t, balance, "--features", "VERIFY,SANDBOX")
	token := sdkToken(t, suite, c)
	blobs := make([]string, n)
	numbers := make([]string, n)
	for i := range n {
		numbers[i] = nextNumber()
		blobs[i] = *openSession(t, suite, c, token, headers{sandboxHeader: numbers[i]}).EncryptedMobileNumber
	}
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		charged, refused int
		verificationIDs  = map[string]bool{}
		unexpected       []string
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Off the test goroutine: no t.Fatal here, every problem is collected in unexpected.
			r, err := send(suite, "POST", "/v1/api/verify", keyOf(c), verifyBody(numbers[i], blobs[i]))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unexpected = append(unexpected, err.Error())
				return
			}
			if r.header.Get("X-Request-Id") == "" {
				unexpected = append(unexpected, fmt.Sprintf("no X-Request-Id: %d %s", r.status, r.raw))
			}
			if r.env.Success != (r.status < 300) {
				unexpected = append(unexpected, fmt.Sprintf("status %d with success=%v: %s", r.status, r.env.Success, r.raw))
			}
			switch {
			case r.status == http.StatusOK:
				var v verification
				if err := json.Unmarshal(r.env.Data, &v); err != nil {
					unexpected = append(unexpected, fmt.Sprintf("data %s: %v", r.env.Data, err))
					return
				}
				if v.Charged != 1 {
					unexpected = append(unexpected, string(r.raw))
				}
				charged++
				verificationIDs[v.VerificationID] = true
			case r.status == http.StatusPaymentRequired && r.code() == "INSUFFICIENT_BALANCE":
				refused++
			default:
				unexpected = append(unexpected, fmt.Sprintf("%d %s", r.status, r.raw))
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d unexpected answers, e.g. %s", len(unexpected), unexpected[0])
	}
	if charged != balance || refused != n-balance {
		t.Fatalf("charged %d, refused %d; want %d and %d", charged, refused, balance, n-balance)
	}
	if b := balanceOf(t, suite, c); b != 0 {
		t.Fatalf("balance %d, want 0", b)
	}
	// Every VERIFICATION row of the ledger references a kept verification, and vice versa.
	refs, _, err := ledgerCharges(t, suite, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != balance {
		t.Fatalf("%d charges in the ledger, want %d", len(refs), balance)
	}
	for id := range verificationIDs {
		if _, charged := refs[id]; !charged {
			t.Fatalf("verification %s has no charge", id)
		}
	}
	var kept struct {
		TotalItems int `json:"totalItems"`
	}
	ok(t, "GET", "/v1/api/verifications?size=1", keyOf(c), "").decode(t, &kept)
	if kept.TotalItems != balance {
		t.Fatalf("%d verifications kept, want %d (refused ones are not verifications)", kept.TotalItems, balance)
	}
}

type transaction struct {
	TransactionID         string  `json:"transactionId"`
	Status                string  `json:"status"`
	ServiceCode           string  `json:"serviceCode"`
	MetadataID            string  `json:"metadataId"`
	ExpiresAt             string  `json:"expiresAt"`
	OperatorID            *string `json:"operatorId"`
	EncryptedMobileNumber *string `json:"encryptedMobileNumber"`
	StuckPlusSessionID    *string `json:"stuckPlusSessionId"`
}

// shopOrigin is the web origin of the e2e clients' own site.
const shopOrigin = "https://shop.example"

// allowShop lets c's browser flows be captured from shopOrigin, through mnvctl.
func allowShop(t *testing.T, c harness.Client) {
	t.Helper()
	out, err := suite.Mnvctl(context.Background(), "client", "origins", c.ID, shopOrigin)
	if err != nil || !strings.Contains(string(out), shopOrigin) {
		t.Fatalf("mnvctl client origins: %v %s", err, out)
	}
}

// allowShopOn lets c's browser flows on suite s be captured from shopOrigin, through the API.
func allowShopOn(t *testing.T, s *harness.Suite, c harness.Client) {
	t.Helper()
	if r := callSuite(t, s, "PUT", "/v1/api/me/web-origins", meOf(c), `{"origins":["`+shopOrigin+`"]}`); r.status != http.StatusOK {
		t.Fatalf("web origins: %d %s", r.status, r.raw)
	}
}

// TestBrowserVerify: backend opens a transaction, the browser captures it with no credential
// from a page on the client's own web origin, the backend resolves it and verifies the blob.
func TestBrowserVerify(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	var tr transaction
	ok(t, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"VERIFY","metadataId":"order-42"}`).decode(t, &tr)
	if tr.Status != "PENDING" || tr.MetadataID != "order-42" || tr.EncryptedMobileNumber != nil {
		t.Fatalf("opportunity %+v", tr)
	}
	n := nextNumber()
	path := "/v1/api/web/transactions/" + tr.TransactionID + "/capture"
	preflight := func(origin string) *http.Response {
		t.Helper()
		pre, err := http.NewRequest(http.MethodOptions, suite.GatewayURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		pre.Header.Set("Origin", origin)
		pre.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(pre)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// Before the client lists its site, no page may capture; nothing is captured.
	if resp := preflight(shopOrigin); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight with no origins allowed: %d %v", resp.StatusCode, resp.Header)
	}
	if r := call(t, "POST", path, headers{sandboxHeader: n, "Origin": shopOrigin}, ""); r.status != http.StatusForbidden || r.code() != "PERMISSION_DENIED" {
		t.Fatalf("capture with no origins allowed: %d %s", r.status, r.raw)
	}
	allowShop(t, c)
	// Another page, or no page at all (curl), is refused; the transaction stays usable.
	for _, h := range []headers{{sandboxHeader: n, "Origin": "https://mallory.example"}, {sandboxHeader: n}} {
		if r := call(t, "POST", path, h, ""); r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("capture from %q: %d %s", h["Origin"], r.status, r.raw)
		}
	}
	// A browser preflight, then the capture: no credential at all, the page's origin granted.
	if resp := preflight(shopOrigin); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != shopOrigin {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	r := call(t, "POST", path, headers{sandboxHeader: n, "Origin": shopOrigin}, "")
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != shopOrigin {
		t.Fatalf("capture: %d %s", r.status, r.raw)
	}
	var captured transaction
	r.decode(t, &captured)
	if captured.Status != "CAPTURED" || captured.EncryptedMobileNumber == nil || strings.Contains(string(r.raw), n[1:]) {
		t.Fatalf("capture %s", r.raw)
	}
	if again := call(t, "POST", path, headers{sandboxHeader: n, "Origin": shopOrigin}, ""); again.status != http.StatusConflict {
		t.Fatalf("second capture: %d %s", again.status, again.raw)
	}
	var resolved transaction
	ok(t, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "").decode(t, &resolved)
	if resolved.Status != "CAPTURED" || resolved.EncryptedMobileNumber == nil || *resolved.EncryptedMobileNumber != *captured.EncryptedMobileNumber {
		t.Fatalf("resolved %+v", resolved)
	}
	var v verification
	ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *resolved.EncryptedMobileNumber)).decode(t, &v)
	if v.Status != "VERIFIED" || v.Charged != 1 {
		t.Fatalf("verification %+v", v)
	}
	other := newClient(t, 0, "--features", "VERIFY,SANDBOX")
	if r := call(t, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(other), ""); r.status != http.StatusNotFound {
		t.Fatalf("another client's transaction: %d", r.status)
	}
	// An unknown id answers like another page's: nothing tells a page which ids exist.
	if r := call(t, "POST", "/v1/api/web/transactions/00000000-0000-4000-8000-000000000000/capture", headers{"Origin": shopOrigin}, ""); r.status != http.StatusForbidden {
		t.Fatalf("unknown transaction: %d", r.status)
	}
	for _, body := range []string{`{"serviceCode":"STUCK_PLUS","metadataId":"x"}`, `{"serviceCode":"NOPE","metadataId":"x"}`, `{"serviceCode":"VERIFY","metadataId":""}`} {
		if r := call(t, "POST", "/v1/api/opportunity", keyOf(c), body); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, r.status, r.raw)
		}
	}
}

// TestStuckPlus: a captured number is listed masked, revealed only to an ADMIN key with a
// reason, charged on the first reveal, and every reveal is audited.
func TestStuckPlus(t *testing.T) {
	c := newClient(t, 20, "--features", "STUCK_PLUS,SANDBOX")
	allowShop(t, c)
	var tr transaction
	ok(t, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"STUCK_PLUS","metadataId":"lead-7"}`).decode(t, &tr)
	n := nextNumber()
	r := call(t, "POST", "/v1/api/web/transactions/"+tr.TransactionID+"/capture", headers{sandboxHeader: n, "Origin": shopOrigin}, "")
	if r.status != http.StatusOK || strings.Contains(string(r.raw), n[1:]) {
		t.Fatalf("capture: %d %s", r.status, r.raw)
	}
	var resolved transaction
	ok(t, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "").decode(t, &resolved)
	if resolved.Status != "CAPTURED" || resolved.StuckPlusSessionID == nil || resolved.EncryptedMobileNumber != nil {
		t.Fatalf("resolved %+v", resolved)
	}
	sessionID := *resolved.StuckPlusSessionID
	var list struct {
		Items []struct {
			ID                 string  `json:"id"`
			MetadataID         string  `json:"metadataId"`
			MobileNumberMasked string  `json:"mobileNumberMasked"`
			RevealedAt         *string `json:"revealedAt"`
		} `json:"items"`
	}
	lr := ok(t, "GET", "/v1/api/me/stuck-plus/sessions", meOf(c), "")
	lr.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != sessionID || list.Items[0].MobileNumberMasked != n[:6]+"*****"+n[len(n)-2:] ||
		strings.Contains(string(lr.raw), n[1:]) || list.Items[0].RevealedAt != nil {
		t.Fatalf("sessions %s", lr.raw)
	}

	var member struct {
		APIKey string `json:"apiKey"`
	}
	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"support","role":"MEMBER"}`).decode(t, &member)
	reveal := "/v1/api/me/stuck-plus/sessions/" + sessionID + "/reveal"
	reason := `{"reason":"customer called support, ticket 123"}`
	if r := call(t, "POST", reveal, headers{"X-Api-Key": member.APIKey}, reason); r.status != http.StatusForbidden {
		t.Fatalf("MEMBER reveal: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", reveal, meOf(c), `{"reason":"too short"}`); r.status != http.StatusBadRequest || r.code() != "INVALID_ARGUMENT" {
		t.Fatalf("short reason: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", reveal, meOf(c), `{"reason":"`+strings.Repeat("x", 501)+`"}`); r.status != http.StatusBadRequest {
		t.Fatalf("long reason: %d %s", r.status, r.raw)
	}
	var first, second struct {
		SessionID    string `json:"sessionId"`
		MobileNumber string `json:"mobileNumber"`
		RevealedAt   string `json:"revealedAt"`
		Charged      int64  `json:"charged"`
	}
	ok(t, "POST", reveal, meOf(c), reason).decode(t, &first)
	ok(t, "POST", reveal, meOf(c), `{"reason":"checked again for the same ticket"}`).decode(t, &second)
	if first.MobileNumber != n || first.Charged != 5 || second.MobileNumber != n || second.Charged != 0 {
		t.Fatalf("reveals %+v / %+v", first, second)
	}
	if b := balanceOf(t, suite, c); b != 15 {
		t.Fatalf("balance %d, want 15 (the first reveal costs 5)", b)
	}
	var audit struct {
		Items []struct {
			SessionID string `json:"sessionId"`
			KeyID     string `json:"keyId"`
			Reason    string `json:"reason"`
			Charged   int64  `json:"charged"`
		} `json:"items"`
		TotalItems int `json:"totalItems"`
	}
	ok(t, "GET", "/v1/api/me/stuck-plus/reveals", meOf(c), "").decode(t, &audit)
	if audit.TotalItems != 2 || audit.Items[1].Reason != "customer called support, ticket 123" || audit.Items[1].Charged != 5 ||
		audit.Items[0].KeyID == "" || audit.Items[0].SessionID != sessionID {
		t.Fatalf("audit %+v", audit)
	}
	if r := call(t, "GET", "/v1/api/me/stuck-plus/reveals", headers{"X-Api-Key": member.APIKey}, ""); r.status != http.StatusForbidden {
		t.Fatalf("MEMBER reads the audit: %d", r.status)
	}
	other := newClient(t, 20, "--features", "STUCK_PLUS,SANDBOX")
	if r := call(t, "POST", reveal, meOf(other), reason); r.status != http.StatusNotFound {
		t.Fatalf("another client's session: %d %s", r.status, r.raw)
	}
	// Captured, stored, listed and revealed: the number is in no log.
	for _, name := range []string{"gateway", "verification", "accounts"} {
		if strings.Contains(suite.Logs(name), n[1:]) {
			t.Errorf("the %s log holds the full number", name)
		}
	}
}

// TestAbuseLimits runs its own suite with low limits and short sessions.
func TestAbuseLimits(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{Env: []string{
		"MNV_CLIENT_RATE=5", "MNV_CLIENT_BURST=5", "MNV_NUMBER_ATTEMPTS_PER_HOUR=2", "MNV_SESSION_TTL=1s",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	newSuiteClient := func() harness.Client {
		c, err := s.CreateClient(context.Background(), 100, "--features", "VERIFY,SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("expired blob", func(t *testing.T) {
		c := newSuiteClient()
		n := nextNumber()
		blob := *openSession(t, s, c, sdkToken(t, s, c), headers{sandboxHeader: n}).EncryptedMobileNumber
		time.Sleep(1100 * time.Millisecond)
		r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, blob))
		var v verification
		r.decode(t, &v)
		if r.status != http.StatusOK || v.Status != "EXPIRED" || v.Charged != 0 || v.Reason != "SESSION_EXPIRED" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("per number", func(t *testing.T) {
		c := newSuiteClient()
		token := sdkToken(t, s, c)
		n := nextNumber()
		for i := range 3 {
			time.Sleep(250 * time.Millisecond) // stay under the client rate
			blob := *openSession(t, s, c, token, headers{sandboxHeader: n}).EncryptedMobileNumber
			r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, blob))
			if i < 2 && r.status != http.StatusOK {
				t.Fatalf("attempt %d: %d %s", i+1, r.status, r.raw)
			}
			if i == 2 && (r.status != http.StatusTooManyRequests || r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") == "") {
				t.Fatalf("attempt 3: %d %s %v", r.status, r.raw, r.header)
			}
			if i == 2 {
				// Again when the first attempt is an hour old, and nothing kept of this one.
				if after, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || after < 3500 || after > 3600 {
					t.Errorf("attempt 3: Retry-After %q, want about an hour", r.header.Get("Retry-After"))
				}
				var kept struct {
					TotalItems int `json:"totalItems"`
				}
				if r := callSuite(t, s, "GET", "/v1/api/verifications?size=10", keyOf(c), ""); r.status != http.StatusOK {
					t.Fatalf("list: %d %s", r.status, r.raw)
				} else if r.decode(t, &kept); kept.TotalItems != 2 {
					t.Errorf("%d verifications kept after the limited attempt, want the 2 before it", kept.TotalItems)
				}
			}
		}
		// The limit is the client's own: another client still verifies the number (no client
		// can lock a number out for the others).
		other := newSuiteClient()
		blob := *openSession(t, s, other, sdkToken(t, s, other), headers{sandboxHeader: n}).EncryptedMobileNumber
		if r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(other), verifyBody(n, blob)); r.status != http.StatusOK {
			t.Fatalf("another client's verify of the limited number: %d %s", r.status, r.raw)
		}
	})
	t.Run("per client", func(t *testing.T) {
		c := newSuiteClient()
		var limited response
		for range 20 {
			if r := callSuite(t, s, "GET", "/v1/api/operators", keyOf(c), ""); r.status == http.StatusTooManyRequests {
				limited = r
				break
			}
		}
		if limited.status != http.StatusTooManyRequests || limited.header.Get("Retry-After") != "1" {
			t.Fatalf("20 quick requests were not limited: %d %v", limited.status, limited.header)
		}
		// Another client is not affected.
		if r := callSuite(t, s, "GET", "/v1/api/operators", keyOf(newSuiteClient()), ""); r.status != http.StatusOK {
			t.Fatalf("another client: %d", r.status)
		}
	})
}
