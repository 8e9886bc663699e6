package clients_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/platform/fault"
)

func TestCanonicalOrigin(t *testing.T) {
	tests := []struct {
		in, want string // want "" means refused
	}{
		{"https://shop.example", "https://shop.example"},
		{"HTTPS://Shop.Example", "https://shop.example"},
		{"https://shop.example/", "https://shop.example"},
		{"https://shop.example:443", "https://shop.example"},
		{"https://shop.example:8443", "https://shop.example:8443"},
		{"https://shop.example:08443", "https://shop.example:8443"},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example"},
		{"https://192.0.2.10", "https://192.0.2.10"},
		{"https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443"},
		{"http://localhost:8081", "http://localhost:8081"},
		{"http://127.0.0.1:8081", "http://127.0.0.1:8081"},
		{"http://[::1]", "http://[::1]"},
		{"http://localhost:80", "http://localhost"},
		// Plain http elsewhere proves nothing about who serves the page.
		{"http://shop.example", ""},
		{"http://10.0.0.1", ""},
		{"ftp://shop.example", ""},
		{"https://shop.example/checkout", ""},
		{"https://shop.example?x=1", ""},
		{"https://shop.example#top", ""},
		{"https://user@shop.example", ""},
		{"https://*.shop.example", ""},
		{"https://bücher.example", ""},
		{"https://shop.example:0", ""},
		{"https://shop.example:70000", ""},
		{"shop.example", ""},
		{"null", ""},
		{"", ""},
		{"https://", ""},
		{"https://shop.example\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := clients.CanonicalOrigin(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("CanonicalOrigin(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("CanonicalOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestWebOrigins(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	a, err := env.Clients.Create(ctx, valid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Clients.Create(ctx, valid())
	if err != nil {
		t.Fatal(err)
	}

	// A new client allows no origin.
	if ok, err := env.Clients.AllowsWebOrigin(ctx, a.Client.ID, "https://shop.example"); err != nil || ok {
		t.Fatalf("a new client allows https://shop.example: %v %v", ok, err)
	}
	got, err := env.Clients.SetWebOrigins(ctx, a.Client.ID, []string{"https://Shop.Example/", "https://shop.example", "http://localhost:8081"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Origin != "http://localhost:8081" || got[1].Origin != "https://shop.example" {
		t.Fatalf("set = %+v", got)
	}
	if _, err := env.Clients.SetWebOrigins(ctx, b.Client.ID, []string{"https://other.example"}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		client, origin string
		want           bool
	}{
		{a.Client.ID, "https://shop.example", true},
		{a.Client.ID, "http://localhost:8081", true},
		// Browsers send the canonical form; anything else did not come from one.
		{a.Client.ID, "https://SHOP.example", false},
		{a.Client.ID, "https://shop.example/", false},
		{a.Client.ID, "https://shop.example:443", false},
		{a.Client.ID, "https://shop.example.attacker.example", false},
		{a.Client.ID, "http://shop.example", false},
		{a.Client.ID, "null", false},
		{a.Client.ID, "", false},
		// Another client's origin is not this client's.
		{a.Client.ID, "https://other.example", false},
		{b.Client.ID, "https://shop.example", false},
		{"not-a-client", "https://shop.example", false},
	} {
		ok, err := env.Clients.AllowsWebOrigin(ctx, tt.client, tt.origin)
		if err != nil || ok != tt.want {
			t.Errorf("AllowsWebOrigin(%s, %q) = %v, %v; want %v", tt.client[:8], tt.origin, ok, err, tt.want)
		}
	}

	// Replacing keeps what stays (with its creation time) and drops the rest.
	again, err := env.Clients.SetWebOrigins(ctx, a.Client.ID, []string{"https://shop.example", "https://www.shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].Origin != "https://shop.example" || !again[0].CreatedAt.Equal(got[1].CreatedAt) || again[1].Origin != "https://www.shop.example" {
		t.Fatalf("replaced = %+v (before %+v)", again, got)
	}
	if ok, _ := env.Clients.AllowsWebOrigin(ctx, a.Client.ID, "http://localhost:8081"); ok {
		t.Fatal("a dropped origin is still allowed")
	}
	if cleared, err := env.Clients.SetWebOrigins(ctx, a.Client.ID, nil); err != nil || len(cleared) != 0 {
		t.Fatalf("clear = %+v, %v", cleared, err)
	}

	// Refusals change nothing.
	many := make([]string, clients.MaxWebOrigins+1)
	for i := range many {
		many[i] = fmt.Sprintf("https://s%d.example", i)
	}
	for name, list := range map[string][]string{
		"plain http":   {"https://ok.example", "http://shop.example"},
		"a path":       {"https://shop.example/pay"},
		"too many":     many,
		"a wildcard":   {"*"},
		"long garbage": {strings.Repeat("x", 500)},
	} {
		if _, err := env.Clients.SetWebOrigins(ctx, b.Client.ID, list); fault.Find(err, fault.InvalidArgument) == nil || fault.Find(err, fault.InvalidArgument).Field != "origins" {
			t.Errorf("%s: err = %v, want invalid origins", name, err)
		}
	}
	if list, _ := env.Clients.WebOrigins(ctx, b.Client.ID); len(list) != 1 || list[0].Origin != "https://other.example" {
		t.Fatalf("after refusals: %+v", list)
	}
	if _, err := env.Clients.SetWebOrigins(ctx, "6f1c2e4a-0000-4000-8000-000000000000", []string{"https://shop.example"}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}
