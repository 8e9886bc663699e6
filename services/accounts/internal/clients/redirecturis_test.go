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

func TestValidRedirectURI(t *testing.T) {
	tests := []struct {
		uri string
		ok  bool
	}{
		{"https://shop.example/camara/callback", true},
		{"https://shop.example/cb?tenant=7", true},
		{"https://shop.example:8443/cb", true},
		{"https://[2001:db8::1]/cb", true},
		{"https://shop.example", true},
		{"http://127.0.0.1:7788/cb", true},
		{"http://[::1]/cb", true},
		{"http://localhost:8081/cb", true},
		{"https://xn--bcher-kva.example/cb", true},
		{"https://shop.example/a%20b", true},
		// Plain http off loopback can be rewritten by anyone on the path.
		{"http://shop.example/cb", false},
		{"http://127.0.0.1.evil.example/cb", false},
		{"https://shop.example/cb#frag", false},
		{"https://shop.example/cb#", false},
		{"https://user@shop.example/cb", false},
		{"https://*.shop.example/cb", false},
		{"HTTPS://shop.example/cb", false},
		{"https://Shop.example/cb", false},
		{"https://bücher.example/cb", false},
		{"https://shop.example/a b", false},
		{"https://shop.example/cb\n", false},
		{"https://shop.example:0/cb", false},
		{"https://shop.example:/cb", false},
		{"https://shop.example:08443/cb", false},
		{"com.example.app:/cb", false},
		{"/cb", false},
		{"shop.example/cb", false},
		{"", false},
		{"https://shop.example/" + strings.Repeat("a", clients.MaxRedirectURILength), false},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			if err := clients.ValidRedirectURI(tt.uri); (err == nil) != tt.ok {
				t.Fatalf("ValidRedirectURI(%q) = %v, want ok %v", tt.uri, err, tt.ok)
			}
		})
	}
}

func TestRedirectURIMatches(t *testing.T) {
	tests := []struct {
		registered, requested string
		want                  bool
	}{
		{"https://shop.example/cb", "https://shop.example/cb", true},
		{"https://shop.example/cb?x=1", "https://shop.example/cb?x=1", true},
		// Exact: the same origin is not enough, nor an equivalent spelling.
		{"https://shop.example/cb", "https://shop.example/other", false},
		{"https://shop.example/cb", "https://shop.example/cb/", false},
		{"https://shop.example/cb", "https://shop.example/cb?x=1", false},
		{"https://shop.example/cb", "https://shop.example/cb?", false},
		{"https://shop.example/cb", "https://shop.example/cb#x", false},
		{"https://shop.example/cb", "https://shop.example:443/cb", false},
		{"https://shop.example/cb", "https://SHOP.example/cb", false},
		{"https://shop.example/cb", "https://shop.example/%63b", false},
		{"https://shop.example/cb?x=1", "https://shop.example/cb?x=2", false},
		{"https://shop.example:8443/cb", "https://shop.example:9443/cb", false},
		// A loopback IP literal over http: any port, the rest exact.
		{"http://127.0.0.1/cb", "http://127.0.0.1:53121/cb", true},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1:53121/cb", true},
		{"http://[::1]:7788/cb", "http://[::1]:1/cb", true},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1:53121/other", false},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1:53121/cb#x", false},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1:0/cb", false},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1:99999/cb", false},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1.evil.example/cb", false},
		{"http://127.0.0.1:7788/cb", "http://127.0.0.1@evil.example/cb", false},
		{"http://127.0.0.1:7788/cb", "http://[::1]:7788/cb", false},
		{"http://127.0.0.1:7788/cb", "https://127.0.0.1:7788/cb", false},
		// A name is not an address: localhost keeps its port.
		{"http://localhost:7788/cb", "http://localhost:7789/cb", false},
		{"https://127.0.0.1:7788/cb", "https://127.0.0.1:7789/cb", false},
	}
	for _, tt := range tests {
		if got := clients.RedirectURIMatches(tt.registered, tt.requested); got != tt.want {
			t.Errorf("RedirectURIMatches(%q, %q) = %v, want %v", tt.registered, tt.requested, got, tt.want)
		}
	}
}

func TestRedirectURIs(t *testing.T) {
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

	// A new client has registered none, and is told so.
	if ok, registered, err := env.Clients.AllowsRedirectURI(ctx, a.Client.ID, "https://shop.example/cb"); err != nil || ok || registered {
		t.Fatalf("a new client: allowed %v registered %v %v", ok, registered, err)
	}
	got, err := env.Clients.SetRedirectURIs(ctx, a.Client.ID, []string{"https://shop.example/cb", "https://shop.example/cb", "http://127.0.0.1:7788/cb"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].URI != "http://127.0.0.1:7788/cb" || got[1].URI != "https://shop.example/cb" {
		t.Fatalf("set = %+v", got)
	}
	if _, err := env.Clients.SetRedirectURIs(ctx, b.Client.ID, []string{"https://other.example/cb"}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		client, uri string
		want        bool
	}{
		{a.Client.ID, "https://shop.example/cb", true},
		{a.Client.ID, "http://127.0.0.1:40000/cb", true},
		{a.Client.ID, "https://shop.example/other", false},
		{a.Client.ID, "https://shop.example/cb?x=1", false},
		{a.Client.ID, "https://shop.example/cb#x", false},
		{a.Client.ID, "", false},
		// Another client's URI is not this client's.
		{a.Client.ID, "https://other.example/cb", false},
		{b.Client.ID, "https://shop.example/cb", false},
		{"not-a-client", "https://shop.example/cb", false},
	} {
		ok, _, err := env.Clients.AllowsRedirectURI(ctx, tt.client, tt.uri)
		if err != nil || ok != tt.want {
			t.Errorf("AllowsRedirectURI(%s, %q) = %v, %v; want %v", tt.client[:8], tt.uri, ok, err, tt.want)
		}
	}
	if _, registered, _ := env.Clients.AllowsRedirectURI(ctx, a.Client.ID, "https://shop.example/other"); !registered {
		t.Error("a client with URIs is said to have none")
	}

	// Replacing keeps what stays (with its registration time) and drops the rest.
	again, err := env.Clients.SetRedirectURIs(ctx, a.Client.ID, []string{"https://shop.example/cb", "https://shop.example/cb2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].URI != "https://shop.example/cb" || !again[0].CreatedAt.Equal(got[1].CreatedAt) || again[1].URI != "https://shop.example/cb2" {
		t.Fatalf("replaced = %+v (before %+v)", again, got)
	}
	if ok, _, _ := env.Clients.AllowsRedirectURI(ctx, a.Client.ID, "http://127.0.0.1:7788/cb"); ok {
		t.Fatal("a dropped URI is still allowed")
	}
	if cleared, err := env.Clients.SetRedirectURIs(ctx, a.Client.ID, nil); err != nil || len(cleared) != 0 {
		t.Fatalf("clear = %+v, %v", cleared, err)
	}

	// Refusals change nothing.
	many := make([]string, clients.MaxRedirectURIs+1)
	for i := range many {
		many[i] = fmt.Sprintf("https://shop.example/cb%d", i)
	}
	for name, list := range map[string][]string{
		"plain http":   {"https://ok.example/cb", "http://shop.example/cb"},
		"a fragment":   {"https://shop.example/cb#x"},
		"too many":     many,
		"a wildcard":   {"https://*.example/cb"},
		"too long":     {"https://shop.example/" + strings.Repeat("x", 500)},
		"not a URI":    {"cb"},
		"an empty one": {""},
	} {
		if _, err := env.Clients.SetRedirectURIs(ctx, b.Client.ID, list); fault.Find(err, fault.InvalidArgument) == nil || fault.Find(err, fault.InvalidArgument).Field != "redirectUris" {
			t.Errorf("%s: err = %v, want invalid redirectUris", name, err)
		}
	}
	if list, _ := env.Clients.RedirectURIs(ctx, b.Client.ID); len(list) != 1 || list[0].URI != "https://other.example/cb" {
		t.Fatalf("after refusals: %+v", list)
	}
	if _, err := env.Clients.SetRedirectURIs(ctx, "6f1c2e4a-0000-4000-8000-000000000000", []string{"https://shop.example/cb"}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}
