package people

import (
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestClientTokens: a session's or invitation's secret names its client, and nothing else parses
// as one.
func TestClientTokens(t *testing.T) {
	const client = "0f8fad5b-d9cb-469f-a165-70867728950e"
	tok := clientToken(principal.SessionPrefix, client)
	if !principal.Session.WellFormed(tok) {
		t.Fatalf("%q is not a well-formed session", tok)
	}
	if got, ok := clientOfToken(principal.SessionPrefix, tok); !ok || got != client {
		t.Fatalf("clientOfToken = %q, %v", got, ok)
	}
	if tok == clientToken(principal.SessionPrefix, client) {
		t.Fatal("two secrets of one client are equal")
	}
	for _, bad := range []string{
		"", tok[:len(tok)-41], strings.Replace(tok, principal.SessionPrefix, principal.InvitationPrefix, 1),
		principal.SessionPrefix + strings.Repeat("z", 72), tok + "!", principal.SessionPrefix + strings.Repeat("0", 32),
	} {
		if got, ok := clientOfToken(principal.SessionPrefix, bad); ok {
			t.Errorf("clientOfToken(%q) = %q, want none", bad, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	tests := []struct {
		name string
		edit func(*Config)
		bad  bool
	}{
		{"the default", func(*Config) {}, false},
		{"https", func(c *Config) { c.Origin = "https://console.example.com" }, false},
		{"http off localhost", func(c *Config) { c.Origin = "http://console.example.com" }, true},
		{"an IP address", func(c *Config) { c.Origin = "http://127.0.0.1:8080" }, true},
		{"a path", func(c *Config) { c.Origin = "https://example.com/console" }, true},
		{"idle above the maximum", func(c *Config) { c.IdleTimeout = 13 * time.Hour }, true},
		{"idle of seconds", func(c *Config) { c.IdleTimeout = 3 * time.Second }, false},
		{"idle of less than a second", func(c *Config) { c.IdleTimeout = 500 * time.Millisecond }, true},
		{"a step-up window of a day", func(c *Config) { c.StepUpWindow = 24 * time.Hour }, true},
		{"invitations of a minute", func(c *Config) { c.InvitationTTL = time.Minute }, true},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		if err := c.Validate(); (err != nil) != tt.bad {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
