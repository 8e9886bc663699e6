package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkGetClient is one GET /v1/api/clients through the gateway handler (no HTTP socket on
// the client side) to the real accounts service: a profile of it shows what the gateway costs.
func BenchmarkGetClient(b *testing.B) {
	s := startB(b)
	c := s.accounts.CreateClient(b, 0)
	req := httptest.NewRequest(http.MethodGet, "/v1/api/clients", nil)
	req.Header.Set("X-API-KEY", c.APIKey)
	req.Header.Set("X-CLIENT-ID", c.ID)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			s.handler.ServeHTTP(w, req.Clone(req.Context()))
			if w.Code != http.StatusOK {
				b.Errorf("status %d: %s", w.Code, w.Body)
				return
			}
		}
	})
}
