package clientip_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/clientip"
)

func mustPrefixes(t testing.TB, spec string) []netip.Prefix {
	t.Helper()
	p, err := clientip.ParsePrefixes(spec)
	if err != nil {
		t.Fatalf("ParsePrefixes(%q): %v", spec, err)
	}
	return p
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		spec string
		want []string // nil with wantErr
		err  bool
	}{
		{"", nil, false},
		{"   ", nil, false},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, false},
		{"10.1.2.3/8", []string{"10.0.0.0/8"}, false}, // masked
		{"10.0.0.0/8, 192.0.2.7 ,2001:db8::/32", []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"}, false},
		{"::1", []string{"::1/128"}, false},
		{"::ffff:10.0.0.1", []string{"10.0.0.1/32"}, false},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}, false},
		{"127.0.0.1,::1", []string{"127.0.0.1/32", "::1/128"}, false},
		{"10.0.0.0/8,", nil, true},
		{",10.0.0.0/8", nil, true},
		{"10.0.0.0/8,,192.0.2.1", nil, true},
		{"10.0.0.0/33", nil, true},
		{"10.0.0.0/", nil, true},
		{"not-an-ip", nil, true},
		{"10.0.0.0/8 192.0.2.1", nil, true},
		{"fe80::1%eth0", nil, true},
		{"fe80::%eth0/64", nil, true},
		{"0.0.0.0/0", nil, true},
		{"::/0", nil, true},
		{"::ffff:0.0.0.0/96", nil, true},
		{"10.0.0.1:80", nil, true},
	}
	for _, tt := range tests {
		got, err := clientip.ParsePrefixes(tt.spec)
		if tt.err {
			if err == nil {
				t.Errorf("ParsePrefixes(%q) = %v, want an error", tt.spec, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePrefixes(%q): %v", tt.spec, err)
			continue
		}
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		if !slices.Equal(gotS, tt.want) {
			t.Errorf("ParsePrefixes(%q) = %v, want %v", tt.spec, gotS, tt.want)
		}
	}
}

func TestClientAddr(t *testing.T) {
	tests := []struct {
		name    string
		trusted string
		remote  string
		xff     []string
		want    string // "" when ok is false
	}{
		// No trusted proxies: the socket is the client whatever the headers say.
		{"direct, no header", "", "203.0.113.9:5555", nil, "203.0.113.9"},
		{"direct spoof of loopback", "", "203.0.113.9:5555", []string{"127.0.0.1"}, "203.0.113.9"},
		{"direct spoof of an operator range", "", "203.0.113.9:5555", []string{"198.51.100.1, 198.51.100.2"}, "203.0.113.9"},
		{"direct from loopback, no proxies", "", "127.0.0.1:5555", []string{"198.51.100.1"}, "127.0.0.1"},
		// Trusted proxies configured, but the socket is not one of them.
		{"untrusted socket", "10.0.0.0/8", "203.0.113.9:5555", []string{"10.0.0.1"}, "203.0.113.9"},
		{"untrusted socket spoofing a chain", "10.0.0.0/8", "203.0.113.9:5555", []string{"127.0.0.1, 10.0.0.1"}, "203.0.113.9"},
		// Through a trusted proxy.
		{"proxy, one hop", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"proxy, client spoofed loopback before it", "10.0.0.0/8", "10.0.0.5:443", []string{"127.0.0.1, 203.0.113.9"}, "203.0.113.9"},
		{"proxy, spoof as a separate header value", "10.0.0.0/8", "10.0.0.5:443", []string{"127.0.0.1", "203.0.113.9"}, "203.0.113.9"},
		{"proxy, untrusted address right of a spoof", "10.0.0.0/8", "10.0.0.5:443", []string{"1.2.3.4, 127.0.0.1"}, "127.0.0.1"},
		{"two trusted proxies", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"two trusted proxies, spoofed prefix", "10.0.0.0/8", "10.0.0.5:443", []string{"198.51.100.1, 203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"trusted proxy spread over values", "10.0.0.0/8,192.0.2.1", "10.0.0.5:443", []string{"198.51.100.1", "203.0.113.9, 192.0.2.1", "10.2.2.2"}, "203.0.113.9"},
		{"no header from the proxy", "10.0.0.0/8", "10.0.0.5:443", nil, "10.0.0.5"},
		{"empty header from the proxy", "10.0.0.0/8", "10.0.0.5:443", []string{""}, "10.0.0.5"},
		{"every hop trusted: the leftmost", "10.0.0.0/8", "10.0.0.5:443", []string{"10.9.9.9, 10.8.8.8"}, "10.9.9.9"},
		{"spaces and tabs", "10.0.0.0/8", "10.0.0.5:443", []string{"  198.51.100.1 ,\t203.0.113.9\t,10.1.1.1  "}, "203.0.113.9"},
		// Garbage stops the walk at the last trusted hop (or the socket).
		{"garbage only", "10.0.0.0/8", "10.0.0.5:443", []string{"garbage"}, "10.0.0.5"},
		{"unknown", "10.0.0.0/8", "10.0.0.5:443", []string{"unknown"}, "10.0.0.5"},
		{"garbage right of the client", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9, nope"}, "10.0.0.5"},
		{"garbage after a trusted hop", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9, nope, 10.1.1.1"}, "10.1.1.1"},
		{"garbage left of the client is never reached", "10.0.0.0/8", "10.0.0.5:443", []string{"nope, 203.0.113.9"}, "203.0.113.9"},
		{"garbage left of trusted hops", "10.0.0.0/8", "10.0.0.5:443", []string{"nope, 10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"empty entry", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9,,10.1.1.1"}, "10.1.1.1"},
		{"trailing comma", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9,"}, "10.0.0.5"},
		{"injected second address in one entry", "10.0.0.0/8", "10.0.0.5:443", []string{"127.0.0.1 203.0.113.9"}, "10.0.0.5"},
		{"CIDR is not an address", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.0/24"}, "10.0.0.5"},
		{"IPv4 in brackets is garbage", "10.0.0.0/8", "10.0.0.5:443", []string{"[203.0.113.9]"}, "10.0.0.5"},
		// Entry forms.
		{"entry with port", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9:1234"}, "203.0.113.9"},
		{"IPv6 entry", "10.0.0.0/8", "10.0.0.5:443", []string{"2001:db8::9"}, "2001:db8::9"},
		{"IPv6 entry in brackets", "10.0.0.0/8", "10.0.0.5:443", []string{"[2001:db8::9]"}, "2001:db8::9"},
		{"IPv6 entry with port", "10.0.0.0/8", "10.0.0.5:443", []string{"[2001:db8::9]:1234"}, "2001:db8::9"},
		{"IPv6 entry with zone", "10.0.0.0/8", "10.0.0.5:443", []string{"fe80::9%eth0"}, "fe80::9"},
		{"4-in-6 entry", "10.0.0.0/8", "10.0.0.5:443", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"4-in-6 entry of a trusted proxy is skipped", "10.0.0.0/8", "10.0.0.5:443", []string{"203.0.113.9, ::ffff:10.1.1.1"}, "203.0.113.9"},
		// IPv6 and 4-in-6 sockets.
		{"IPv6 socket, direct", "", "[2001:db8::1]:443", []string{"127.0.0.1"}, "2001:db8::1"},
		{"IPv6 trusted proxy", "2001:db8:ffff::/48", "[2001:db8:ffff::1]:443", []string{"::1, 2001:db8::9"}, "2001:db8::9"},
		{"IPv6 proxy, IPv4 client", "2001:db8:ffff::/48", "[2001:db8:ffff::1]:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"4-in-6 socket is unmapped", "", "[::ffff:203.0.113.9]:443", nil, "203.0.113.9"},
		{"4-in-6 socket of a trusted proxy", "10.0.0.0/8", "[::ffff:10.0.0.5]:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"zoned socket", "fe80::/10", "[fe80::1%eth0]:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"bare socket address", "", "203.0.113.9", nil, "203.0.113.9"},
		{"bare IPv6 socket address", "", "2001:db8::1", nil, "2001:db8::1"},
		// The socket address does not parse.
		{"empty socket", "", "", []string{"203.0.113.9"}, ""},
		{"unix socket", "10.0.0.0/8", "@", []string{"203.0.113.9"}, ""},
		{"host name socket", "", "localhost:80", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clientip.NewResolver(mustPrefixes(t, tt.trusted))
			got, ok := r.ClientAddr(tt.remote, tt.xff)
			if tt.want == "" {
				if ok {
					t.Fatalf("ClientAddr(%q, %q) = %v, true; want not ok", tt.remote, tt.xff, got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(tt.want) {
				t.Fatalf("ClientAddr(%q, %q) = %v, %v; want %s", tt.remote, tt.xff, got, ok, tt.want)
			}
		})
	}
}

func TestNewResolverNormalizes(t *testing.T) {
	r := clientip.NewResolver([]netip.Prefix{
		netip.MustParsePrefix("10.1.2.3/8"),           // unmasked
		netip.MustParsePrefix("::ffff:192.0.2.0/120"), // 4-in-6
		{}, // invalid: ignored
	})
	tests := []struct {
		remote string
		want   string
	}{
		{"10.200.0.1:1", "203.0.113.9"},
		{"192.0.2.77:1", "203.0.113.9"},
		{"[::ffff:192.0.2.77]:1", "203.0.113.9"},
		{"192.0.3.1:1", "192.0.3.1"},
	}
	for _, tt := range tests {
		if got, _ := r.ClientAddr(tt.remote, []string{"203.0.113.9"}); got.String() != tt.want {
			t.Errorf("ClientAddr(%q) = %v, want %s", tt.remote, got, tt.want)
		}
	}
	if got, _ := clientip.NewResolver(nil).ClientAddr("10.0.0.1:1", []string{"203.0.113.9"}); got.String() != "10.0.0.1" {
		t.Errorf("no proxies: %v", got)
	}
}

func TestMiddleware(t *testing.T) {
	r := clientip.NewResolver(mustPrefixes(t, "10.0.0.0/8"))
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
		wantOK bool
	}{
		{"direct", "203.0.113.9:5555", []string{"127.0.0.1"}, "203.0.113.9", true},
		{"through the proxy", "10.0.0.5:443", []string{"127.0.0.1, 203.0.113.9"}, "203.0.113.9", true},
		{"repeated headers", "10.0.0.5:443", []string{"127.0.0.1", "203.0.113.9"}, "203.0.113.9", true},
		{"bad socket", "nope", []string{"203.0.113.9"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got netip.Addr
			var gotOK, called bool
			h := clientip.Middleware(r)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				called = true
				got, gotOK = clientip.FromContext(req.Context())
				if v := req.Header.Values("X-Forwarded-For"); !slices.Equal(v, tt.xff) {
					t.Errorf("X-Forwarded-For changed to %q", v)
				}
			}))
			req := httptest.NewRequest(http.MethodPost, "/v1/api/sdk/session", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if !called {
				t.Fatal("the next handler was not called")
			}
			if gotOK != tt.wantOK || (tt.wantOK && got.String() != tt.want) {
				t.Errorf("FromContext = %v, %v; want %s, %v", got, gotOK, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFromContext(t *testing.T) {
	if a, ok := clientip.FromContext(context.Background()); ok || a.IsValid() {
		t.Errorf("empty context: %v, %v", a, ok)
	}
	want := netip.MustParseAddr("203.0.113.9")
	if a, ok := clientip.FromContext(clientip.WithAddr(context.Background(), want)); !ok || a != want {
		t.Errorf("WithAddr: %v, %v", a, ok)
	}
	if _, ok := clientip.FromContext(clientip.WithAddr(context.Background(), netip.Addr{})); ok {
		t.Error("an invalid address counts as present")
	}
}

// reference is a plain, allocating restatement of the rules of ClientAddr, for the fuzz
// target to compare against.
func reference(trusted []netip.Prefix, remote string, xff []string) (netip.Addr, bool) {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	client, ok := candidate(remote)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(client) {
		return client, true
	}
	entries := strings.Split(strings.Join(xff, ","), ",")
	if len(xff) == 0 {
		entries = nil
	}
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := candidate(strings.TrimSpace(entries[i]))
		if !ok {
			break
		}
		client = a
		if !isTrusted(a) {
			break
		}
	}
	return client, true
}

// candidate parses one address in any of the accepted forms.
func candidate(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
				return a.WithZone("").Unmap(), true
			}
			return netip.Addr{}, false
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}

func FuzzClientAddr(f *testing.F) {
	seeds := []struct{ trusted, remote, xff1, xff2 string }{
		{"", "203.0.113.9:5555", "127.0.0.1", ""},
		{"10.0.0.0/8", "10.0.0.5:443", "127.0.0.1, 203.0.113.9", ""},
		{"10.0.0.0/8", "10.0.0.5:443", "nope, 10.1.1.1", "10.2.2.2"},
		{"10.0.0.0/8,::1", "[::1]:443", "[2001:db8::1]:80, ::ffff:10.0.0.1", "fe80::1%eth0"},
		{"2001:db8::/32", "[2001:db8::1%lo]:1", ",,,", " , "},
		{"192.0.2.1", "192.0.2.1", "[192.0.2.1]", "192.0.2.1:"},
	}
	for _, s := range seeds {
		f.Add(s.trusted, s.remote, s.xff1, s.xff2)
	}
	f.Fuzz(func(t *testing.T, trustedSpec, remote, xff1, xff2 string) {
		trusted, err := clientip.ParsePrefixes(trustedSpec)
		if err != nil {
			trusted = nil
		}
		r := clientip.NewResolver(trusted)
		for _, xff := range [][]string{nil, {xff1}, {xff1, xff2}} {
			got, ok := r.ClientAddr(remote, xff)
			socket, socketOK := candidate(remote)
			if ok != socketOK {
				t.Fatalf("ClientAddr(%q, %q) ok = %v, socket parses = %v", remote, xff, ok, socketOK)
			}
			if !ok {
				continue
			}
			// The result is the socket address or one of the entries.
			found := got == socket
			for _, e := range strings.Split(strings.Join(xff, ","), ",") {
				if a, ok := candidate(strings.TrimSpace(e)); ok && a == got {
					found = true
				}
			}
			if !found {
				t.Fatalf("ClientAddr(%q, %q) = %v: neither the socket address nor an entry", remote, xff, got)
			}
			if got.Zone() != "" || got.Is4In6() {
				t.Fatalf("ClientAddr(%q, %q) = %v: not normalized", remote, xff, got)
			}
			if want, _ := reference(trusted, remote, xff); got != want {
				t.Fatalf("ClientAddr(%q, %q) = %v, reference says %v", remote, xff, got, want)
			}
		}
	})
}
