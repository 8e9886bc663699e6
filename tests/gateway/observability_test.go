package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/tracing"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// full is every service and the gateway over real sockets, with each one's registry at hand.
type full struct {
	*stack
	ver     *verificationtest.Server
	con     *connecttest.Server
	gateway *prometheus.Registry
	logs    *observer.ObservedLogs // the gateway's log
}

func startFull(t *testing.T) *full {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	f := startWith(t, zap.New(core))
	f.logs = logs
	return f
}

// sdkSession captures a sandbox session for number ("" for a phone no network identified) and
// returns its sealed blob.
func (f *full) sdkSession(t *testing.T, c apptest.Client, token, number string) string {
	t.Helper()
	h := map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID}
	if number != "" {
		h["X-Mnv-Sandbox-Msisdn"] = number
	}
	return f.data(t, call{method: "POST", path: "/v1/api/sdk/session", headers: h, body: `{"platform":"IOS"}`})["encryptedMobileNumber"].(string)
}

func (f *full) verify(t *testing.T, c apptest.Client, number, blob string) answer {
	t.Helper()
	return f.do(t, call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(c),
		body: `{"mobileNumber":"` + number + `","encryptedMobileNumber":"` + blob + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
}

// TestBusinessMetrics drives the real services through the gateway and reads each service's
// registry: verifications by status, the debits behind them, import rows and jobs, deliveries.
func TestBusinessMetrics(t *testing.T) {
	f := startFull(t)
	c := f.accounts.CreateClient(t, 1, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX, accountsv1.Feature_FEATURE_CONNECT)
	token := f.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)

	// Verifications: one charged, one free, one refused for the balance.
	for _, v := range []struct{ captured, given string }{{"+971501234567", "+971501234567"}, {"", "+971501234568"}, {"+971501234569", "+971501234569"}} {
		f.verify(t, c, v.given, f.sdkSession(t, c, token, v.captured))
	}

	// An import of two good rows and a bad one, then a delivery of what it made.
	csv := "mobileNumber,externalId\r\n+971501234567,a\r\n+971501234570,b\r\nnot-a-number,c\r\n"
	req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/api/me/connect/import", strings.NewReader(csv))
	req.Header.Set("X-API-KEY", c.APIKey)
	req.Header.Set("Content-Type", "text/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var job struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &job) != nil {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	waitFor(t, "the import to finish", func() bool {
		return f.data(t, call{method: "GET", path: "/v1/api/me/connect/import/jobs/" + job.Data.ID, headers: meHeaders(c)})["status"] == "COMPLETED"
	})
	var received atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	it := f.data(t, call{method: "POST", path: "/v1/api/me/connect/integrations", headers: meHeaders(c), body: fmt.Sprintf(
		`{"displayName":"CRM","integrationType":"WEBHOOK","endpointUrl":%q,"httpMethod":"POST","triggerEvent":"MANUAL","fieldMappings":{"externalId":"ref"},"batchSize":10}`,
		hook.URL+"/hook")})
	f.data(t, call{method: "POST", path: "/v1/api/me/connect/integrations/" + it["id"].(string) + "/sync", headers: meHeaders(c)})
	waitFor(t, "the delivery", func() bool {
		return metricstest.Sum(metricstest.Gather(t, f.con.Metrics), "mnv_connect_deliveries_total", "status=SUCCEEDED") >= 1
	})

	tests := []struct {
		registry prometheus.Gatherer
		name     string
		match    []string
		want     float64
	}{
		{f.ver.Metrics, "mnv_verification_verifications_total", []string{"status=VERIFIED"}, 1},
		{f.ver.Metrics, "mnv_verification_verifications_total", []string{"status=UNDETERMINED"}, 1},
		{f.ver.Metrics, "mnv_verification_verifications_total", []string{"status=REJECTED"}, 1},
		{f.ver.Metrics, "mnv_verification_verifications_total", []string{"status=NOT_VERIFIED"}, 0},
		{f.ver.Metrics, "mnv_verification_charges_deferred_total", nil, 0},
		{f.accounts.Metrics, "mnv_accounts_debits_total", []string{"kind=VERIFICATION", "outcome=charged"}, 1},
		{f.accounts.Metrics, "mnv_accounts_debits_total", []string{"kind=VERIFICATION", "outcome=insufficient_balance"}, 1},
		{f.con.Metrics, "mnv_connect_import_rows_total", []string{"result=imported"}, 2},
		{f.con.Metrics, "mnv_connect_import_rows_total", []string{"result=failed"}, 1},
		{f.con.Metrics, "mnv_connect_import_jobs_total", []string{"status=COMPLETED"}, 1},
		{f.con.Metrics, "mnv_connect_deliveries_total", []string{"status=SUCCEEDED"}, 1},
		{f.con.Metrics, "mnv_connect_delivered_records_total", nil, 2},
		{f.gateway, "mnv_gateway_http_requests_total", []string{"route=/v1/api/verify", "method=POST", "code=200"}, 2},
		{f.gateway, "mnv_gateway_http_requests_total", []string{"route=/v1/api/verify", "method=POST", "code=402"}, 1},
	}
	for _, tt := range tests {
		if got := metricstest.Sum(metricstest.Gather(t, tt.registry), tt.name, tt.match...); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	if received.Load() != 1 {
		t.Errorf("the receiver got %d deliveries, want 1", received.Load())
	}
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestTracedRequest turns tracing on (an in-memory recorder), sends one verification through the
// gateway, and follows its trace: HTTP edge → accounts (the credential) and verification →
// accounts (the debit) → Postgres, one trace,
// each span the child of the one that caused it; the gateway's access log line names the trace.
func TestTracedRequest(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))))
	f := startFull(t)
	c := f.accounts.CreateClient(t, 5, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	token := f.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)
	blob := f.sdkSession(t, c, token, "+971501234567")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		f.do(t, call{method: "GET", path: path})
	}
	if a := f.verify(t, c, "+971501234567", blob); a.status != http.StatusOK {
		t.Fatalf("verify: %d %s", a.status, a.body)
	}

	const (
		gw  = "POST /v1/api/verify(server)"
		ver = gw + " > mnv.verification.v1.VerificationService/Verify(client) > mnv.verification.v1.VerificationService/Verify(server)"
		deb = ver + " > debit many(internal) > mnv.accounts.v1.AccountsInternalService/DebitMany(client) > mnv.accounts.v1.AccountsInternalService/DebitMany(server) > debit batch(internal)"
	)
	tests := []struct {
		name   string
		prefix string // some span's path starts with it
	}{
		{"the edge calls verification", ver},
		// The client's write just before (its SDK token) emptied the gateway's cache of it.
		{"the edge authenticates the caller with accounts, once", gw + " > mnv.accounts.v1.AccountsInternalService/Authenticate(client) > mnv.accounts.v1.AccountsInternalService/Authenticate(server) > SELECT(client)"},
		{"verification records the verification in its database, in a batch (one statement; one per client on a distributed database)", ver + " > record batch(internal) > batch start(client) > WITH(client)"},
		{"verification settles the charge and writes its jobs in a batch (one statement, or one per client, then the settle queue)", ver + " > settle batch(internal) > batch start(client) > WITH(client)"},
		{"verification debits with accounts in a batch of its own, whose batch writes the ledger", deb + " > batch start(client) > INSERT(client)"},
	}
	// A span is recorded when it ends, and a server's span may end just after its caller got
	// the answer: wait until every expected path is there, or time runs out.
	var (
		edge sdktrace.ReadOnlySpan
		have map[string]bool
	)
	missing := func() []string {
		edge, have = followTrace(spans.Ended(), "POST /v1/api/verify")
		var out []string
		for _, tt := range tests {
			found := false
			for p := range have {
				found = found || strings.HasPrefix(p, tt.prefix)
			}
			if !found {
				out = append(out, tt.name)
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); len(missing()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range missing() {
		t.Errorf("%s: no such span; the trace has:\n%s", name, strings.Join(keysOf(have), "\n"))
	}
	for p := range have {
		if strings.HasPrefix(p, ver+" > mnv.accounts.v1.AccountsInternalService/Authenticate") {
			t.Errorf("verification authenticated the credential again, after the edge: %s", p)
		}
	}
	if edge == nil {
		t.Fatal("no edge span")
	}
	traceID := edge.SpanContext().TraceID()

	t.Run("probes and scrapes are not traced", func(t *testing.T) {
		for _, s := range spans.Ended() {
			if strings.HasPrefix(s.Name(), "GET") || strings.Contains(s.Name(), "grpc.health") {
				t.Errorf("span %q (%s) was recorded", s.Name(), s.SpanKind())
			}
		}
	})

	t.Run("spans hold no browser flow id and no made-up method", func(t *testing.T) {
		// The transaction id in a capture's path is the flow's capability; a made-up method
		// would name a span of its own per request.
		const txID = "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8"
		f.do(t, call{method: "POST", path: "/v1/api/web/transactions/" + txID + "/capture", headers: map[string]string{"Origin": "https://shop.example"}})
		f.do(t, call{method: "FOO123", path: "/v1/api/clients/" + txID})
		var seen int
		for deadline := time.Now().Add(5 * time.Second); seen < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			seen = 0
			for _, s := range spans.Ended() {
				if s.SpanKind() == trace.SpanKindServer && s.StartTime().After(edge.EndTime()) && !strings.Contains(s.Name(), "/") {
					seen++
				}
			}
		}
		for _, s := range spans.Ended() {
			line := s.Name()
			for _, kv := range s.Attributes() {
				line += " " + string(kv.Key) + "=" + kv.Value.String()
			}
			if strings.Contains(line, txID) || strings.Contains(line, "FOO123") {
				t.Errorf("span %s", line)
			}
		}
	})

	t.Run("the access log line names the trace", func(t *testing.T) {
		for _, e := range f.logs.FilterMessage("http request").All() {
			m := e.ContextMap()
			if m["route"] != "/v1/api/verify" {
				continue
			}
			if m["trace_id"] != traceID.String() || m["span_id"] != edge.SpanContext().SpanID().String() || m["request_id"] == "" {
				t.Errorf("log line %v, want trace_id %s span_id %s and a request id", m, traceID, edge.SpanContext().SpanID())
			}
			return
		}
		t.Error("no access log line for /v1/api/verify")
	})
}

// followTrace finds the server span named edge and names every span of its trace by its
// ancestry, e.g. "POST /v1/api/verify(server) > …/Verify(client)".
func followTrace(ended []sdktrace.ReadOnlySpan, edge string) (sdktrace.ReadOnlySpan, map[string]bool) {
	var root sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == edge && s.SpanKind() == trace.SpanKindServer {
			root = s
		}
	}
	if root == nil {
		return nil, nil
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
			byID[s.SpanContext().SpanID()] = s
		}
	}
	have := map[string]bool{}
	for _, s := range byID {
		var parts []string
		for p := s; p != nil; p = byID[p.Parent().SpanID()] {
			parts = append([]string{fmt.Sprintf("%s(%s)", p.Name(), p.SpanKind())}, parts...)
		}
		have[strings.Join(parts, " > ")] = true
	}
	return root, have
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
