package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// TestErrors: what each constructor puts in front of the caller, and how a rule's error is
// found again once wrapped with context for the logs.
func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fault.Error
	}{
		{"invalid names its field in the message", fault.Invalid("size", "must be at most %d", 100), fault.Error{Reason: fault.InvalidArgument, Field: "size", Msg: "size: must be at most 100"}},
		{"invalid without a field", fault.Invalid("", "malformed"), fault.Error{Reason: fault.InvalidArgument, Msg: "malformed"}},
		{"not enabled keeps the message bare", fault.NotEnabled("operatorId", "operator %q is off", "x"), fault.Error{Reason: fault.FeatureNotEnabled, Field: "operatorId", Msg: `operator "x" is off`}},
		{"limited carries its wait", fault.Limited("slow down", time.Minute), fault.Error{Reason: fault.RateLimited, Msg: "slow down", RetryAfter: time.Minute}},
		{"new", fault.New(fault.Conflict, "taken"), fault.Error{Reason: fault.Conflict, Msg: "taken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wrapped := fmt.Errorf("store: %w", tt.err)
			f := fault.Find(wrapped, tt.want.Reason)
			if f == nil || *f != tt.want {
				t.Fatalf("Find = %+v, want %+v", f, tt.want)
			}
			if tt.err.Error() != tt.want.Msg {
				t.Errorf("Error() = %q, want the caller's message %q", tt.err.Error(), tt.want.Msg)
			}
			if fault.Find(wrapped, fault.Internal) != nil {
				t.Error("Find matched another reason")
			}
		})
	}
	if fault.Find(errors.New("driver"), fault.Internal) != nil || fault.Find(nil, fault.NotFound) != nil {
		t.Error("Find found a rule's error where there is none")
	}
	// Sentinels are compared by identity: another error with the same reason is another error.
	if errors.Is(fault.New(fault.NotFound, "not found"), fault.ErrNotFound) || !errors.Is(fmt.Errorf("x: %w", fault.ErrNotFound), fault.ErrNotFound) {
		t.Error("sentinels must match by identity, through wrapping")
	}
}
