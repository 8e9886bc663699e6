package verify

import (
	"context"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestListChecksItsFilters: each filter of the verifications list takes the values the API
// documents and refuses anything else as invalid, naming the query parameter (the store is
// not asked).
func TestListChecksItsFilters(t *testing.T) {
	s := func(v string) *string { return &v }
	st := func(v domain.Status) *domain.Status { return &v }
	now := time.Now()
	later := now.Add(time.Hour)
	tests := []struct {
		name      string
		f         domain.VerificationFilter
		wantField string // "" when accepted
	}{
		{"none", domain.VerificationFilter{}, ""},
		{"every filter", domain.VerificationFilter{Status: st(domain.StatusVerified), From: &now, To: &later,
			Reason: s(domain.ReasonMatch), OperatorID: s("acme-ae"), Method: s("NETWORK_API")}, ""},
		{"each reason", domain.VerificationFilter{Reason: s(domain.ReasonNumberShared)}, ""},
		{"an operator id no registry holds", domain.VerificationFilter{OperatorID: s("gone-operator")}, ""},
		{"an internal status", domain.VerificationFilter{Status: st(domain.StatusPending)}, "status"},
		{"from after to", domain.VerificationFilter{From: &later, To: &now}, "from"},
		{"an unknown reason", domain.VerificationFilter{Reason: s("MATCH")}, "reason"},
		{"a reason in lower case", domain.VerificationFilter{Reason: s("number_match")}, "reason"},
		{"an empty reason", domain.VerificationFilter{Reason: s("")}, "reason"},
		{"an operator id in upper case", domain.VerificationFilter{OperatorID: s("Sandbox")}, "operatorId"},
		{"an operator id with a space", domain.VerificationFilter{OperatorID: s("acme ae")}, "operatorId"},
		{"an empty operator id", domain.VerificationFilter{OperatorID: s("")}, "operatorId"},
		{"an operator id of 64 characters", domain.VerificationFilter{OperatorID: s("a123456789012345678901234567890123456789012345678901234567890123")}, "operatorId"},
		{"an unknown method", domain.VerificationFilter{Method: s("SMS")}, "serviceType"},
	}
	svc := &Service{st: newFakeStore(time.Now)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.List(context.Background(), "client", tt.f, 10, 0)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("List = %v, want accepted", err)
				}
				return
			}
			if f := fault.Find(err, fault.InvalidArgument); f == nil || f.Field != tt.wantField {
				t.Fatalf("List = %v, want INVALID_ARGUMENT on %s", err, tt.wantField)
			}
		})
	}
}
