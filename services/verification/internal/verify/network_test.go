package verify_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
)

func TestNetworkOutcome(t *testing.T) {
	tests := []struct {
		name        string
		answer      operatorapi.Answer
		err         error
		outcome     domain.Status
		reason      string
		unavailable bool
	}{
		{"verified", operatorapi.Answer{Status: 200, Verified: true}, nil, domain.StatusVerified, domain.ReasonMatch, false},
		{"not verified", operatorapi.Answer{Status: 200}, nil, domain.StatusNotVerified, domain.ReasonMismatch, false},
		{"not authenticated by the mobile network", operatorapi.Answer{Status: 403, Code: "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK"}, nil, domain.StatusUndetermined, domain.ReasonNotAuthenticatedByMobileNetwork, false},
		{"token expired or used", operatorapi.Answer{Status: 401, Code: "UNAUTHENTICATED"}, nil, domain.StatusExpired, domain.ReasonTokenExpired, false},
		{"401 without a body", operatorapi.Answer{Status: 401}, nil, domain.StatusExpired, domain.ReasonTokenExpired, false},
		{"permission denied", operatorapi.Answer{Status: 403, Code: "PERMISSION_DENIED"}, nil, domain.StatusUndetermined, domain.ReasonOperatorRefused, false},
		{"invalid argument", operatorapi.Answer{Status: 400, Code: "INVALID_ARGUMENT"}, nil, domain.StatusUndetermined, domain.ReasonOperatorRefused, false},
		{"5xx", operatorapi.Answer{}, fmt.Errorf("%w: status 503", operatorapi.ErrUnavailable), "", "", true},
		{"timeout", operatorapi.Answer{}, fmt.Errorf("%w: context deadline exceeded", operatorapi.ErrUnavailable), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcome, reason, err := verify.NetworkOutcome(tt.answer, tt.err)
			if outcome != tt.outcome || reason != tt.reason {
				t.Errorf("got %s/%s, want %s/%s", outcome, reason, tt.outcome, tt.reason)
			}
			if got := errors.Is(err, fault.ErrUnavailable); got != tt.unavailable || (err != nil) != tt.unavailable {
				t.Errorf("error %v, want unavailable %v", err, tt.unavailable)
			}
			if charged := domain.Charged(outcome); charged != (tt.outcome == domain.StatusVerified || tt.outcome == domain.StatusNotVerified) {
				t.Errorf("charged %v for %s", charged, outcome)
			}
		})
	}
}
