package phone_test

import (
	"testing"

	"github.com/mnvhq/mnv/services/platform/phone"
)

func TestLineType(t *testing.T) {
	for _, tt := range []struct {
		number string
		want   phone.LineType
	}{
		{"+447400123456", phone.LineMobile},
		{"+33612345678", phone.LineMobile},
		{"+12015550123", phone.LineFixedOrMobile}, // the North American plan does not tell them apart
		{"+35312345678", phone.LineFixed},
		{"+8823451234567", phone.LineVoIP},
		{"+881612345678", phone.LineMobile}, // a satellite network: mobile, and high-cost
	} {
		n, err := phone.Parse(tt.number)
		if err != nil {
			t.Fatalf("%s: %v", tt.number, err)
		}
		if got := n.LineType(); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.number, got, tt.want)
		}
	}
}
