package principal_test

import (
	"testing"

	"github.com/mnvhq/mnv/services/platform/principal"
)

func TestPrincipalHas(t *testing.T) {
	p := principal.Principal{Features: []string{"VERIFY", "SANDBOX"}}
	tests := []struct {
		feature string
		want    bool
	}{
		{"VERIFY", true},
		{"SANDBOX", true},
		{"CONNECT", false},
		{"verify", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := p.Has(tt.feature); got != tt.want {
			t.Errorf("Has(%q) = %v, want %v", tt.feature, got, tt.want)
		}
	}
}
