// Package openapi_test holds the generated API reference to a real validator (kin-openapi, which
// validates OpenAPI 3.1 with a JSON Schema 2020-12 validator) and to the real answers of the
// gateway: the binaries run as separate processes (tests/harness), and a sample of routes of
// every service, successes and errors, must answer as the document says.
package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/tests/harness"
)

var suite *harness.Suite

// TestMain starts the suite without rate limits: the bounds test sends hundreds of requests
// with one key, and none of these tests is about the limits (tests/e2e is).
func TestMain(m *testing.M) {
	harness.ExitIfShort("openapi")
	s, err := harness.Start(context.Background(), harness.Options{Env: []string{"MNV_IP_RATE=0", "MNV_AUTH_FAILURE_RATE=0", "MNV_CLIENT_RATE=0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
	suite = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "openapi: process logs are in %s\n", s.LogDir)
	}
	s.Stop()
	os.Exit(code)
}

// load reads and validates a document.
func load(t *testing.T, raw []byte) *openapi3.T {
	t.Helper()
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(l.Context); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	return doc
}

// TestDocumentIsValid: the committed document is valid OpenAPI 3.1, and the gateway serves it
// byte for byte, with the reference page that renders it.
func TestDocumentIsValid(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(root, "proto/gen/openapi/mnv.openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc := load(t, file)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	resp, body := get(t, "/v1/api/openapi.json")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, file) || !bytes.Equal(body, openapigen.JSON) {
		t.Errorf("served document: %d, %d bytes, the file has %d", resp.StatusCode, len(body), len(file))
	}
	resp, page := get(t, "/v1/api/docs")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "/v1/api/openapi.json") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("reference page: %d %v", resp.StatusCode, resp.Header)
	}
	// Every route the gateway serves is in the document, and nothing else.
	ops := 0
	for _, item := range doc.Paths.Map() {
		ops += len(item.Operations())
	}
	if ops != len(openapigen.Routes) {
		t.Errorf("%d operations for %d routes", ops, len(openapigen.Routes))
	}
	// Each operation lists the statuses it can answer, not every one: no 402 or 413 for a read,
	// 413 exactly where there is a body, and one operation id per route.
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if prev, dup := ids[op.OperationID]; dup || op.OperationID == "" {
				t.Errorf("%s: operationId %q (also %s)", name, op.OperationID, prev)
			}
			ids[op.OperationID] = name
			if len(op.Tags) != 1 || op.Summary == "" || op.Summary == op.OperationID {
				t.Errorf("%s: tags %v, summary %q: want one resource and plain words", name, op.Tags, op.Summary)
			}
			if method == http.MethodGet && (op.Responses.Status(402) != nil || op.Responses.Status(413) != nil) {
				t.Errorf("%s answers 402 or 413", name)
			}
			if (op.RequestBody != nil) != (op.Responses.Status(413) != nil) {
				t.Errorf("%s: a body %v, 413 listed %v", name, op.RequestBody != nil, op.Responses.Status(413) != nil)
			}
		}
	}
	// The gateway's own handlers, which answer no JSON, are described too: the upload with the
	// two bodies it reads, the sample with the file it gives.
	upload := doc.Paths.Value("/v1/api/me/connect/import")
	if upload == nil || upload.Post == nil || upload.Post.RequestBody == nil ||
		upload.Post.RequestBody.Value.Content.Get("multipart/form-data") == nil || upload.Post.RequestBody.Value.Content.Get("text/csv") == nil {
		t.Error("the document does not describe POST /v1/api/me/connect/import with its multipart and text/csv bodies")
	}
	sample := doc.Paths.Value("/v1/api/me/connect/import/sample.csv")
	if sample == nil || sample.Get == nil || sample.Get.Responses.Status(http.StatusOK) == nil ||
		sample.Get.Responses.Status(http.StatusOK).Value.Content.Get("text/csv") == nil {
		t.Error("the document does not describe GET /v1/api/me/connect/import/sample.csv answering text/csv")
	}
}

// TestValidatorRefusesWhatTheDocumentDoesNot shows that the answers test can fail: an answer
// that breaks the document (an integer written as a string, as protojson would) is refused.
func TestValidatorRefusesWhatTheDocumentDoesNot(t *testing.T) {
	v := newValidator(t)
	c := newClient(t, "VERIFY")
	req, resp, body := v.send(t, "GET", "/v1/api/clients", keyOf(c), "", "")
	if err := v.check(req, resp, body); err != nil {
		t.Fatalf("the real answer: %v", err)
	}
	broken := bytes.Replace(body, []byte(`"balance":10,`), []byte(`"balance":"10",`), 1)
	if bytes.Equal(broken, body) {
		t.Fatalf("no balance in %s", body)
	}
	if err := v.check(req, resp, broken); err == nil {
		t.Fatal("an answer with a quoted integer passed")
	}
	if err := v.check(req, resp, bytes.Replace(body, []byte(`"httpStatus":"OK"`), []byte(`"httpStatus":"ACCEPTED"`), 1)); err == nil {
		t.Fatal("an answer with another status name passed")
	}
	anonymous := *resp
	anonymous.Header = resp.Header.Clone()
	anonymous.Header.Del("X-Request-Id")
	if err := v.check(req, &anonymous, body); err == nil {
		t.Fatal("an answer without X-Request-Id passed")
	}
	undocumented := *resp
	undocumented.StatusCode = http.StatusTeapot
	if err := v.check(req, &undocumented, body); err == nil {
		t.Fatal("an undocumented status passed")
	}

	req, resp, body = v.send(t, "GET", "/v1/api/me/api-keys", meOf(c), "", "")
	stamp := regexp.MustCompile(`("createdAt":"[0-9T:-]+\.[0-9]{3})Z"`)
	if !stamp.Match(body) {
		t.Fatalf("no createdAt in %s", body)
	}
	if err := v.check(req, resp, body); err != nil {
		t.Fatalf("the real answer: %v", err)
	}
	if err := v.check(req, resp, stamp.ReplaceAll(body, []byte(`${1}123Z"`))); err == nil {
		t.Fatal("a timestamp with six fractional digits passed")
	}

	req, resp, body = v.send(t, "GET", "/v1/api/clients", meOf(c), "", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without X-CLIENT-ID: %d", resp.StatusCode)
	}
	if err := v.check(req, resp, body); err != nil {
		t.Fatalf("the real error: %v", err)
	}
	if err := v.check(req, resp, bytes.Replace(body, []byte(`"field":null`), []byte(`"field":3`), 1)); err == nil {
		t.Fatal("an error naming a number as its field passed")
	}
	if err := v.check(req, resp, bytes.Replace(body, []byte(`"code":"UNAUTHENTICATED"`), []byte(`"code":"NOT_FOUND"`), 1)); err == nil {
		t.Fatal("a 401 with another status's code passed")
	}
}

// TestAnswersMatchTheDocument sends a sample of routes of every service, successes and errors,
// and validates each request (when it is a valid one) and each answer against the document.
func TestAnswersMatchTheDocument(t *testing.T) {
	v := newValidator(t)
	c := newClient(t, "VERIFY,CONNECT,STUCK_PLUS,SANDBOX")
	plain := newClient(t, "VERIFY")
	key, me := keyOf(c), meOf(c)
	if out, err := suite.Mnvctl(context.Background(), "client", "origins", c.ID, shopOrigin); err != nil {
		t.Fatalf("mnvctl: %v %s", err, out)
	}

	type call struct {
		name, method, path string
		h                  map[string]string
		body               string
		want               int
		// validRequest: the request is one the document allows (the error cases send others).
		validRequest bool
	}
	run := func(c call) []byte {
		t.Helper()
		ctype := ""
		if c.body != "" {
			ctype = "application/json"
		}
		req, resp, body := v.send(t, c.method, c.path, c.h, c.body, ctype)
		if resp.StatusCode != c.want {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
		}
		if c.validRequest {
			if err := v.checkRequest(req, c.body); err != nil {
				t.Errorf("%s: the request: %v", c.name, err)
			}
		}
		if err := v.check(req, resp, body); err != nil {
			t.Errorf("%s: the answer: %v\n%s", c.name, err, body)
		}
		return body
	}
	data := func(body []byte, field string) string {
		var env struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		s, _ := env.Data[field].(string)
		return s
	}

	// Accounts.
	run(call{"client", "GET", "/v1/api/clients", key, "", 200, true})
	run(call{"client without X-CLIENT-ID", "GET", "/v1/api/clients", me, "", 401, false})
	run(call{"ledger", "GET", "/v1/api/me/ledger?size=5", me, "", 200, true})
	run(call{"who am I", "GET", "/v1/api/me", me, "", 200, true})
	idem := map[string]string{"Idempotency-Key": "k-" + c.ID}
	for k, val := range me {
		idem[k] = val
	}
	run(call{"create a key", "POST", "/v1/api/me/api-keys", idem, `{"name":"ci","role":"MEMBER"}`, 200, true})
	run(call{"create a key again: replayed", "POST", "/v1/api/me/api-keys", idem, `{"name":"ci","role":"MEMBER"}`, 200, true})
	run(call{"create a key with a bad role", "POST", "/v1/api/me/api-keys", me, `{"name":"ci","role":"OWNER"}`, 400, false})
	run(call{"list keys", "GET", "/v1/api/me/api-keys", me, "", 200, true})
	run(call{"revoke an unknown key", "DELETE", "/v1/api/me/api-keys/9b2f0c52-7b8e-4a57-9d3c-2f1a9b7c6d5e", me, "", 404, true})
	token := data(run(call{"sdk token", "POST", "/v1/api/me/sdk-tokens", me, `{"label":"app"}`, 200, true}), "sdkToken")
	run(call{"web origins", "GET", "/v1/api/me/web-origins", me, "", 200, true})
	run(call{"register redirect URIs", "PUT", "/v1/api/me/redirect-uris", me, `{"redirectUris":["https://shop.example/camara"]}`, 200, true})
	run(call{"a redirect URI with a fragment", "PUT", "/v1/api/me/redirect-uris", me, `{"redirectUris":["https://shop.example/camara#x"]}`, 400, false})
	run(call{"redirect URIs", "GET", "/v1/api/me/redirect-uris", me, "", 200, true})
	run(call{"bootstrap when a key exists", "POST", "/v1/api/me/api-key/generate", map[string]string{"X-Client-Id": c.ID}, `{"secretKey":"` + c.Secret + `"}`, 409, true})

	// Verification.
	run(call{"operators", "GET", "/v1/api/operators", key, "", 200, true})
	number := "+971501234567"
	blob := data(run(call{"sdk session", "POST", "/v1/api/sdk/session",
		map[string]string{"X-Sdk-Token": token, "X-Client-Id": c.ID, sandboxHeader: number}, `{"platform":"ANDROID"}`, 200, true}), "encryptedMobileNumber")
	verify := fmt.Sprintf(`{"mobileNumber":%q,"encryptedMobileNumber":%q,"operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`, number, blob)
	id := data(run(call{"verify", "POST", "/v1/api/verify", key, verify, 200, true}), "verificationId")
	run(call{"verify the same blob again", "POST", "/v1/api/verify", key, verify, 409, true})
	run(call{"verify a bad blob", "POST", "/v1/api/verify", key, strings.Replace(verify, blob, "hello", 1), 400, true})
	run(call{"a verification", "GET", "/v1/api/verifications/" + id, key, "", 200, true})
	run(call{"verifications", "GET", "/v1/api/verifications?status=VERIFIED", key, "", 200, true})
	tx := data(run(call{"opportunity", "POST", "/v1/api/opportunity", key, `{"serviceCode":"STUCK_PLUS","metadataId":"order-1"}`, 200, true}), "transactionId")
	run(call{"opportunity read", "GET", "/v1/api/opportunity/" + tx, key, "", 200, true})
	run(call{"capture from another origin", "POST", "/v1/api/web/transactions/" + tx + "/capture", map[string]string{"Origin": "https://evil.example"}, "", 403, true})
	run(call{"capture", "POST", "/v1/api/web/transactions/" + tx + "/capture", map[string]string{"Origin": shopOrigin, sandboxHeader: number}, "", 200, true})
	run(call{"stuck-plus sessions", "GET", "/v1/api/me/stuck-plus/sessions", me, "", 200, true})
	run(call{"reveal an unknown session", "POST", "/v1/api/me/stuck-plus/sessions/9b2f0c52-7b8e-4a57-9d3c-2f1a9b7c6d5e/reveal", me, `{"reason":"ticket 42, customer asked"}`, 404, true})
	run(call{"verification usage", "GET", "/v1/api/me/usage/verifications", me, "", 200, true})
	run(call{"verification usage of an operator", "GET", "/v1/api/me/usage/verifications?from=2026-01-01&to=2026-12-31&operator=sandbox", me, "", 200, true})
	run(call{"verification usage over more than 366 days", "GET", "/v1/api/me/usage/verifications?from=2025-01-01&to=2026-01-02", me, "", 400, true})
	run(call{"spend", "GET", "/v1/api/me/usage/spend?to=2026-06-30", me, "", 200, true})
	run(call{"spend ending before it starts", "GET", "/v1/api/me/usage/spend?from=2026-06-30&to=2026-06-01", me, "", 400, true})
	run(call{"an SDK token instead of a key", "POST", "/v1/api/verify", map[string]string{"X-Sdk-Token": token, "X-Client-Id": c.ID}, verify, 401, false})

	// Connect.
	profile := data(run(call{"create a profile", "POST", "/v1/api/me/connect/profiles", me, `{"mobileNumber":"+971501234568","externalId":"crm-1"}`, 200, true}), "id")
	run(call{"a profile", "GET", "/v1/api/me/connect/profiles/" + profile, me, "", 200, true})
	run(call{"profiles", "GET", "/v1/api/me/connect/profiles?matched=false", me, "", 200, true})
	run(call{"a client without Connect", "GET", "/v1/api/me/connect/profiles/" + profile, meOf(plain), "", 400, true})
	run(call{"an integration", "POST", "/v1/api/me/connect/integrations", me,
		`{"displayName":"CRM","integrationType":"WEBHOOK","endpointUrl":"https://crm.example/hook","httpMethod":"POST","triggerEvent":"MANUAL","fieldMappings":{"mobileNumber":"phone"}}`, 200, true})
	run(call{"integrations", "GET", "/v1/api/me/connect/integrations", me, "", 200, true})
	run(call{"overview", "GET", "/v1/api/me/connect/overview", me, "", 200, true})
	run(call{"an unknown import job", "GET", "/v1/api/me/connect/import/jobs/9b2f0c52-7b8e-4a57-9d3c-2f1a9b7c6d5e", me, "", 404, true})

	// The gateway's own handlers: the sample file and the upload.
	req, resp, body := v.send(t, "GET", "/v1/api/me/connect/import/sample.csv", me, "", "")
	if err := v.check(req, resp, body); err != nil || resp.StatusCode != 200 {
		t.Errorf("sample: %d %v", resp.StatusCode, err)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "people.csv")
	_, _ = fw.Write(body)
	_ = mw.Close()
	req, resp, upload := v.send(t, "POST", "/v1/api/me/connect/import", me, form.String(), mw.FormDataContentType())
	if err := v.check(req, resp, upload); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Errorf("upload: %d %v %s", resp.StatusCode, err, upload)
	}
	if err := v.checkRequest(req, form.String()); err != nil {
		t.Errorf("upload request: %v", err)
	}
	req, resp, body = v.send(t, "POST", "/v1/api/me/connect/import", me, "a,b\n", "application/json")
	if err := v.check(req, resp, body); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("upload without a file: %d %v %s", resp.StatusCode, err, body)
	}
}

const (
	shopOrigin    = "https://shop.example"
	sandboxHeader = "X-Mnv-Sandbox-Msisdn"
)

func newClient(t *testing.T, features string) harness.Client {
	t.Helper()
	c, err := suite.CreateClient(context.Background(), 10, "--features", features)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyOf(c harness.Client) map[string]string {
	return map[string]string{"X-Api-Key": c.APIKey, "X-Client-Id": c.ID}
}

func meOf(c harness.Client) map[string]string { return map[string]string{"X-Api-Key": c.APIKey} }

func get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(suite.GatewayURL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// validator checks requests and answers against the served document.
type validator struct {
	router routers.Router
}

func newValidator(t *testing.T) *validator {
	t.Helper()
	_, raw := get(t, "/v1/api/openapi.json")
	doc := load(t, raw)
	// The document names no server: its paths are the gateway's, wherever it runs.
	doc.Servers = openapi3.Servers{{URL: suite.GatewayURL}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{router: r}
}

func (v *validator) send(t *testing.T, method, path string, h map[string]string, body, ctype string) (*http.Request, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, suite.GatewayURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range h {
		req.Header.Set(k, val)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return req, resp, out
}

func (v *validator) input(req *http.Request, body string) (*openapi3filter.RequestValidationInput, error) {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(strings.NewReader(body))
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s is not in the document: %w", req.Method, req.URL.Path, err)
	}
	return &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}, nil
}

func (v *validator) checkRequest(req *http.Request, body string) error {
	in, err := v.input(req, body)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), in)
}

// check validates an answer: its status must be documented, its headers and body must match.
func (v *validator) check(req *http.Request, resp *http.Response, body []byte) error {
	in, err := v.input(req, "")
	if err != nil {
		return err
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
}
