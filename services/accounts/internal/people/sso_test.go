package people

import "testing"

// TestConsolePage: a step-up comes back only to a page of the console on this host.
func TestConsolePage(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"", "/console/"},
		{"/console", "/console/"},
		{"/console/", "/console/"},
		{"/console/keys", "/console/keys"},
		{"/console/webhooks/7d444840-9dc0-11d1-b245-5ffdce74fad2", "/console/webhooks/7d444840-9dc0-11d1-b245-5ffdce74fad2"},
		{"//evil.example/console/", ""},
		{"https://evil.example/console/", ""},
		{"/console//evil.example", ""},
		{"/console/../v1/api/me", ""},
		{"/console/./keys", ""},
		{"/console/%2e%2e/x", ""},
		{"/console/keys?step-up=failed", ""},
		{"/console/keys#x", ""},
		{"/console\\evil", ""},
		{"/consolex", ""},
		{"/v1/api/me/api-keys", ""},
		{"/console/k eys", ""},
		{"/console/kéys", ""},
	} {
		got, err := consolePage(tt.in)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("consolePage(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
