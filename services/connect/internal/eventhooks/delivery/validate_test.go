package delivery

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/events"
)

// TestValidateData: an event's data must be one JSON object, nothing before or after it.
func TestValidateData(t *testing.T) {
	tests := []struct {
		data string
		ok   bool
	}{
		{`{}`, true},
		{`{"verificationId":"v","charged":1,"nested":{"a":[1,2]}}`, true},
		{``, false},
		{`[]`, false},
		{`"text"`, false},
		{`null`, false},
		{` {}`, false},
		{`{`, false},
		{`{"a":1}x`, false},
		{`{"a":1}{"b":2}`, false},
		{`{"a":}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.data, func(t *testing.T) {
			ev := events.Event{
				ID: "evt_0123456789abcdef0123456789abcdef", Type: events.VerificationCompleted,
				ClientID: "7f1f6b0e-7a43-4c3e-9d55-1f1a6c2b9e01", CreatedAt: time.Now(), Data: json.RawMessage(tt.data),
			}
			if err := validate(ev); (err == nil) != tt.ok {
				t.Errorf("validate(%q) = %v, want ok %v", tt.data, err, tt.ok)
			}
		})
	}
}
