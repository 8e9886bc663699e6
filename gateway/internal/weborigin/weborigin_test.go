package weborigin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
)

func TestTransactionRoute(t *testing.T) {
	tests := []struct {
		path      string
		id, route string
		ok        bool
	}{
		{"/v1/api/web/transactions/abc/capture", "abc", captureRoute, true},
		{"/v1/api/web/transactions/abc/complete", "abc", completeRoute, true},
		{"/v1/api/web/transactions/abc/code", "abc", codeRoute, true},
		{"/v1/api/web/transactions/abc/workflow", "abc", workflowRoute, true},
		{"/v1/api/web/transactions/abc/resend", "abc", resendRoute, true},
		{"/v1/api/web/transactions/abc", "", "", false},
		{"/v1/api/web/transactions/abc/", "", "", false},
		{"/v1/api/web/transactions/abc/reveal", "", "", false},
		{"/v1/api/web/transactions/abc/capture/x", "", "", false},
		{"/v1/api/web/transactions/", "", "", false},
		{"/v1/api/web/transactions//capture", "", "", false},
		{"/v1/api/opportunity/abc", "", "", false},
	}
	for _, tt := range tests {
		id, route, ok := transactionRoute(tt.path)
		if id != tt.id || route != tt.route || ok != tt.ok {
			t.Errorf("transactionRoute(%q) = %q, %q, %v; want %q, %q, %v", tt.path, id, route, ok, tt.id, tt.route, tt.ok)
		}
	}
}

// TestRedirect: the callback's answer for a browser capture sends the browser to the page it
// names, with 303 and no Referer; every other answer is left to the envelope.
func TestRedirect(t *testing.T) {
	page := "https://shop.example/checkout?step=2#mnv_code=c-1&mnv_transaction=t-1"
	tests := []struct {
		name     string
		msg      proto.Message
		wantErr  bool
		location string // "": no redirect
	}{
		{"a browser capture's callback", &verificationv1.CompleteSessionAuthorizationResponse{RedirectUrl: &page}, false, page},
		{"an SDK session's callback", &verificationv1.CompleteSessionAuthorizationResponse{SessionId: "s-1"}, false, ""},
		{"another answer", &verificationv1.CaptureTransactionResponse{TransactionId: "t-1"}, false, ""},
		{"a page that is no web page", &verificationv1.CompleteSessionAuthorizationResponse{RedirectUrl: proto.String("javascript:alert(1)")}, true, ""},
		{"a relative page", &verificationv1.CompleteSessionAuthorizationResponse{RedirectUrl: proto.String("/checkout")}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			err := Redirect(context.Background(), w, tt.msg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Redirect = %v, want error %v", err, tt.wantErr)
			}
			if tt.location == "" {
				if w.Code != http.StatusOK || w.Header().Get("Location") != "" || w.Header().Get("Referrer-Policy") != "" {
					t.Errorf("answered %d, Location %q", w.Code, w.Header().Get("Location"))
				}
				return
			}
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tt.location ||
				w.Header().Get("Referrer-Policy") != "no-referrer" || w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("answered %d %v", w.Code, w.Header())
			}
		})
	}
}
