package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// The webhook scenarios of issue 13 run the real binaries and a reference receiver
// (tests/webhooks/receiver) that verifies every delivery with the Standard Webhooks npm
// library. Each runs its own suite, so its delivery settings and its kills meet no other test.

// webhookEnv makes deliveries and their retries quick enough for a test, and the balance checks
// frequent. Every process gets it; each reads its own.
var webhookEnv = []string{
	"MNV_WEBHOOK_BACKOFF=100ms", "MNV_WEBHOOK_MAX_ATTEMPTS=8", "MNV_WEBHOOK_DISABLE_AFTER=1h",
	// Receivers listen on 127.0.0.1 over plain http; the harness already allows 127.0.0.1/32
	// (MNV_WEBHOOK_ALLOWED_NETS) for connect.
	"MNV_WEBHOOK_ALLOW_HTTP=true",
	// balance.expiring: an expiry within a week is announced; the accounts check runs every
	// second instead of every minute.
	"MNV_BALANCE_EXPIRY_NOTICE=168h", "MNV_BALANCE_EXPIRY_CHECK_EVERY=1s",
	// Integration batches give up within seconds (integration.delivery_failed).
	"MNV_DELIVERY_BACKOFF=10ms",
	// A killed connect's in-flight deliveries are rescued within a minute, not two: the
	// longest attempt is then 5s + 30s.
	"MNV_WEBHOOK_TIMEOUT=5s", "MNV_JOBS_RESCUE_AFTER=40s",
}

// webhookSuite starts a suite with webhookEnv (and the main suite's lifted abuse limits), and
// extra settings, which win. It stops with the test.
func webhookSuite(t *testing.T, extra ...string) *harness.Suite {
	t.Helper()
	return ownSuite(t, harness.Options{Env: append(append(append([]string{}, mainEnv...), webhookEnv...), extra...)})
}

// ownSuite starts a suite of the test's own with opts. It stops with the test, which names its
// logs when it failed.
func ownSuite(t *testing.T, opts harness.Options) *harness.Suite {
	t.Helper()
	s, err := harness.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs are in %s", s.LogDir)
		}
		s.Stop()
	})
	return s
}

// endpoint is a webhook endpoint as the API answers it; Secret only in the create answer.
type endpoint struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	Description    string   `json:"description"`
	Enabled        bool     `json:"enabled"`
	DisabledReason *string  `json:"disabledReason"`
	FailingSince   *string  `json:"failingSince"`
	Secret         string   `json:"secret"`
}

type attemptEntry struct {
	Attempt    int     `json:"attempt"`
	HTTPStatus *int    `json:"httpStatus"`
	DurationMs int64   `json:"durationMs"`
	Error      *string `json:"error"`
}

type webhookDelivery struct {
	ID             string         `json:"id"`
	EventID        string         `json:"eventId"`
	EventType      string         `json:"eventType"`
	Status         string         `json:"status"`
	Attempts       int            `json:"attempts"`
	LastHTTPStatus *int           `json:"lastHttpStatus"`
	LastError      *string        `json:"lastError"`
	AttemptLog     []attemptEntry `json:"attemptLog"`
}

// expect calls s and fails the test unless the answer has status want.
func expect(t *testing.T, s *harness.Suite, want int, method, path string, h headers, body string) response {
	t.Helper()
	r := callSuite(t, s, method, path, h, body)
	if r.status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.raw, want)
	}
	return r
}

// createEndpoint makes an endpoint of c for url, subscribed to events (all when none).
func createEndpoint(t *testing.T, s *harness.Suite, c harness.Client, url string, events ...string) endpoint {
	t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	b, _ := json.Marshal(map[string]any{"url": url, "events": events, "description": "e2e receiver"})
	var ep endpoint
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks", meOf(c), string(b)).decode(t, &ep)
	if ep.ID == "" || ep.URL != url || !ep.Enabled || !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("created endpoint %+v", ep)
	}
	return ep
}

// hook gives c an endpoint at the receiver's path, and configures that path (cfg's other
// settings) to verify with the endpoint's secret.
func hook(t *testing.T, s *harness.Suite, rc *harness.Receiver, c harness.Client, path string, cfg harness.ReceiverConfig) endpoint {
	t.Helper()
	ep := createEndpoint(t, s, c, rc.URL(path))
	cfg.Path, cfg.Secrets = path, []string{ep.Secret}
	rc.Configure(cfg)
	return ep
}

// received is a verified delivery with its event decoded.
type received struct {
	harness.Received
	event harness.Event
}

// verifiedEvents returns the deliveries at path that the reference library verified, and fails
// the test on any it did not: every delivery mnv sends must verify.
func verifiedEvents(t *testing.T, recs []harness.Received) []received {
	t.Helper()
	var out []received
	for _, rec := range recs {
		if !rec.Verified() {
			t.Fatalf("a delivery did not verify with the reference library: %s", harness.Summary([]harness.Received{rec}))
		}
		e, err := rec.Event()
		if err != nil {
			t.Fatal(err)
		}
		if e.ID != rec.WebhookID || !strings.HasPrefix(e.ID, "evt_") {
			t.Fatalf("webhook-id %q, event id %q: the id a receiver deduplicates on must be the event's", rec.WebhookID, e.ID)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", e.CreatedAt); err != nil {
			t.Fatalf("createdAt %q: %v", e.CreatedAt, err)
		}
		if len(e.Data) == 0 || e.Data[0] != '{' {
			t.Fatalf("data %s is not an object", e.Data)
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal([]byte(rec.RawBody), &all); err != nil || len(all) != 4 {
			t.Fatalf("body %s: want exactly id, type, createdAt, data", rec.RawBody)
		}
		if err := harness.ValidateEvent(rec.RawBody); err != nil {
			t.Fatalf("event %s does not match docs/events.schema.json: %v", rec.RawBody, err)
		}
		out = append(out, received{rec, e})
	}
	return out
}

// awaitEvent waits for a verified delivery at path of an event of type typ whose data match
// accepts (nil: any), and decodes its data into data.
func awaitEvent(t *testing.T, rc *harness.Receiver, path, typ string, within time.Duration, data any, match func(json.RawMessage) bool) received {
	t.Helper()
	var found *received
	rc.Await(path, within, "a "+typ+" event", func(recs []harness.Received) bool {
		for _, r := range verifiedEvents(t, recs) {
			if r.event.Type == typ && (match == nil || match(r.event.Data)) {
				found = &r
				return true
			}
		}
		return false
	})
	if data != nil {
		if err := json.Unmarshal(found.event.Data, data); err != nil {
			t.Fatalf("%s data %s: %v", typ, found.event.Data, err)
		}
	}
	return *found
}

// field reports whether data has key with value want (compared as JSON text of a string).
func field(key, want string) func(json.RawMessage) bool {
	return func(data json.RawMessage) bool {
		var m map[string]any
		return json.Unmarshal(data, &m) == nil && fmt.Sprint(m[key]) == want
	}
}

func masked(n string) string { return n[:6] + "*****" + n[len(n)-2:] }

// lowBalanceThreshold sets c's balance.low threshold as the operator does.
// ASSUMPTION for the lead (issue 13, H3): the mnvctl command and flag.
func lowBalanceThreshold(t *testing.T, s *harness.Suite, c harness.Client, threshold int64) {
	t.Helper()
	if out, err := s.Mnvctl(context.Background(), "client", "low-balance", c.ID, fmt.Sprint(threshold)); err != nil {
		t.Fatalf("set the low-balance threshold: %v %s", err, out)
	}
}

// TestWebhookEventTypes: every event type reaches a client's endpoint, signed so that the
// Standard Webhooks reference library verifies it, with the data its fact says and numbers
// masked. Each type gets its own client, endpoint and receiver path, so nothing else is there.
func TestWebhookEventTypes(t *testing.T) {
	s := webhookSuite(t)
	rc := harness.StartReceiver(t)
	ctx := context.Background()
	const within = 30 * time.Second
	newC := func(t *testing.T, balance int64, features string) harness.Client {
		t.Helper()
		c, err := s.CreateClient(ctx, balance, "--features", features)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("ping", func(t *testing.T) {
		c := newC(t, 0, "VERIFY")
		ep := hook(t, s, rc, c, "/types/ping", harness.ReceiverConfig{})
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+ep.ID+"/test", meOf(c), "")
		var d struct {
			EndpointID string `json:"endpointId"`
		}
		awaitEvent(t, rc, "/types/ping", "ping", within, &d, nil)
		if d.EndpointID != ep.ID {
			t.Fatalf("ping for %q, want %q", d.EndpointID, ep.ID)
		}
	})

	t.Run("verification.completed", func(t *testing.T) {
		c := newC(t, 10, "VERIFY,SANDBOX")
		hook(t, s, rc, c, "/types/verification", harness.ReceiverConfig{})
		n := nextNumber()
		sess := openSession(t, s, c, sdkToken(t, s, c), headers{sandboxHeader: n})
		var v verification
		expect(t, s, http.StatusOK, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)).decode(t, &v)
		var d struct {
			VerificationID string  `json:"verificationId"`
			Status         string  `json:"status"`
			MobileNumber   string  `json:"mobileNumber"`
			SessionID      string  `json:"sessionId"`
			Charged        int64   `json:"charged"`
			BalanceAfter   *int64  `json:"balanceAfter"`
			Reason         *string `json:"reason"`
		}
		rec := awaitEvent(t, rc, "/types/verification", "verification.completed", within, &d, nil)
		if d.VerificationID != v.VerificationID || d.Status != "VERIFIED" || d.SessionID != sess.SessionID || d.Charged != 1 ||
			d.BalanceAfter == nil || *d.BalanceAfter != 9 || d.MobileNumber != masked(n) {
			t.Fatalf("verification.completed %s for %+v", rec.event.Data, v)
		}
		if strings.Contains(rec.RawBody, n[1:]) {
			t.Fatal("the event shows the whole number")
		}
	})

	t.Run("api_key.created, .revoked, .rotated", func(t *testing.T) {
		c := newC(t, 0, "VERIFY")
		hook(t, s, rc, c, "/types/keys", harness.ReceiverConfig{})
		var k struct {
			ID     string `json:"id"`
			APIKey string `json:"apiKey"`
		}
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"hooked reader","role":"MEMBER"}`).decode(t, &k)
		type keyData struct {
			KeyID      string  `json:"keyId"`
			Name       string  `json:"name"`
			Role       string  `json:"role"`
			Hint       string  `json:"hint"`
			ReplacedBy *string `json:"replacedBy"`
			GraceUntil *string `json:"graceUntil"`
		}
		var created keyData
		rec := awaitEvent(t, rc, "/types/keys", "api_key.created", within, &created, field("keyId", k.ID))
		if created.Name != "hooked reader" || created.Role != "MEMBER" || created.Hint == "" || strings.Contains(rec.RawBody, k.APIKey) {
			t.Fatalf("api_key.created %s", rec.event.Data)
		}
		expect(t, s, http.StatusOK, "DELETE", "/v1/api/me/api-keys/"+k.ID, meOf(c), "")
		var revoked keyData
		awaitEvent(t, rc, "/types/keys", "api_key.revoked", within, &revoked, field("keyId", k.ID))

		var rot struct {
			NewAPIKey string `json:"newApiKey"`
		}
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/api-key/rotate", meOf(c),
			`{"secretKey":"`+c.Secret+`","oldKeyGraceSeconds":3600}`).decode(t, &rot)
		var rotated keyData
		rec = awaitEvent(t, rc, "/types/keys", "api_key.rotated", within, &rotated, nil)
		if rotated.ReplacedBy == nil || *rotated.ReplacedBy == rotated.KeyID || rotated.GraceUntil == nil ||
			strings.Contains(rec.RawBody, rot.NewAPIKey) || strings.Contains(rec.RawBody, c.APIKey) {
			t.Fatalf("api_key.rotated %s", rec.event.Data)
		}
	})

	t.Run("balance.low", func(t *testing.T) {
		c := newC(t, 3, "VERIFY,SANDBOX")
		hook(t, s, rc, c, "/types/low", harness.ReceiverConfig{})
		lowBalanceThreshold(t, s, c, 2)
		token := sdkToken(t, s, c)
		for range 3 { // 3 → 2 → 1 (crossing) → 0: one event, for the one crossing
			if !verifyOnce(s, c, token) {
				t.Fatal("a verify failed")
			}
		}
		var d struct {
			Balance   int64 `json:"balance"`
			Threshold int64 `json:"threshold"`
		}
		awaitEvent(t, rc, "/types/low", "balance.low", within, &d, nil)
		if d.Balance != 1 || d.Threshold != 2 {
			t.Fatalf("balance.low %+v, want balance 1 under threshold 2", d)
		}
		// A later look shows it was sent once per crossing.
		time.Sleep(time.Second)
		lows := 0
		for _, r := range verifiedEvents(t, rc.Received("/types/low")) {
			if r.event.Type == "balance.low" {
				lows++
			}
		}
		if lows != 1 {
			t.Fatalf("%d balance.low deliveries for one crossing", lows)
		}
	})

	t.Run("balance.expiring and balance.expired", func(t *testing.T) {
		c := newC(t, 5, "VERIFY")
		hook(t, s, rc, c, "/types/expiry", harness.ReceiverConfig{})
		// The expiry is set after the endpoint exists (0 credits: only the expiry moves): within
		// the notice at once, past it seconds later.
		if out, err := s.Mnvctl(ctx, "client", "top-up", c.ID, "--amount", "0", "--expires-in", "4s"); err != nil {
			t.Fatalf("top-up: %v %s", err, out)
		}
		var expiring struct {
			Balance   int64  `json:"balance"`
			ExpiresAt string `json:"expiresAt"`
		}
		awaitEvent(t, rc, "/types/expiry", "balance.expiring", within, &expiring, nil)
		if expiring.Balance != 5 || expiring.ExpiresAt == "" {
			t.Fatalf("balance.expiring %+v", expiring)
		}
		var expired struct {
			Balance   int64  `json:"balance"`
			ExpiredAt string `json:"expiredAt"`
		}
		awaitEvent(t, rc, "/types/expiry", "balance.expired", within, &expired, nil)
		if expired.ExpiredAt != expiring.ExpiresAt {
			t.Fatalf("expired at %q, announced for %q", expired.ExpiredAt, expiring.ExpiresAt)
		}
	})

	t.Run("import.completed and import.failed", func(t *testing.T) {
		c := newC(t, 0, "CONNECT")
		hook(t, s, rc, c, "/types/import", harness.ReceiverConfig{})
		csv := "mobileNumber,externalId\n" + nextNumber() + ",i-1\n" + nextNumber() + ",i-2\n"
		done := waitJob(t, s, c, upload(t, s, c, "two.csv", []byte(csv)).ID)
		failed := waitJob(t, s, c, upload(t, s, c, "photo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")).ID)
		if done.Status != "COMPLETED" || failed.Status != "FAILED" {
			t.Fatalf("imports %s and %s", done.Status, failed.Status)
		}
		type importData struct {
			ImportID       string  `json:"importId"`
			Status         string  `json:"status"`
			CreatedRecords int64   `json:"createdRecords"`
			Error          *string `json:"error"`
		}
		var ok, bad importData
		awaitEvent(t, rc, "/types/import", "import.completed", within, &ok, field("importId", done.ID))
		awaitEvent(t, rc, "/types/import", "import.failed", within, &bad, field("importId", failed.ID))
		if ok.Status != "COMPLETED" || ok.CreatedRecords != 2 || bad.Status != "FAILED" || bad.Error == nil || *bad.Error == "" {
			t.Fatalf("import events %+v, %+v", ok, bad)
		}
	})

	t.Run("stuck_plus.captured", func(t *testing.T) {
		c := newC(t, 10, "STUCK_PLUS,SANDBOX")
		hook(t, s, rc, c, "/types/stuck", harness.ReceiverConfig{})
		var tr transaction
		expect(t, s, http.StatusOK, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"STUCK_PLUS","metadataId":"hooked"}`).decode(t, &tr)
		allowShopOn(t, s, c)
		n := nextNumber()
		expect(t, s, http.StatusOK, "POST", "/v1/api/web/transactions/"+tr.TransactionID+"/capture", headers{sandboxHeader: n, "Origin": shopOrigin}, "")
		expect(t, s, http.StatusOK, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "").decode(t, &tr)
		if tr.StuckPlusSessionID == nil {
			t.Fatalf("no stuck-plus session: %+v", tr)
		}
		var d struct {
			SessionID    string `json:"sessionId"`
			MobileNumber string `json:"mobileNumber"`
			OperatorCode string `json:"operatorCode"`
		}
		rec := awaitEvent(t, rc, "/types/stuck", "stuck_plus.captured", within, &d, nil)
		if d.SessionID != *tr.StuckPlusSessionID || d.MobileNumber != masked(n) || strings.Contains(rec.RawBody, n[1:]) {
			t.Fatalf("stuck_plus.captured %s", rec.event.Data)
		}
	})

	t.Run("integration.delivery_failed", func(t *testing.T) {
		c := newC(t, 0, "CONNECT")
		hook(t, s, rc, c, "/types/integration", harness.ReceiverConfig{})
		// The CRM's path verifies with no secret, so it answers every batch 400: a permanent
		// failure, given up at once or after quick retries (MNV_DELIVERY_BACKOFF).
		rc.Configure(harness.ReceiverConfig{Path: "/crm/refuses"})
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+nextNumber()+`","externalId":"f-1"}`)
		var it struct {
			ID string `json:"id"`
		}
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/connect/integrations", meOf(c), `{"displayName":"CRM","integrationType":"WEBHOOK",`+
			`"endpointUrl":"`+rc.URL("/crm/refuses")+`","httpMethod":"POST","triggerEvent":"MANUAL","fieldMappings":{"externalId":"id"},"batchSize":10}`).decode(t, &it)
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/connect/integrations/"+it.ID+"/sync", meOf(c), "")
		var d struct {
			IntegrationID string  `json:"integrationId"`
			DeliveryID    string  `json:"deliveryId"`
			Attempts      int     `json:"attempts"`
			Records       int     `json:"records"`
			LastStatus    *int    `json:"lastStatus"`
			LastError     *string `json:"lastError"`
		}
		awaitEvent(t, rc, "/types/integration", "integration.delivery_failed", 90*time.Second, &d, nil)
		crm := rc.Received("/crm/refuses")
		if d.IntegrationID != it.ID || d.DeliveryID == "" || d.Records != 1 || d.Attempts < 1 || d.Attempts != len(crm) ||
			d.LastStatus == nil || *d.LastStatus != http.StatusBadRequest {
			t.Fatalf("integration.delivery_failed %+v after %d attempts at the CRM", d, len(crm))
		}
	})
}

// TestWebhookEndpointDisabled: an endpoint failing for longer than MNV_WEBHOOK_DISABLE_AFTER is
// disabled, says why, and the client's other endpoint gets webhook_endpoint.disabled.
func TestWebhookEndpointDisabled(t *testing.T) {
	s := webhookSuite(t, "MNV_WEBHOOK_DISABLE_AFTER=1s", "MNV_WEBHOOK_MAX_ATTEMPTS=25")
	rc := harness.StartReceiver(t)
	c, err := s.CreateClient(context.Background(), 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	failing := hook(t, s, rc, c, "/disabled/failing", harness.ReceiverConfig{FailFirst: 1 << 30, Status: 503})
	hook(t, s, rc, c, "/disabled/other", harness.ReceiverConfig{})
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+failing.ID+"/test", meOf(c), "")

	var d struct {
		EndpointID   string `json:"endpointId"`
		FailingSince string `json:"failingSince"`
	}
	awaitEvent(t, rc, "/disabled/other", "webhook_endpoint.disabled", 60*time.Second, &d, nil)
	if d.EndpointID != failing.ID || d.FailingSince == "" {
		t.Fatalf("webhook_endpoint.disabled %+v", d)
	}
	var got endpoint
	expect(t, s, http.StatusOK, "GET", "/v1/api/me/webhooks/"+failing.ID, meOf(c), "").decode(t, &got)
	if got.Enabled || got.DisabledReason == nil || *got.DisabledReason == "" || got.Secret != "" {
		t.Fatalf("the failing endpoint after it was disabled: %+v", got)
	}
	// Every attempt at the failing path was a verified delivery of the one ping, refused by the
	// receiver: the endpoint was disabled for its answers, not for a bad signature.
	recs := verifiedEvents(t, rc.Received("/disabled/failing"))
	if len(recs) < 2 {
		t.Fatalf("%d attempts before the endpoint was disabled", len(recs))
	}
	for _, r := range recs {
		if r.WebhookID != recs[0].WebhookID || r.event.Type != "ping" {
			t.Fatalf("attempts %s", harness.Summary(rc.Received("/disabled/failing")))
		}
	}
	// A disabled endpoint gets nothing more: a new ping is refused or never sent.
	n := len(rc.Received("/disabled/failing"))
	time.Sleep(time.Second)
	if r := callSuite(t, s, "POST", "/v1/api/me/webhooks/"+failing.ID+"/test", meOf(c), ""); r.status == http.StatusOK {
		time.Sleep(time.Second)
	}
	if after := len(rc.Received("/disabled/failing")); after != n {
		t.Fatalf("the disabled endpoint got %d more attempts", after-n)
	}
}

// TestWebhookAtLeastOnce: a receiver that fails twice then succeeds gets the same webhook-id
// three times, each verified; the delivery log shows the three attempts; a redelivery sends the
// same id again.
func TestWebhookAtLeastOnce(t *testing.T) {
	s := webhookSuite(t)
	rc := harness.StartReceiver(t)
	c, err := s.CreateClient(context.Background(), 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	ep := hook(t, s, rc, c, "/flaky", harness.ReceiverConfig{FailFirst: 2, Status: 500})
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+ep.ID+"/test", meOf(c), "")
	recs := rc.Await("/flaky", 30*time.Second, "three attempts", func(r []harness.Received) bool { return len(r) >= 3 })
	got := verifiedEvents(t, recs)
	if len(got) != 3 {
		t.Fatalf("%s", harness.Summary(recs))
	}
	for i, r := range got {
		if r.WebhookID != got[0].WebhookID || r.Attempt != i+1 || r.RawBody != got[0].RawBody {
			t.Fatalf("attempt %d differs from the first: %s", i+1, harness.Summary(recs))
		}
	}

	var log struct {
		Items []webhookDelivery `json:"items"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		expect(t, s, http.StatusOK, "GET", "/v1/api/me/webhooks/"+ep.ID+"/deliveries?status=SUCCEEDED", meOf(c), "").decode(t, &log)
		if len(log.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log %+v", log.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dl := log.Items[0]
	if dl.EventID != got[0].WebhookID || dl.EventType != "ping" || dl.Status != "SUCCEEDED" || dl.Attempts != 3 ||
		dl.LastHTTPStatus == nil || *dl.LastHTTPStatus != 200 || len(dl.AttemptLog) != 3 {
		t.Fatalf("delivery %+v", dl)
	}
	for i, a := range dl.AttemptLog {
		want := 500
		if i == 2 {
			want = 200
		}
		if a.HTTPStatus == nil || *a.HTTPStatus != want {
			t.Fatalf("attempt log %+v", dl.AttemptLog)
		}
	}
	expect(t, s, http.StatusOK, "GET", "/v1/api/me/webhooks/"+ep.ID+"/deliveries?status=FAILED", meOf(c), "").decode(t, &log)
	if len(log.Items) != 0 {
		t.Fatalf("FAILED filter shows %+v", log.Items)
	}

	// Redelivery sends the same event under the same webhook-id, a fourth attempt.
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/deliveries/"+dl.ID+"/redeliver", meOf(c), "")
	recs = rc.Await("/flaky", 30*time.Second, "the redelivery", func(r []harness.Received) bool { return len(r) >= 4 })
	if again := verifiedEvents(t, recs)[3]; again.WebhookID != got[0].WebhookID || again.Attempt != 4 {
		t.Fatalf("redelivery %s", harness.Summary(recs))
	}
	// Another client cannot read or redeliver it.
	other, err := s.CreateClient(context.Background(), 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, s, http.StatusNotFound, "GET", "/v1/api/me/webhooks/"+ep.ID+"/deliveries", meOf(other), "")
	expect(t, s, http.StatusNotFound, "POST", "/v1/api/me/webhooks/deliveries/"+dl.ID+"/redeliver", meOf(other), "")
}

// TestWebhookKillMidBacklog: connect is killed with SIGKILL while a slow endpoint has a backlog
// of events, some forwarded from accounts; after a restart every event arrives (at least once,
// each verified).
func TestWebhookKillMidBacklog(t *testing.T) {
	s := webhookSuite(t)
	rc := harness.StartReceiver(t)
	c, err := s.CreateClient(context.Background(), 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	ep := hook(t, s, rc, c, "/backlog", harness.ReceiverConfig{DelayMs: 300})
	const pings, keys = 20, 10
	for range pings {
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+ep.ID+"/test", meOf(c), "")
	}
	wantKeys := map[string]bool{}
	for i := range keys {
		var k struct {
			ID string `json:"id"`
		}
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/api-keys", meOf(c), fmt.Sprintf(`{"name":"backlog %d","role":"MEMBER"}`, i)).decode(t, &k)
		wantKeys[k.ID] = true
	}
	rc.Await("/backlog", 30*time.Second, "the first deliveries", func(r []harness.Received) bool { return len(r) >= 3 })
	if err := s.Kill("connect", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := len(rc.Received("/backlog"))
	if before >= pings+keys {
		t.Fatalf("the backlog was gone before the kill (%d deliveries): nothing was tested", before)
	}
	if err := s.Restart("connect"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pingIDs, keyIDs := map[string]bool{}, map[string]bool{}
	rc.Await("/backlog", 90*time.Second, "every event after the restart", func(recs []harness.Received) bool {
		for _, r := range verifiedEvents(t, recs) {
			switch r.event.Type {
			case "ping":
				pingIDs[r.WebhookID] = true
			case "api_key.created":
				var d struct {
					KeyID string `json:"keyId"`
				}
				_ = json.Unmarshal(r.event.Data, &d)
				keyIDs[d.KeyID] = true
			}
		}
		return len(pingIDs) == pings && len(keyIDs) == keys
	})
	for id := range keyIDs {
		if !wantKeys[id] {
			t.Fatalf("api_key.created for a key never made: %s", id)
		}
	}
}

// TestWebhookSlowEndpointIsolation: client A's endpoint holds every answer for seconds and has
// a backlog; client B's event arrives while A's backlog is still there. Few workers and a low
// per-endpoint limit make A able to starve B if fairness were missing.
func TestWebhookSlowEndpointIsolation(t *testing.T) {
	s := webhookSuite(t, "MNV_WEBHOOK_WORKERS=4", "MNV_WEBHOOK_PER_ENDPOINT=2")
	rc := harness.StartReceiver(t)
	ctx := context.Background()
	a, err := s.CreateClient(ctx, 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateClient(ctx, 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	const slow = 12
	epA := hook(t, s, rc, a, "/slow/a", harness.ReceiverConfig{DelayMs: 3000})
	epB := hook(t, s, rc, b, "/fast/b", harness.ReceiverConfig{})
	for range slow {
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+epA.ID+"/test", meOf(a), "")
	}
	// A is now busy: its first answers are being held.
	rc.Await("/slow/a", 30*time.Second, "A's first deliveries", func(r []harness.Received) bool { return len(r) >= 1 })
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+epB.ID+"/test", meOf(b), "")
	rc.Await("/fast/b", 30*time.Second, "B's ping", func(r []harness.Received) bool { return len(verifiedEvents(t, r)) == 1 })
	if n := len(rc.Received("/slow/a")); n >= slow {
		t.Fatalf("A's whole backlog (%d) arrived before B's one event: B waited behind A", n)
	}
}

// TestWebhookSecretRotation: during a rotation's overlap every delivery carries signatures with
// both secrets, so a receiver that knows only the old one and one that knows only the new one
// both verify; after the overlap only the new one does.
func TestWebhookSecretRotation(t *testing.T) {
	s := webhookSuite(t)
	rc := harness.StartReceiver(t)
	c, err := s.CreateClient(context.Background(), 0, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	ep := createEndpoint(t, s, c, rc.URL("/rotation/old"))
	old := ep.Secret
	rc.Configure(harness.ReceiverConfig{Path: "/rotation/old", Secrets: []string{old}})

	const overlap = 15 * time.Second
	var rot struct {
		Secret                  string `json:"secret"`
		PreviousSecretExpiresAt string `json:"previousSecretExpiresAt"`
	}
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+ep.ID+"/rotate-secret", meOf(c),
		fmt.Sprintf(`{"overlapSeconds":%d}`, int(overlap.Seconds()))).decode(t, &rot)
	rotatedAt := time.Now()
	until, err := time.Parse(time.RFC3339, rot.PreviousSecretExpiresAt)
	if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == old || err != nil {
		t.Fatalf("rotation answer %+v (%v)", rot, err)
	}
	if d := until.Sub(rotatedAt); d < overlap-5*time.Second || d > overlap+5*time.Second {
		t.Fatalf("the old secret expires %s after the rotation, want about %s", d, overlap)
	}
	rc.Configure(harness.ReceiverConfig{Path: "/rotation/new", Secrets: []string{rot.Secret}})
	rc.Configure(harness.ReceiverConfig{Path: "/rotation/old-after", Secrets: []string{old}})
	rc.Configure(harness.ReceiverConfig{Path: "/rotation/new-after", Secrets: []string{rot.Secret}})
	var got endpoint
	if r := expect(t, s, http.StatusOK, "GET", "/v1/api/me/webhooks/"+ep.ID, meOf(c), ""); strings.Contains(string(r.raw), rot.Secret) ||
		strings.Contains(string(r.raw), old) {
		t.Fatalf("the endpoint's answer shows a secret: %s", r.raw)
	}

	// ping sends a test to path (the endpoint moved there) and returns its verified delivery,
	// or the unverified attempt when wantVerified is false.
	ping := func(path string, wantVerified bool) harness.Received {
		t.Helper()
		expect(t, s, http.StatusOK, "PATCH", "/v1/api/me/webhooks/"+ep.ID, meOf(c), `{"url":"`+rc.URL(path)+`"}`).decode(t, &got)
		if got.URL != rc.URL(path) {
			t.Fatalf("moved endpoint %+v", got)
		}
		expect(t, s, http.StatusOK, "POST", "/v1/api/me/webhooks/"+ep.ID+"/test", meOf(c), "")
		recs := rc.Await(path, 30*time.Second, "the ping at "+path, func(r []harness.Received) bool { return len(r) >= 1 })
		if recs[0].Verified() != wantVerified {
			t.Fatalf("at %s: %s, want verified=%v", path, harness.Summary(recs), wantVerified)
		}
		return recs[0]
	}
	for _, path := range []string{"/rotation/old", "/rotation/new"} {
		r := ping(path, true)
		if n := len(strings.Fields(r.SignatureHeader)); n != 2 {
			t.Fatalf("%d signatures during the overlap, want one per secret: %q", n, r.SignatureHeader)
		}
	}
	if time.Since(rotatedAt) >= overlap {
		t.Fatalf("the overlap ended before both receivers were tried (%s): raise it", time.Since(rotatedAt))
	}

	time.Sleep(time.Until(until) + time.Second)
	if r := ping("/rotation/new-after", true); len(strings.Fields(r.SignatureHeader)) != 1 {
		t.Fatalf("signatures after the overlap: %q", r.SignatureHeader)
	}
	if r := ping("/rotation/old-after", false); r.Error == nil {
		t.Fatalf("the old secret still verifies after the overlap: %+v", r)
	}
	// Only the ADMIN of the client rotates: a MEMBER key is refused.
	var member struct {
		APIKey string `json:"apiKey"`
	}
	expect(t, s, http.StatusOK, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"reader","role":"MEMBER"}`).decode(t, &member)
	expect(t, s, http.StatusForbidden, "POST", "/v1/api/me/webhooks/"+ep.ID+"/rotate-secret", headers{"X-Api-Key": member.APIKey}, `{}`)
}
