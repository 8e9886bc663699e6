package outbound

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const testAPIKey = "crm-test-token-not-a-secret-0123456789"

var testSecret = []byte("whsec_test_signing_secret")

// devClient is the client a test deployment would use: plain http to 127.0.0.1 allowed.
func devClient(timeout time.Duration) *http.Client {
	return NewClient(Policy{AllowHTTP: true, AllowedNets: loopbackOnly}, timeout)
}

func request(url string) Request {
	return Request{
		URL:        url,
		Method:     http.MethodPost,
		APIKey:     testAPIKey,
		Secret:     testSecret,
		MessageID:  "dlv_01HZX3",
		Keys:       [][]byte{testSecret},
		DeliveryID: "dlv_01HZX3",
		Attempt:    1,
		Body:       []byte(`[{"externalId":"42","mobileNumber":"+447700900123"}]`),
	}
}

// checkResult asserts the classification and that no error text leaks the API key.
func checkResult(t *testing.T, res Result, status int, ok, retry bool) {
	t.Helper()
	if res.Status != status {
		t.Errorf("Status %d, want %d (err %v)", res.Status, status, res.Err)
	}
	if ok != (res.Err == nil) {
		t.Errorf("Err %v, want ok=%v", res.Err, ok)
	}
	if res.Retry != retry {
		t.Errorf("Retry %v, want %v (err %v)", res.Retry, retry, res.Err)
	}
	if res.Duration < 0 {
		t.Errorf("Duration %v", res.Duration)
	}
	if res.Err != nil && strings.Contains(res.Err.Error(), testAPIKey[:12]) {
		t.Errorf("error %q contains the API key", res.Err)
	}
}

func TestDeliverStatuses(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(code)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/200", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 64 { // 2 MiB; the client stops after 64 KiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := newCountingServer(t, mux, false)
	c := devClient(testTimeout)

	tests := []struct {
		path      string
		status    int
		ok, retry bool
	}{
		{"/status/200", 200, true, false},
		{"/status/201", 201, true, false},
		{"/status/202", 202, true, false},
		{"/status/204", 204, true, false},
		{"/status/500", 500, false, true},
		{"/status/502", 502, false, true},
		{"/status/503", 503, false, true},
		{"/status/504", 504, false, true},
		{"/status/429", 429, false, true},
		{"/status/408", 408, false, true},
		{"/status/400", 400, false, false},
		{"/status/401", 401, false, false},
		{"/status/403", 403, false, false},
		{"/status/404", 404, false, false},
		{"/status/410", 410, false, false},
		{"/status/422", 422, false, false},
		{"/redirect", 302, false, false},
		{"/big", 200, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := Deliver(context.Background(), c, request(srv.URL+tt.path), time.Now())
			checkResult(t, res, tt.status, tt.ok, tt.retry)
			if !tt.ok && !strings.Contains(res.Err.Error(), strconv.Itoa(tt.status)) {
				t.Errorf("error %q does not name the status", res.Err)
			}
		})
	}
}

func TestDeliverHeadersAndSignature(t *testing.T) {
	type seen struct {
		method, path string
		header       http.Header
		body         []byte
		verifyErr    error
	}
	var (
		mu   sync.Mutex
		last seen
	)
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// What a receiver does: verify before trusting anything.
		verr := errors.Join(
			Verify(testSecret, body, r.Header.Get(SignatureHeader), time.Now(), time.Minute),
			VerifyStandard(testSecret, r.Header.Get(IDHeader), r.Header.Get(TimestampHeader), r.Header.Get(StandardSignatureHeader), body, time.Now(), time.Minute))
		mu.Lock()
		last = seen{r.Method, r.URL.RequestURI(), r.Header.Clone(), body, verr}
		mu.Unlock()
		if verr != nil {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}), false)
	c := devClient(testTimeout)

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			r := request(srv.URL + "/hooks/mnv?tenant=7")
			r.Method = method
			r.Attempt = 3
			res := Deliver(context.Background(), c, r, time.Now())
			checkResult(t, res, 200, true, false)

			mu.Lock()
			got := last
			mu.Unlock()
			if got.verifyErr != nil {
				t.Fatalf("receiver could not verify the signature: %v", got.verifyErr)
			}
			if got.method != method || got.path != "/hooks/mnv?tenant=7" {
				t.Errorf("request %s %s", got.method, got.path)
			}
			if string(got.body) != string(r.Body) {
				t.Errorf("body %q", got.body)
			}
			want := map[string]string{
				"Content-Type":   "application/json",
				"User-Agent":     "mnv-webhook/1",
				"Authorization":  "Bearer " + testAPIKey,
				DeliveryIDHeader: "dlv_01HZX3",
				AttemptHeader:    "3",
			}
			for k, v := range want {
				if g := got.header.Get(k); g != v {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
			if !strings.HasPrefix(got.header.Get(SignatureHeader), "t=") {
				t.Errorf("%s = %q", SignatureHeader, got.header.Get(SignatureHeader))
			}
		})
	}

	t.Run("no API key, no Authorization", func(t *testing.T) {
		r := request(srv.URL)
		r.APIKey = ""
		checkResult(t, Deliver(context.Background(), c, r, time.Now()), 200, true, false)
		mu.Lock()
		defer mu.Unlock()
		if v, ok := last.header["Authorization"]; ok {
			t.Errorf("Authorization sent without an API key: %q", v)
		}
	})

	t.Run("stale signing time is refused by the receiver", func(t *testing.T) {
		res := Deliver(context.Background(), c, request(srv.URL), time.Now().Add(-10*time.Minute))
		checkResult(t, res, 401, false, false)
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(last.verifyErr, ErrSignatureExpired) {
			t.Errorf("receiver error %v, want ErrSignatureExpired", last.verifyErr)
		}
	})
}

func TestDeliverTimeout(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		select { // longer than the client's timeout; gives up when the client does
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	}), false)
	start := time.Now()
	res := Deliver(context.Background(), devClient(150*time.Millisecond), request(srv.URL), time.Now())
	checkResult(t, res, 0, false, true)
	if !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("error %v is not a timeout", res.Err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v with a 150ms timeout", el)
	}
}

func TestDeliverTransportErrors(t *testing.T) {
	// A port with nothing listening: connection refused, worth retrying.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String() + "/hook?token=" + testAPIKey
	_ = ln.Close()
	res := Deliver(context.Background(), devClient(testTimeout), request(closedURL), time.Now())
	checkResult(t, res, 0, false, true)
	if strings.Contains(res.Err.Error(), "token=") {
		t.Errorf("error %q quotes the URL", res.Err)
	}

	// The caller stopping (worker shutdown): the batch was not delivered, retry later.
	srv := newCountingServer(t, okHandler(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = Deliver(ctx, devClient(testTimeout), request(srv.URL), time.Now())
	checkResult(t, res, 0, false, true)
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", res.Err)
	}
}

func TestDeliverPolicyRefusals(t *testing.T) {
	plain := newCountingServer(t, okHandler(), false)
	secure := newCountingServer(t, okHandler(), true)

	tests := []struct {
		name   string
		policy Policy
		url    string
	}{
		{"loopback by default", Policy{}, secure.URL},
		{"loopback with AllowHTTP only", Policy{AllowHTTP: true}, plain.URL},
		{"http not allowed", Policy{AllowedNets: loopbackOnly}, plain.URL},
		{"localhost resolves to loopback", Policy{AllowHTTP: true}, strings.Replace(plain.URL, "127.0.0.1", "localhost", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Deliver(context.Background(), NewClient(tt.policy, testTimeout), request(tt.url), time.Now())
			checkResult(t, res, 0, false, false)
			var perr *Error
			if !errors.As(res.Err, &perr) {
				t.Errorf("error %v (%T) is not a policy *Error", res.Err, res.Err)
			}
		})
	}
	if n := plain.conns.Load() + secure.conns.Load(); n != 0 {
		t.Errorf("servers accepted %d connections", n)
	}
}

func TestDeliverBadRequests(t *testing.T) {
	srv := newCountingServer(t, okHandler(), false)
	c := devClient(testTimeout)
	tests := []struct {
		name   string
		mutate func(*Request)
		client *http.Client
	}{
		{"empty URL", func(r *Request) { r.URL = "" }, c},
		{"relative URL", func(r *Request) { r.URL = "/hook" }, c},
		{"invalid URL", func(r *Request) { r.URL = "https://exa mple.com/" + testAPIKey }, c},
		{"ftp URL", func(r *Request) { r.URL = "ftp://example.com/" }, c},
		{"javascript URL", func(r *Request) { r.URL = "javascript:alert(1)" }, c},
		{"GET", func(r *Request) { r.Method = http.MethodGet }, c},
		{"lower-case post", func(r *Request) { r.Method = "post" }, c},
		{"empty method", func(r *Request) { r.Method = "" }, c},
		{"no signing key", func(r *Request) { r.Keys = nil }, c},
		{"an empty signing key", func(r *Request) { r.Keys = [][]byte{testSecret, nil} }, c},
		{"no message id", func(r *Request) { r.MessageID = "" }, c},
		{"message id with newline", func(r *Request) { r.MessageID = "a\nX-Evil: 1" }, c},
		{"no delivery id with the old signature", func(r *Request) { r.DeliveryID = "" }, c},
		{"delivery id with newline", func(r *Request) { r.DeliveryID = "a\nX-Evil: 1" }, c},
		{"attempt 0", func(r *Request) { r.Attempt = 0 }, c},
		{"API key with newline", func(r *Request) { r.APIKey = testAPIKey + "\r\nX-Evil: 1" }, c},
		{"API key with space", func(r *Request) { r.APIKey = testAPIKey + " x" }, c},
		{"nil client", func(r *Request) {}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(srv.URL)
			tt.mutate(&r)
			res := Deliver(context.Background(), tt.client, r, time.Now())
			checkResult(t, res, 0, false, false)
			var perr *Error
			if !errors.As(res.Err, &perr) {
				t.Errorf("error %v (%T) is not an *Error", res.Err, res.Err)
			}
			if strings.Contains(res.Err.Error(), "exa mple") {
				t.Errorf("error %q quotes the URL", res.Err)
			}
		})
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("server contacted %d times by invalid requests", n)
	}
}
