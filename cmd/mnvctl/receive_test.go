package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestReceiverVerifies(t *testing.T) {
	const (
		oldSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		newSecret   = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
		otherSecret = "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk="
	)
	body := []byte(`{"id": "evt_1", "type": "ping", "data": {}}`)
	sign := func(secret, id string, ts time.Time, payload []byte) http.Header {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, ts, payload)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		h.Set("webhook-signature", sig)
		return h
	}
	tests := []struct {
		name     string
		secrets  []string
		header   http.Header
		method   string
		body     []byte
		want     int
		wantLine string
	}{
		{"signed with the secret", []string{newSecret}, sign(newSecret, "evt_1", time.Now(), body), http.MethodPost, body, http.StatusNoContent, `{"id":"evt_1","type":"ping","data":{}}`},
		{"old secret during a rotation", []string{newSecret, oldSecret}, sign(oldSecret, "evt_1", time.Now(), body), http.MethodPost, body, http.StatusNoContent, `"evt_1"`},
		{"another secret", []string{newSecret}, sign(otherSecret, "evt_1", time.Now(), body), http.MethodPost, body, http.StatusUnauthorized, ""},
		{"replayed under another id", []string{newSecret}, func() http.Header {
			h := sign(newSecret, "evt_1", time.Now(), body)
			h.Set("webhook-id", "evt_2")
			return h
		}(), http.MethodPost, body, http.StatusUnauthorized, ""},
		{"stale", []string{newSecret}, sign(newSecret, "evt_1", time.Now().Add(-10*time.Minute), body), http.MethodPost, body, http.StatusUnauthorized, ""},
		{"changed body", []string{newSecret}, sign(newSecret, "evt_1", time.Now(), body), http.MethodPost, []byte(`{"id":"evt_1","type":"pong"}`), http.StatusUnauthorized, ""},
		{"unsigned", []string{newSecret}, http.Header{}, http.MethodPost, body, http.StatusUnauthorized, ""},
		{"GET", []string{newSecret}, http.Header{}, http.MethodGet, nil, http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks []*standardwebhooks.Webhook
			for _, s := range tt.secrets {
				wh, err := standardwebhooks.NewWebhook(s)
				if err != nil {
					t.Fatal(err)
				}
				hooks = append(hooks, wh)
			}
			var out, errOut bytes.Buffer
			done := 0
			rc := &receiver{hooks: hooks, out: &out, errOut: &errOut, left: 1, done: func() { done++ }}
			req := httptest.NewRequest(tt.method, "/", bytes.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			rc.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d (stderr %q)", rec.Code, tt.want, errOut.String())
			}
			if tt.want == http.StatusNoContent {
				if !strings.Contains(out.String(), tt.wantLine) || strings.Count(out.String(), "\n") != 1 || done != 1 {
					t.Fatalf("printed %q (done %d), want one line with %s", out.String(), done, tt.wantLine)
				}
			} else if out.Len() != 0 || done != 0 {
				t.Fatalf("a refused delivery was printed: %q", out.String())
			}
		})
	}
}
