package domain_test

import (
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func TestBalanceValidity(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	tests := []struct {
		name      string
		status    principal.Status
		balance   int64
		expires   *time.Time
		wantValid bool
		wantDays  *int32
	}{
		{"no expiry", principal.StatusActive, 10, nil, true, nil},
		{"29.5 days left", principal.StatusActive, 10, at(29*24*time.Hour + 12*time.Hour), true, ptr(29)},
		{"less than a day", principal.StatusActive, 10, at(time.Hour), true, ptr(0)},
		{"expires now", principal.StatusActive, 10, at(0), false, ptr(0)},
		{"expired", principal.StatusActive, 10, at(-48 * time.Hour), false, ptr(0)},
		{"empty", principal.StatusActive, 0, nil, false, nil},
		{"suspended", principal.StatusSuspended, 10, nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := domain.Client{Status: tt.status, Balance: tt.balance, BalanceExpiresAt: tt.expires}
			if got := c.BalanceValid(now); got != tt.wantValid {
				t.Errorf("BalanceValid = %v, want %v", got, tt.wantValid)
			}
			got := c.DaysUntilExpiry(now)
			if (got == nil) != (tt.wantDays == nil) || (got != nil && *got != *tt.wantDays) {
				t.Errorf("DaysUntilExpiry = %v, want %v", deref(got), deref(tt.wantDays))
			}
		})
	}
}

func ptr(v int32) *int32 { return &v }

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
