package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

type importJob struct {
	ID           string  `json:"id"`
	FileName     string  `json:"fileName"`
	Status       string  `json:"status"`
	TotalRows    int64   `json:"totalRows"`
	ImportedRows int64   `json:"importedRows"`
	UpdatedRows  int64   `json:"updatedRows"`
	FailedRows   int64   `json:"failedRows"`
	Failure      *string `json:"failure"`
	// Progress through the file.
	FileSizeBytes         int64           `json:"fileSizeBytes"`
	BytesProcessed        int64           `json:"bytesProcessed"`
	PercentComplete       float64         `json:"percentComplete"`
	EstimatedCompletionAt json.RawMessage `json:"estimatedCompletionAt"`
	Errors                []struct {
		Row     int    `json:"row"`
		Column  string `json:"column"`
		Message string `json:"message"`
	} `json:"errors"`
}

type profile struct {
	ID                 string            `json:"id"`
	ExternalID         *string           `json:"externalId"`
	MobileNumberMasked string            `json:"mobileNumberMasked"`
	CountryCode        string            `json:"countryCode"`
	Matched            bool              `json:"matched"`
	Source             string            `json:"source"`
	Attributes         map[string]string `json:"attributes"`
	Enrichment         *struct {
		LineType       string  `json:"lineType"`
		CountryCode    string  `json:"countryCode"`
		Valid          bool    `json:"valid"`
		LastVerifiedAt *string `json:"lastVerifiedAt"`
	} `json:"enrichment"`
}

// upload sends a CSV as a multipart upload through s's gateway and returns the queued job.
func upload(t *testing.T, s *harness.Suite, c harness.Client, name string, content []byte) importJob {
	t.Helper()
	r := postUpload(t, s, c, name, content)
	if r.status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", r.status, r.raw)
	}
	var job importJob
	if err := json.Unmarshal(r.env.Data, &job); err != nil || job.Status != "QUEUED" {
		t.Fatalf("upload answer %s", r.raw)
	}
	return job
}

// postUpload sends a CSV as a multipart upload through s's gateway and returns the answer.
func postUpload(t *testing.T, s *harness.Suite, c harness.Client, name string, content []byte) response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	mw.Close()
	req, _ := http.NewRequest("POST", s.GatewayURL+"/v1/api/me/connect/import", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-Api-Key", c.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &r.env); err != nil {
		t.Fatalf("upload: %d, body is not an envelope: %q", resp.StatusCode, raw)
	}
	return r
}

// waitJob waits for a job to finish.
func waitJob(t *testing.T, s *harness.Suite, c harness.Client, id string) importJob {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := getJob(t, s, c, id)
		if j.Status == "COMPLETED" || j.Status == "FAILED" {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, j.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getJob(t *testing.T, s *harness.Suite, c harness.Client, id string) importJob {
	t.Helper()
	var j importJob
	r := callSuite(t, s, "GET", "/v1/api/me/connect/import/jobs/"+id, meOf(c), "")
	if r.status != http.StatusOK {
		t.Fatalf("job %s: %d %s", id, r.status, r.raw)
	}
	r.decode(t, &j)
	return j
}

func sample(t *testing.T, c harness.Client) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", suite.GatewayURL+"/v1/api/me/connect/import/sample.csv", nil)
	req.Header.Set("X-Api-Key", c.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment; filename=") {
		t.Fatalf("sample: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	return b
}

func TestConnectImports(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT")
	csv := sample(t, c)
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(csv), "\r\n", "\n")), "\n")
	if len(lines) != 6 || lines[0] != "mobileNumber,externalId,firstName,lastName,email" {
		t.Fatalf("sample:\n%s", csv)
	}

	first := waitJob(t, suite, c, upload(t, suite, c, "sample.csv", csv).ID)
	if first.Status != "COMPLETED" || first.TotalRows != 5 || first.ImportedRows != 5 || first.FailedRows != 0 || len(first.Errors) != 0 {
		t.Fatalf("sample import %+v", first)
	}
	again := waitJob(t, suite, c, upload(t, suite, c, "sample-again.csv", csv).ID)
	if again.ImportedRows != 0 || again.UpdatedRows != 5 {
		t.Fatalf("re-import %+v, want 5 updated", again)
	}
	var list struct {
		Items      []profile `json:"items"`
		TotalItems int       `json:"totalItems"`
	}
	lr := ok(t, "GET", "/v1/api/me/connect/profiles?size=100", meOf(c), "")
	lr.decode(t, &list)
	if list.TotalItems != 5 {
		t.Fatalf("%d profiles after two imports of the same file, want 5", list.TotalItems)
	}
	for _, l := range lines[1:] {
		if n := strings.Split(l, ",")[0]; strings.Contains(string(lr.raw), n) || strings.Contains(string(lr.raw), n[1:]) {
			t.Fatalf("the profile list shows %s unmasked", n[:6])
		}
	}

	bad := "mobileNumber,email,tier\n+971501112233,ok@example.com,gold\nnot-a-number,x@example.com,silver\n+971501112244,not-an-email,bronze\n+971501112255,a@example.com\n"
	j := waitJob(t, suite, c, upload(t, suite, c, "bad.csv", []byte(bad)).ID)
	if j.Status != "COMPLETED" || j.TotalRows != 4 || j.ImportedRows != 1 || j.FailedRows != 3 || len(j.Errors) != 3 {
		t.Fatalf("bad rows %+v", j)
	}
	if j.Errors[0].Row != 3 || j.Errors[0].Column != "mobileNumber" || j.Errors[1].Row != 4 || j.Errors[1].Column != "email" || j.Errors[2].Row != 5 {
		t.Fatalf("errors %+v", j.Errors)
	}
	var one struct {
		Items []profile `json:"items"`
	}
	ok(t, "GET", "/v1/api/me/connect/profiles?search=&size=100&source=IMPORT", meOf(c), "").decode(t, &one)
	found := false
	for _, p := range one.Items {
		if p.Attributes["tier"] == "gold" {
			found = true
		}
	}
	if !found {
		t.Fatal("the extra column did not land in attributes")
	}

	notCSV := waitJob(t, suite, c, upload(t, suite, c, "photo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")).ID)
	if notCSV.Status != "FAILED" || notCSV.Failure == nil || *notCSV.Failure == "" {
		t.Fatalf("not a CSV: %+v", notCSV)
	}

	var jobs struct {
		Items []importJob `json:"items"`
	}
	ok(t, "GET", "/v1/api/me/connect/import/jobs", meOf(c), "").decode(t, &jobs)
	if len(jobs.Items) != 4 || jobs.Items[0].ID != notCSV.ID || jobs.Items[3].ID != first.ID {
		t.Fatalf("jobs not newest first: %+v", jobs.Items)
	}

	other := newClient(t, 10, "--features", "CONNECT")
	for _, path := range []string{"/v1/api/me/connect/import/jobs/" + first.ID, "/v1/api/me/connect/profiles/" + list.Items[0].ID} {
		if r := call(t, "GET", path, meOf(other), ""); r.status != http.StatusNotFound {
			t.Errorf("another client reads %s: %d", path, r.status)
		}
	}
	if r := call(t, "GET", "/v1/api/me/connect/profiles", meOf(newClient(t, 0)), ""); r.status != http.StatusBadRequest || r.code() != "FEATURE_NOT_ENABLED" {
		t.Errorf("a client without CONNECT: %d %s", r.status, r.raw)
	}
}

// TestConnectImportProgress: a file of three batches is QUEUED at 0% of its size, shows progress
// while RUNNING (when a poll catches it: the batches are quick), and ends COMPLETED at 100% with
// its whole size processed and no estimate left.
func TestConnectImportProgress(t *testing.T) {
	c := newClient(t, 0, "--features", "CONNECT")
	var body bytes.Buffer
	body.WriteString("mobileNumber\n")
	for i := range 12_000 { // the importer commits 5000 rows at a time
		fmt.Fprintf(&body, "+97150%07d\n", i)
	}
	size := int64(body.Len())
	queued := upload(t, suite, c, "big.csv", body.Bytes())
	if queued.FileSizeBytes != size || queued.BytesProcessed != 0 || queued.PercentComplete != 0 || string(queued.EstimatedCompletionAt) != "null" {
		t.Fatalf("queued job: %d of %d bytes, %v%%, estimate %s", queued.BytesProcessed, queued.FileSizeBytes, queued.PercentComplete, queued.EstimatedCompletionAt)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last importJob
	for {
		j := getJob(t, suite, c, queued.ID)
		if j.BytesProcessed < last.BytesProcessed || j.TotalRows < last.TotalRows || j.PercentComplete < last.PercentComplete {
			t.Fatalf("progress went back: %+v after %+v", j, last)
		}
		if j.Status == "RUNNING" && j.BytesProcessed > 0 {
			var eta time.Time
			if j.PercentComplete <= 0 || j.PercentComplete >= 100 || j.TotalRows == 0 || json.Unmarshal(j.EstimatedCompletionAt, &eta) != nil {
				t.Fatalf("running job: %d rows, %d of %d bytes, %v%%, estimate %s", j.TotalRows, j.BytesProcessed, j.FileSizeBytes, j.PercentComplete, j.EstimatedCompletionAt)
			}
		}
		last = j
		if j.Status == "COMPLETED" || j.Status == "FAILED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", j.ID, j.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last.Status != "COMPLETED" || last.TotalRows != 12_000 || last.FileSizeBytes != size || last.BytesProcessed != size ||
		last.PercentComplete != 100 || string(last.EstimatedCompletionAt) != "null" {
		t.Fatalf("finished job: %s, %d rows, %d of %d bytes, %v%%, estimate %s",
			last.Status, last.TotalRows, last.BytesProcessed, last.FileSizeBytes, last.PercentComplete, last.EstimatedCompletionAt)
	}
}

func TestUploadLimit(t *testing.T) {
	c := newClient(t, 0, "--features", "CONNECT")
	big := io.MultiReader(strings.NewReader("mobileNumber\n"), io.LimitReader(neverEnding('1'), 51<<20))
	req, _ := http.NewRequest("POST", suite.GatewayURL+"/v1/api/me/connect/import", big)
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("X-Api-Key", c.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("51 MiB upload: %d", resp.StatusCode)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// receiver is a CRM endpoint: it fails the first failures requests, then accepts, and keeps
// the records it accepted by delivery id.
type receiver struct {
	mu         sync.Mutex
	failures   int
	calls      int
	deliveries map[string][]map[string]any
	auth       []string
	signatures []string
	bodies     [][]byte
	// standard holds each delivery's Standard Webhooks headers: webhook-id, -timestamp,
	// -signature, and X-Mnv-Delivery-Id.
	standard [][4]string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls++
	rc.auth = append(rc.auth, r.Header.Get("Authorization"))
	if rc.calls <= rc.failures {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var recs []map[string]any
	if err := json.Unmarshal(body, &recs); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.deliveries[r.Header.Get("X-Mnv-Delivery-Id")] = recs
	rc.signatures = append(rc.signatures, r.Header.Get("X-Mnv-Signature"))
	rc.bodies = append(rc.bodies, body)
	rc.standard = append(rc.standard, [4]string{r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"),
		r.Header.Get("webhook-signature"), r.Header.Get("X-Mnv-Delivery-Id")})
	w.WriteHeader(http.StatusOK)
}

func (rc *receiver) records() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, recs := range rc.deliveries {
		n += len(recs)
	}
	return n
}

type syncEvent struct {
	Status      string  `json:"status"`
	RecordCount int     `json:"recordCount"`
	HTTPStatus  *int    `json:"httpStatus"`
	Attempt     int     `json:"attempt"`
	DeliveryID  string  `json:"deliveryId"`
	Error       *string `json:"error"`
}

func TestIntegrationDelivery(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT")
	waitJob(t, suite, c, upload(t, suite, c, "sample.csv", sample(t, c)).ID)
	rc := &receiver{failures: 2, deliveries: map[string][]map[string]any{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	const apiKey = "crm-secret-token-0123456789"
	body := func(name string, batch int, matchedOnly bool) string {
		return fmt.Sprintf(`{"displayName":%q,"integrationType":"WEBHOOK","endpointUrl":%q,"httpMethod":"POST",`+
			`"apiKey":%q,"triggerEvent":"MANUAL","fieldMappings":{"externalId":"customer_ref","mobileNumber":"phone","matched":"verified"},`+
			`"batchSize":%d,"matchedOnly":%v}`, name, srv.URL+"/hook", apiKey, batch, matchedOnly)
	}
	var created struct {
		ID               string  `json:"id"`
		APIKeyConfigured bool    `json:"apiKeyConfigured"`
		SigningSecret    *string `json:"signingSecret"`
		WebhookSecret    *string `json:"webhookSecret"`
		Status           string  `json:"status"`
	}
	cr := ok(t, "POST", "/v1/api/me/connect/integrations", meOf(c), body("CRM", 2, false))
	cr.decode(t, &created)
	if !created.APIKeyConfigured || created.SigningSecret == nil || created.WebhookSecret == nil || created.Status != "ACTIVE" ||
		strings.Contains(string(cr.raw), apiKey) {
		t.Fatalf("created %s", cr.raw)
	}
	for _, r := range []response{
		ok(t, "GET", "/v1/api/me/connect/integrations/"+created.ID, meOf(c), ""),
		ok(t, "GET", "/v1/api/me/connect/integrations", meOf(c), ""),
	} {
		if strings.Contains(string(r.raw), apiKey) || strings.Contains(string(r.raw), *created.SigningSecret) ||
			strings.Contains(string(r.raw), *created.WebhookSecret) {
			t.Fatalf("a response shows a credential: %s", r.raw)
		}
	}
	var sync struct {
		QueuedRecords int `json:"queuedRecords"`
	}
	ok(t, "POST", "/v1/api/me/connect/integrations/"+created.ID+"/sync", meOf(c), "").decode(t, &sync)
	if sync.QueuedRecords != 5 {
		t.Fatalf("queued %d, want 5", sync.QueuedRecords)
	}
	deadline := time.Now().Add(30 * time.Second)
	var history struct {
		Items      []syncEvent `json:"items"`
		TotalItems int         `json:"totalItems"`
	}
	for {
		ok(t, "GET", "/v1/api/me/connect/integrations/"+created.ID+"/sync-history?size=100", meOf(c), "").decode(t, &history)
		succeeded := 0
		for _, e := range history.Items {
			if e.Status == "SUCCEEDED" {
				succeeded++
			}
		}
		if succeeded == 3 { // 5 records in batches of 2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history %+v", history.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rc.records() != 5 || len(rc.deliveries) != 3 {
		t.Fatalf("receiver got %d records in %d deliveries", rc.records(), len(rc.deliveries))
	}
	retrying := 0
	for _, e := range history.Items {
		if e.Status == "RETRYING" {
			retrying++
			if e.HTTPStatus == nil || *e.HTTPStatus != 503 {
				t.Errorf("retry event %+v", e)
			}
		}
	}
	if retrying != 2 || history.TotalItems != 5 {
		t.Fatalf("history %+v: want 2 RETRYING and 3 SUCCEEDED", history.Items)
	}
	rc.mu.Lock()
	for _, a := range rc.auth {
		if a != "Bearer "+apiKey {
			t.Errorf("Authorization %q", a)
		}
	}
	for i, sig := range rc.signatures {
		if !verifySignature(*created.SigningSecret, rc.bodies[i], sig) {
			t.Errorf("signature %q does not verify", sig)
		}
	}
	// The Standard Webhooks signature verifies with webhookSecret, over the delivery id.
	for i, h := range rc.standard {
		if h[0] == "" || h[0] != h[3] || !verifyStandard(*created.WebhookSecret, h[0], h[1], h[2], rc.bodies[i]) {
			t.Errorf("Standard Webhooks headers %q do not verify", h)
		}
	}
	for _, recs := range rc.deliveries {
		for _, r := range recs {
			if p, _ := r["phone"].(string); !strings.HasPrefix(p, "+") || len(r) != 3 {
				t.Errorf("record %v", r)
			}
		}
	}
	rc.mu.Unlock()

	// The credential is sealed at rest.
	conn, err := pgx.Connect(context.Background(), suite.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM connect.integrations t WHERE strpos(t::text, $1) > 0
		OR strpos(t::text, encode(convert_to($1, 'UTF8'), 'hex')) > 0`, apiKey).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the credential is stored in clear (%d rows, %v)", n, err)
	}

	// matchedOnly sends only matched profiles: none here.
	rc2 := &receiver{deliveries: map[string][]map[string]any{}}
	srv2 := httptest.NewServer(rc2)
	defer srv2.Close()
	var only struct {
		ID string `json:"id"`
	}
	ok(t, "POST", "/v1/api/me/connect/integrations", meOf(c), strings.Replace(body("matched only", 10, true), srv.URL, srv2.URL, 1)).decode(t, &only)
	ok(t, "POST", "/v1/api/me/connect/integrations/"+only.ID+"/sync", meOf(c), "").decode(t, &sync)
	if sync.QueuedRecords != 0 {
		t.Fatalf("matchedOnly queued %d unmatched records", sync.QueuedRecords)
	}
	other := newClient(t, 0, "--features", "CONNECT")
	if r := call(t, "GET", "/v1/api/me/connect/integrations/"+created.ID, meOf(other), ""); r.status != http.StatusNotFound {
		t.Fatalf("another client's integration: %d", r.status)
	}
}

// TestIntegrationWritesNeedAdmin: a MEMBER key reads integrations but cannot create, change,
// delete or sync one (it could point an integration at its own server and have the stored CRM
// credential sent there). An ADMIN that moves an integration to another URL without sending a
// new apiKey drops the stored credential: the next delivery carries no Authorization.
func TestIntegrationWritesNeedAdmin(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT")
	var member struct {
		APIKey string `json:"apiKey"`
	}
	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"crm reader","role":"MEMBER"}`).decode(t, &member)
	m := headers{"X-Api-Key": member.APIKey}
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+nextNumber()+`","externalId":"w-1"}`)

	crm := &receiver{deliveries: map[string][]map[string]any{}}
	crmSrv := httptest.NewServer(crm)
	defer crmSrv.Close()
	thief := &receiver{deliveries: map[string][]map[string]any{}}
	thiefSrv := httptest.NewServer(thief)
	defer thiefSrv.Close()

	const apiKey = "crm-secret-token-admin-only-0123"
	create := `{"displayName":"CRM","integrationType":"WEBHOOK","endpointUrl":"` + crmSrv.URL + `/hook","httpMethod":"POST",` +
		`"apiKey":"` + apiKey + `","triggerEvent":"MANUAL","fieldMappings":{"externalId":"id"},"batchSize":10}`
	type integration struct {
		ID               string `json:"id"`
		DisplayName      string `json:"displayName"`
		EndpointURL      string `json:"endpointUrl"`
		APIKeyConfigured bool   `json:"apiKeyConfigured"`
		Status           string `json:"status"`
	}
	var it integration
	ok(t, "POST", "/v1/api/me/connect/integrations", meOf(c), create).decode(t, &it)
	path := "/v1/api/me/connect/integrations/" + it.ID

	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/api/me/connect/integrations", create},
		{"PATCH", path, `{"endpointUrl":"` + thiefSrv.URL + `/steal"}`},
		{"PATCH", path, `{"status":"PAUSED"}`},
		{"POST", path + "/sync", ""},
		{"DELETE", path, ""},
	} {
		if r := call(t, tc.method, tc.path, m, tc.body); r.status != http.StatusForbidden || r.code() != "PERMISSION_DENIED" {
			t.Errorf("MEMBER %s %s: %d %s", tc.method, tc.path, r.status, r.raw)
		}
	}
	// Reads stay open to MEMBER, and show that nothing changed.
	var got integration
	ok(t, "GET", path, m, "").decode(t, &got)
	if got != it {
		t.Fatalf("after the MEMBER's refused writes: %+v, was %+v", got, it)
	}
	var list struct {
		TotalItems int `json:"totalItems"`
	}
	ok(t, "GET", "/v1/api/me/connect/integrations", m, "").decode(t, &list)
	ok(t, "GET", path+"/sync-history", m, "")
	if list.TotalItems != 1 {
		t.Fatalf("%d integrations, want the ADMIN's one", list.TotalItems)
	}
	time.Sleep(300 * time.Millisecond) // a delivery wrongly queued would have been sent by now
	crm.mu.Lock()
	thief.mu.Lock()
	if crm.calls != 0 || thief.calls != 0 {
		t.Errorf("receivers called %d and %d times after refused writes", crm.calls, thief.calls)
	}
	thief.mu.Unlock()
	crm.mu.Unlock()

	// An ADMIN moves the integration without a new credential: the old one is dropped, not
	// sent to the new URL.
	var moved integration
	ok(t, "PATCH", path, meOf(c), `{"endpointUrl":"`+thiefSrv.URL+`/new"}`).decode(t, &moved)
	if moved.APIKeyConfigured || moved.EndpointURL != thiefSrv.URL+"/new" {
		t.Fatalf("moved integration %+v: the credential should be dropped", moved)
	}
	ok(t, "POST", path+"/sync", meOf(c), "")
	deadline := time.Now().Add(20 * time.Second)
	for thief.records() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no delivery to the new URL")
		}
		time.Sleep(100 * time.Millisecond)
	}
	thief.mu.Lock()
	defer thief.mu.Unlock()
	for _, a := range thief.auth {
		if a != "" {
			t.Errorf("the new URL received Authorization %q", a)
		}
	}
	// Changing the URL and sending a credential keeps the new one.
	ok(t, "PATCH", path, meOf(c), `{"endpointUrl":"`+crmSrv.URL+`/hook","apiKey":"`+apiKey+`"}`).decode(t, &moved)
	if !moved.APIKeyConfigured {
		t.Fatalf("a URL change with a new apiKey: %+v", moved)
	}
}

func verifySignature(secret string, body []byte, header string) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	want := hmacHex(secret, ts+"."+string(body))
	for _, s := range sigs {
		if s == want {
			return true
		}
	}
	return false
}

func TestIntegrationValidation(t *testing.T) {
	c := newClient(t, 0, "--features", "CONNECT")
	base := map[string]any{
		"displayName": "CRM", "integrationType": "WEBHOOK", "endpointUrl": "https://crm.example.com/hook", "httpMethod": "POST",
		"triggerEvent": "MANUAL", "fieldMappings": map[string]string{"externalId": "ref"},
	}
	with := func(k string, v any) string {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		m[k] = v
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name, body string
		status     int
		field      string
	}{
		{"display name of 1", with("displayName", "x"), 200, ""},
		{"display name of 100", with("displayName", strings.Repeat("x", 100)), 200, ""},
		{"display name of 0", with("displayName", ""), 400, "displayName"},
		{"display name of 101", with("displayName", strings.Repeat("x", 101)), 400, "displayName"},
		{"other integration type", with("integrationType", "SALESFORCE"), 400, "integrationType"},
		{"empty integration type", with("integrationType", ""), 400, "integrationType"},
		{"plain http elsewhere", with("endpointUrl", "http://crm.example.com/hook"), 200, ""}, // allowed in this suite
		{"metadata address", with("endpointUrl", "https://169.254.169.254/latest/meta-data"), 400, "endpointUrl"},
		{"private address", with("endpointUrl", "https://10.0.0.7/hook"), 400, "endpointUrl"},
		{"loopback outside the allowed net", with("endpointUrl", "https://127.0.0.2/hook"), 400, "endpointUrl"},
		{"localhost name", with("endpointUrl", "https://localhost/hook"), 400, "endpointUrl"},
		{"not http", with("endpointUrl", "ftp://crm.example.com/"), 400, "endpointUrl"},
		{"GET", with("httpMethod", "GET"), 400, "httpMethod"},
		{"unknown trigger", with("triggerEvent", "ALWAYS"), 400, "triggerEvent"},
		{"unknown source field", with("fieldMappings", map[string]string{"password": "p"}), 400, "fieldMappings"},
		{"batch of 0", with("batchSize", 0), 400, "batchSize"},
		{"batch of 1001", with("batchSize", 1001), 400, "batchSize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, "POST", "/v1/api/me/connect/integrations", meOf(c), tt.body)
			if r.status != tt.status {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if tt.field != "" && (r.env.Messages[0].Field == nil || *r.env.Messages[0].Field != tt.field) {
				t.Fatalf("field %v, want %s: %s", r.env.Messages[0].Field, tt.field, r.raw)
			}
		})
	}
}

// TestMatchingAndEnrichment: a VERIFIED number marks the client's profile matched (through the
// outbox relay); enrichment fills from the phone-number library and charges once per call, once
// per Idempotency-Key.
func TestMatchingAndEnrichment(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT,VERIFY,SANDBOX")
	n := nextNumber()
	var p profile
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+n+`","externalId":"c-1"}`).decode(t, &p)
	if p.Matched || p.Source != "API" || p.MobileNumberMasked != n[:6]+"*****"+n[len(n)-2:] {
		t.Fatalf("profile %+v", p)
	}
	if r := call(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+n+`"}`); r.status != http.StatusConflict {
		t.Fatalf("a second profile for the number: %d", r.status)
	}
	sess := openSession(t, suite, c, sdkToken(t, suite, c), headers{sandboxHeader: n})
	ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber))
	deadline := time.Now().Add(20 * time.Second)
	for !p.Matched {
		if time.Now().After(deadline) {
			t.Fatal("the verified number did not match its profile")
		}
		time.Sleep(200 * time.Millisecond)
		ok(t, "GET", "/v1/api/me/connect/profiles/"+p.ID, meOf(c), "").decode(t, &p)
	}
	// A profile created later for an already verified number is matched at once.
	ok(t, "DELETE", "/v1/api/me/connect/profiles/"+p.ID, meOf(c), "")
	if r := call(t, "GET", "/v1/api/me/connect/profiles/"+p.ID, meOf(c), ""); r.status != http.StatusNotFound {
		t.Fatalf("erased profile: %d", r.status)
	}
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+n+`"}`).decode(t, &p)
	if !p.Matched {
		t.Fatal("a profile of a verified number is not matched at once")
	}

	before := balanceOf(t, suite, c)
	if r := call(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", meOf(c), `{"reason":"ok"}`); r.status != http.StatusBadRequest {
		t.Fatalf("short reason: %d", r.status)
	}
	var e profile
	ok(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", meOf(c), `{"reason":"fraud check"}`).decode(t, &e)
	if e.Enrichment == nil || e.Enrichment.LineType != "MOBILE" || e.Enrichment.CountryCode != "AE" || !e.Enrichment.Valid || e.Enrichment.LastVerifiedAt == nil {
		t.Fatalf("enrichment %+v", e.Enrichment)
	}
	ok(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", meOf(c), `{"reason":"fraud check"}`)
	h := meOf(c)
	h["Idempotency-Key"] = "enrich-" + p.ID
	ok(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", h, `{"reason":"once only"}`)
	ok(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", h, `{"reason":"once only"}`)
	if after := balanceOf(t, suite, c); after != before-3 {
		t.Fatalf("balance %d -> %d, want 3 charges", before, after)
	}
	var ov struct {
		Profiles struct {
			Total, Matched, Enriched int
		} `json:"profiles"`
		Credits struct {
			Balance int64 `json:"balance"`
		} `json:"credits"`
	}
	ok(t, "GET", "/v1/api/me/connect/overview", meOf(c), "").decode(t, &ov)
	if ov.Profiles.Total != 1 || ov.Profiles.Matched != 1 || ov.Profiles.Enriched != 1 || ov.Credits.Balance != before-3 {
		t.Fatalf("overview %+v", ov)
	}
	poor := newClient(t, 0, "--features", "CONNECT")
	var pp profile
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(poor), `{"mobileNumber":"`+nextNumber()+`"}`).decode(t, &pp)
	if r := call(t, "POST", "/v1/api/me/connect/profiles/"+pp.ID+"/enrich", meOf(poor), `{"reason":"fraud check"}`); r.status != http.StatusPaymentRequired {
		t.Fatalf("enrich without balance: %d %s", r.status, r.raw)
	}
}

// TestDeliveryThatCannotBeOpened restarts connect without the data key that sealed an
// integration's credentials: a sync then records one FAILED attempt saying why, sends nothing,
// and does not come back on every lease.
func TestDeliveryThatCannotBeOpened(t *testing.T) {
	ctx := context.Background()
	s, err := harness.Start(ctx, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(ctx, 10, "--features", "CONNECT")
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{deliveries: map[string][]map[string]any{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	callSuite(t, s, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"+971501234567","externalId":"x-1"}`)
	var created struct {
		ID string `json:"id"`
	}
	callSuite(t, s, "POST", "/v1/api/me/connect/integrations", meOf(c), `{"displayName":"CRM","integrationType":"WEBHOOK",`+
		`"endpointUrl":"`+srv.URL+`/hook","httpMethod":"POST","apiKey":"crm-token-0123456789","triggerEvent":"MANUAL",`+
		`"fieldMappings":{"externalId":"id"},"batchSize":10,"matchedOnly":false}`).decode(t, &created)

	if err := s.Kill("connect", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart("connect", "MNV_DATA_KEYS=other:HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4="); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := callSuite(t, s, "POST", "/v1/api/me/connect/integrations/"+created.ID+"/sync", meOf(c), ""); r.status != http.StatusOK {
		t.Fatalf("sync: %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var history struct {
			Items []syncEvent `json:"items"`
		}
		callSuite(t, s, "GET", "/v1/api/me/connect/integrations/"+created.ID+"/sync-history", meOf(c), "").decode(t, &history)
		if len(history.Items) > 0 {
			ev := history.Items[0]
			if len(history.Items) != 1 || ev.Status != "FAILED" || ev.Error == nil || !strings.Contains(*ev.Error, "open the integration's") {
				t.Fatalf("history %+v", history.Items)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no attempt recorded for a delivery whose credentials cannot be opened")
		}
		time.Sleep(200 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.calls != 0 {
		t.Errorf("the receiver got %d calls", rc.calls)
	}
}

// TestMatchedOnlyDelivery: of two profiles, one has its number verified; an integration with
// matchedOnly queues and sends that one alone, with a MANUAL sync and with PROFILE_MATCHED.
func TestMatchedOnlyDelivery(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT,VERIFY,SANDBOX")
	rc := &receiver{deliveries: map[string][]map[string]any{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	integration := func(trigger string) string {
		var it struct {
			ID string `json:"id"`
		}
		ok(t, "POST", "/v1/api/me/connect/integrations", meOf(c), `{"displayName":"matched `+trigger+`","integrationType":"WEBHOOK",`+
			`"endpointUrl":"`+srv.URL+`/hook","httpMethod":"POST","triggerEvent":"`+trigger+`",`+
			`"fieldMappings":{"externalId":"id"},"batchSize":10,"matchedOnly":true}`).decode(t, &it)
		return it.ID
	}
	manual, onMatch := integration("MANUAL"), integration("PROFILE_MATCHED")
	verified, unverified := nextNumber(), nextNumber()
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+verified+`","externalId":"m-1"}`)
	ok(t, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+unverified+`","externalId":"u-2"}`)

	sess := openSession(t, suite, c, sdkToken(t, suite, c), headers{sandboxHeader: verified})
	ok(t, "POST", "/v1/api/verify", keyOf(c), verifyBody(verified, *sess.EncryptedMobileNumber))
	waitRecords := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for rc.records() < want {
			if time.Now().After(deadline) {
				t.Fatalf("the receiver has %d records, want %d", rc.records(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitRecords(1) // PROFILE_MATCHED, once the relay has marked the profile

	var sync struct {
		QueuedRecords int `json:"queuedRecords"`
	}
	ok(t, "POST", "/v1/api/me/connect/integrations/"+manual+"/sync", meOf(c), "").decode(t, &sync)
	if sync.QueuedRecords != 1 {
		t.Fatalf("matchedOnly sync queued %d records, want the 1 matched", sync.QueuedRecords)
	}
	waitRecords(2)
	time.Sleep(300 * time.Millisecond) // anything wrongly queued would have arrived by now
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var ids []string
	for _, recs := range rc.deliveries {
		for _, r := range recs {
			ids = append(ids, fmt.Sprint(r["id"]))
		}
	}
	if len(ids) != 2 || ids[0] != "m-1" || ids[1] != "m-1" {
		t.Fatalf("delivered %v; want m-1 once per integration (%s, %s)", ids, manual, onMatch)
	}
}

// TestErasureForgetsIdempotentAnswers erases a profile created (and enriched) with an
// Idempotency-Key: the stored answers, which hold its data, go with it, so a replay of the same
// key and body creates a new profile instead of handing back the erased one.
func TestErasureForgetsIdempotentAnswers(t *testing.T) {
	c := newClient(t, 10, "--features", "CONNECT")
	create := meOf(c)
	create["Idempotency-Key"] = "erase-create-" + c.ID
	body := `{"mobileNumber":"` + nextNumber() + `","externalId":"crm-7","firstName":"Erin","email":"erin@example.com"}`
	var p profile
	ok(t, "POST", "/v1/api/me/connect/profiles", create, body).decode(t, &p)
	if r := ok(t, "POST", "/v1/api/me/connect/profiles", create, body); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("before the erasure the key does not replay: %v", r.header)
	}
	enrich := meOf(c)
	enrich["Idempotency-Key"] = "erase-enrich-" + c.ID
	ok(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", enrich, `{"reason":"fraud check"}`)

	ok(t, "DELETE", "/v1/api/me/connect/profiles/"+p.ID, meOf(c), "")

	conn, err := pgx.Connect(context.Background(), suite.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM connect.idempotency_keys WHERE client_id = $1 AND key IN ($2, $3)`,
		c.ID, create["Idempotency-Key"], enrich["Idempotency-Key"]).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d stored answers about the erased profile remain", rows)
	}

	var again profile
	r := ok(t, "POST", "/v1/api/me/connect/profiles", create, body)
	r.decode(t, &again)
	if again.ID == p.ID || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the replay after the erasure answered the erased profile %s: %s %v", p.ID, r.raw, r.header)
	}
	ok(t, "GET", "/v1/api/me/connect/profiles/"+again.ID, meOf(c), "")
	if r := call(t, "POST", "/v1/api/me/connect/profiles/"+p.ID+"/enrich", enrich, `{"reason":"fraud check"}`); r.status != http.StatusNotFound {
		t.Fatalf("the enrichment's replay after the erasure: %d %s, want 404", r.status, r.raw)
	}
}
