package tracing

import "testing"

func TestRedactPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/api/verify": "/v1/api/verify",
		"/v1/api/web/transactions/6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8/capture": "/v1/api/web/transactions/{id}/capture",
		"/v1/api/web/transactions/abcdef/capture":                               "/v1/api/web/transactions/abcdef/capture",
		"/v1/api/web/transactions/abcdefabcdefabcdefabcdef/capture":             "/v1/api/web/transactions/{id}/capture",
		"/v1/api/me/connect/import/sample.csv":                                  "/v1/api/me/connect/import/sample.csv",
		"/v1/api/me/stuck-plus/sessions/x1/reveal":                              "/v1/api/me/stuck-plus/sessions/{id}/reveal",
		"/v1/api/clients/ABC/rotate-key":                                        "/v1/api/clients/{id}/rotate-key",
		"/v1/api/%2F..%2F":                                                      "/v1/api/{id}",
		"/":                                                                     "/",
	} {
		if got := redactPath(in); got != want {
			t.Errorf("redactPath(%q) = %q, want %q", in, got, want)
		}
	}
}
