// Package e2e_test drives the real binaries (accounts, gateway, mnvctl), started as separate
// processes, through the REST API, as a client and an operator would.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

var suite *harness.Suite

// mainEnv lifts the abuse limits out of the way of the other tests (TestAbuseLimits and
// TestLimits run their own suites with low ones: every test here calls from loopback, so
// per-address budgets would meet across tests) and trusts loopback as a proxy, so a test can
// send a request "from" an outside address with X-Forwarded-For.
var mainEnv = []string{
	"MNV_CLIENT_RATE=100000", "MNV_CLIENT_BURST=100000", "MNV_NUMBER_ATTEMPTS_PER_HOUR=100000",
	"MNV_IP_RATE=0", "MNV_AUTH_FAILURE_RATE=0",
	"MNV_TRUSTED_PROXIES=127.0.0.1/32,::1/128",
}

func TestMain(m *testing.M) {
	harness.ExitIfShort("e2e")
	s, err := harness.Start(context.Background(), harness.Options{Env: mainEnv})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	suite = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: process logs are in %s\n", s.LogDir)
	}
	s.Stop()
	os.Exit(code)
}

// envelope is the body of every answer.
type envelope struct {
	Success  bool `json:"success"`
	Messages []struct {
		Type       string  `json:"type"`
		Code       string  `json:"code"`
		Message    string  `json:"message"`
		HTTPStatus string  `json:"httpStatus"`
		Technical  bool    `json:"technical"`
		Field      *string `json:"field"`
	} `json:"messages"`
	Data json.RawMessage `json:"data"`
}

type response struct {
	status int
	header http.Header
	env    envelope
	raw    []byte
}

func (r response) code() string {
	if len(r.env.Messages) == 0 {
		return ""
	}
	return r.env.Messages[0].Code
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.env.Data, v); err != nil {
		t.Fatalf("data %s: %v", r.env.Data, err)
	}
}

type headers map[string]string

func call(t *testing.T, method, path string, h headers, body string) response {
	t.Helper()
	return callSuite(t, suite, method, path, h, body)
}

func callSuite(t *testing.T, s *harness.Suite, method, path string, h headers, body string) response {
	t.Helper()
	r, err := send(s, method, path, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id", method, path)
	}
	if r.env.Success != (r.status < 300) {
		t.Errorf("%s %s: status %d with success=%v", method, path, r.status, r.env.Success)
	}
	return r
}

// send makes one call to s's gateway; unlike callSuite it may run on any goroutine.
func send(s *harness.Suite, method, path string, h headers, body string) (response, error) {
	req, err := http.NewRequest(method, s.GatewayURL+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range h {
		req.Header[k] = []string{v} // as sent: no canonicalisation of the value
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &r.env); err != nil {
		return r, fmt.Errorf("%s %s: %d, body is not an envelope: %q", method, path, resp.StatusCode, raw)
	}
	return r, nil
}

// ok calls and fails the test unless the answer is 200.
func ok(t *testing.T, method, path string, h headers, body string) response {
	t.Helper()
	r := call(t, method, path, h, body)
	if r.status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
	}
	return r
}

func newClient(t *testing.T, balance int64, extra ...string) harness.Client {
	t.Helper()
	c, err := suite.CreateClient(context.Background(), balance, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyOf(c harness.Client) headers { return headers{"X-Api-Key": c.APIKey, "X-Client-Id": c.ID} }
func meOf(c harness.Client) headers  { return headers{"X-Api-Key": c.APIKey} }

// ledgerCharges pages through c's ledger: it returns the VERIFICATION rows as the amount charged
// by verification id ("verification:" stripped from the reference) and the sum of every row.
func ledgerCharges(t *testing.T, s *harness.Suite, c harness.Client) (charges map[string]int64, sum int64, err error) {
	t.Helper()
	charges = map[string]int64{}
	for page := 0; ; page++ {
		var l struct {
			Items []struct {
				Kind      string `json:"kind"`
				Amount    int64  `json:"amount"`
				Reference string `json:"reference"`
			} `json:"items"`
			TotalPages int `json:"totalPages"`
		}
		r := callSuite(t, s, "GET", fmt.Sprintf("/v1/api/me/ledger?size=100&page=%d", page), meOf(c), "")
		if r.status != http.StatusOK {
			return nil, 0, fmt.Errorf("ledger: %d %s", r.status, r.raw)
		}
		r.decode(t, &l)
		for _, e := range l.Items {
			sum += e.Amount
			if e.Kind == "VERIFICATION" {
				charges[strings.TrimPrefix(e.Reference, "verification:")] = -e.Amount
			}
		}
		if page+1 >= l.TotalPages {
			return charges, sum, nil
		}
	}
}
