package outbound

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	def := Policy{}
	httpOK := Policy{AllowHTTP: true}
	private := Policy{AllowPrivate: true}
	loopback := Policy{AllowedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	metaExact := Policy{AllowedNets: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}
	metaWide := Policy{AllowedNets: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}
	long := "https://crm.example.com/" + strings.Repeat("a", MaxURLLength)

	tests := []struct {
		name   string
		policy Policy
		raw    string
		ok     bool
	}{
		{"https", def, "https://crm.example.com/hooks/mnv?x=1", true},
		{"https upper-case scheme", def, "HTTPS://CRM.Example.com/hook", true},
		{"https with port", def, "https://crm.example.com:8443/hook", true},
		{"fqdn trailing dot", def, "https://crm.example.com./hook", true},
		{"idn punycode", def, "https://xn--bcher-kva.example/hook", true},
		{"public ipv4 literal", def, "https://8.8.8.8/hook", true},
		{"public ipv6 literal", def, "https://[2606:4700:4700::1111]/hook", true},
		{"exactly max length", def, "https://crm.example.com/" + strings.Repeat("a", MaxURLLength-len("https://crm.example.com/")), true},

		{"empty", def, "", false},
		{"http refused by default", def, "http://crm.example.com/hook", false},
		{"http allowed with AllowHTTP", httpOK, "http://crm.example.com/hook", true},
		{"userinfo", def, "https://user:pass@crm.example.com/hook", false},
		{"user only", def, "https://user@crm.example.com/hook", false},
		{"fragment", def, "https://crm.example.com/hook#frag", false},
		{"empty fragment", def, "https://crm.example.com/hook#", false},
		{"relative", def, "/hooks/mnv", false},
		{"scheme-relative", def, "//crm.example.com/hook", false},
		{"empty host", def, "https:///hook", false},
		{"port only", def, "https://:443/hook", false},
		{"port zero", def, "https://crm.example.com:0/hook", false},
		{"port too big", def, "https://crm.example.com:65536/hook", false},
		{"port not numeric", def, "https://crm.example.com:abc/hook", false},
		{"empty port", def, "https://crm.example.com:/hook", false},
		{"javascript", def, "javascript:alert(1)", false},
		{"javascript with AllowHTTP", httpOK, "javascript:alert(1)", false},
		{"file", def, "file:///etc/passwd", false},
		{"ftp", def, "ftp://crm.example.com/x", false},
		{"gopher", httpOK, "gopher://crm.example.com:70/x", false},
		{"too long", def, long, false},
		{"space in host", def, "https://crm example.com/", false},
		{"control character", def, "https://crm.example.com/\x00", false},
		{"non-ascii host", def, "https://bücher.example/hook", false},
		{"underscore ok", def, "https://my_crm.example.com/hook", true},
		{"label starts with hyphen", def, "https://-crm.example.com/", false},
		{"decimal ip", def, "https://2130706433/", false},
		{"short ip", def, "https://127.1/", false},
		{"hex ip", def, "https://0x7f.0x0.0x0.0x1/", false},
		{"octal ip", def, "https://0177.0.0.1/", false},

		{"localhost name", def, "https://localhost/hook", false},
		{"sub.localhost name", def, "https://a.localhost/hook", false},
		{"internal name", def, "https://metadata.google.internal/", false},
		{"mdns name", def, "https://printer.local/", false},
		{"single label", def, "https://crm/hook", false},
		{"localhost with AllowPrivate", private, "https://localhost/hook", true},
		{"single label with AllowPrivate", private, "https://crm-mock:8080/hook", true},

		{"loopback v4", def, "https://127.0.0.1/hook", false},
		{"loopback v4 with port", def, "https://127.0.0.1:8443/hook", false},
		{"private 10/8", def, "https://10.1.2.3/hook", false},
		{"private 172.16/12", def, "https://172.20.0.1/hook", false},
		{"private 192.168/16", def, "https://192.168.1.1/hook", false},
		{"link-local", def, "https://169.254.1.1/hook", false},
		{"cgnat", def, "https://100.64.0.1/hook", false},
		{"unspecified", def, "https://0.0.0.0/hook", false},
		{"metadata v4", def, "https://169.254.169.254/latest/meta-data/", false},
		{"metadata alibaba", def, "https://100.100.100.200/", false},
		{"metadata v6", def, "https://[fd00:ec2::254]/", false},
		{"loopback v6", def, "https://[::1]/hook", false},
		{"link-local v6", def, "https://[fe80::1]/hook", false},
		{"link-local v6 with zone", private, "https://[fe80::1%25eth0]/hook", false},
		{"ula v6", def, "https://[fd12:3456::1]/hook", false},
		{"mapped loopback", def, "https://[::ffff:127.0.0.1]/hook", false},
		{"nat64 of loopback", def, "https://[64:ff9b::7f00:1]/hook", false},
		{"bad ipv6 literal", def, "https://[::zz]/hook", false},

		{"loopback with AllowPrivate", private, "https://127.0.0.1/hook", true},
		{"private with AllowPrivate", private, "https://10.1.2.3/hook", true},
		{"link-local with AllowPrivate", private, "https://169.254.1.1/hook", true},
		{"v6 loopback with AllowPrivate", private, "https://[::1]/hook", true},
		{"metadata with AllowPrivate", private, "https://169.254.169.254/", false},
		{"metadata v6 with AllowPrivate", private, "https://[fd00:ec2::254]/", false},
		{"alibaba metadata with AllowPrivate", private, "https://100.100.100.200/", false},

		{"loopback via AllowedNets", loopback, "https://127.0.0.1:8443/hook", true},
		{"other loopback not in AllowedNets", loopback, "https://127.0.0.2/hook", false},
		{"private not in AllowedNets", loopback, "https://10.0.0.1/hook", false},
		{"metadata named exactly in AllowedNets", metaExact, "https://169.254.169.254/", true},
		{"metadata in a wide AllowedNets entry", metaWide, "https://169.254.169.254/", false},
		{"link-local in a wide AllowedNets entry", metaWide, "https://169.254.1.1/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := tt.policy.CheckURL(tt.raw)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want ok", tt.raw, err)
				}
				if u == nil || u.Host == "" {
					t.Fatalf("CheckURL(%q) returned %v", tt.raw, u)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckURL(%q) = ok, want an error", tt.raw)
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("CheckURL(%q) error %T is not *Error", tt.raw, err)
			}
			if u != nil {
				t.Fatalf("CheckURL(%q) returned a URL with an error", tt.raw)
			}
			// User-safe: the message never echoes the input (here: its host part).
			if host := hostOf(tt.raw); host != "" && len(host) > 3 && strings.Contains(perr.Message, host) {
				t.Fatalf("message %q repeats the host %q", perr.Message, host)
			}
		})
	}
}

func hostOf(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}

func TestCheckAddr(t *testing.T) {
	def := Policy{}
	private := Policy{AllowPrivate: true}
	tests := []struct {
		addr      string
		public    bool // allowed by the default policy
		private   bool // allowed with AllowPrivate
		allowedBy string
	}{
		{addr: "8.8.8.8", public: true, private: true},
		{addr: "1.1.1.1", public: true, private: true},
		{addr: "93.184.216.34", public: true, private: true},
		{addr: "2606:4700:4700::1111", public: true, private: true},
		{addr: "2a00:1450:4001:80b::200e", public: true, private: true},
		{addr: "::ffff:8.8.8.8", public: true, private: true},
		{addr: "64:ff9b::808:808", public: true, private: true}, // NAT64 of 8.8.8.8
		{addr: "2002:808:808::1", public: true, private: true},  // 6to4 of 8.8.8.8

		{addr: "10.0.0.1", private: true, allowedBy: "10.0.0.0/8"},
		{addr: "10.255.255.255", private: true},
		{addr: "172.16.0.1", private: true},
		{addr: "172.31.255.254", private: true},
		{addr: "192.168.0.1", private: true},
		{addr: "127.0.0.1", private: true, allowedBy: "127.0.0.1/32"},
		{addr: "127.8.9.10", private: true},
		{addr: "::1", private: true, allowedBy: "::1/128"},
		{addr: "fe80::1", private: true},
		{addr: "fe80::1%eth0", private: true},
		{addr: "febf::1", private: true},
		{addr: "fc00::1", private: true},
		{addr: "fd12:3456:789a::1", private: true, allowedBy: "fd12:3456::/32"},
		{addr: "100.64.0.1", private: true},
		{addr: "100.127.255.254", private: true},
		{addr: "0.0.0.0", private: true},
		{addr: "::", private: true},
		{addr: "169.254.1.1", private: true},
		{addr: "224.0.0.1", private: true},
		{addr: "ff02::1", private: true},
		{addr: "255.255.255.255", private: true},
		{addr: "192.0.2.1", private: true},
		{addr: "198.18.0.1", private: true},
		{addr: "240.0.0.1", private: true},
		{addr: "2001:db8::1", private: true},
		{addr: "2001::1", private: true}, // Teredo
		{addr: "100::1", private: true},  // discard-only
		{addr: "::ffff:127.0.0.1", private: true, allowedBy: "127.0.0.1/32"},
		{addr: "::ffff:10.0.0.1", private: true, allowedBy: "::ffff:10.0.0.0/104"},
		{addr: "64:ff9b::7f00:1", private: true}, // NAT64 of 127.0.0.1
		{addr: "2002:a00:1::1", private: true},   // 6to4 of 10.0.0.1

		// Cloud metadata: refused even with AllowPrivate, allowed only when named exactly.
		{addr: "169.254.169.254", allowedBy: "169.254.169.254/32"},
		{addr: "::ffff:169.254.169.254"},
		{addr: "64:ff9b::a9fe:a9fe"},
		{addr: "fd00:ec2::254", allowedBy: "fd00:ec2::254/128"},
		{addr: "100.100.100.200", allowedBy: "100.100.100.200/32"},
		{addr: "169.254.170.2"},
		{addr: "fd20:ce::254"},
		{addr: "168.63.129.16"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.addr)
			check := func(name string, p Policy, want bool) {
				t.Helper()
				err := p.CheckAddr(ip)
				if want && err != nil {
					t.Errorf("%s: CheckAddr(%s) = %v, want allowed", name, tt.addr, err)
				}
				if !want {
					var perr *Error
					if !errors.As(err, &perr) {
						t.Errorf("%s: CheckAddr(%s) = %v, want an *Error", name, tt.addr, err)
					} else if strings.Contains(perr.Message, ip.Unmap().WithZone("").String()) {
						t.Errorf("%s: message %q repeats the address", name, perr.Message)
					}
				}
			}
			check("default", def, tt.public)
			check("AllowPrivate", private, tt.private)
			if tt.allowedBy != "" {
				p := Policy{AllowedNets: []netip.Prefix{netip.MustParsePrefix(tt.allowedBy)}}
				check("AllowedNets "+tt.allowedBy, p, true)
			}
		})
	}

	if err := def.CheckAddr(netip.Addr{}); err == nil {
		t.Error("the zero Addr was allowed")
	}
	// A wide exception never opens the metadata address, even combined with AllowPrivate.
	wide := Policy{AllowPrivate: true, AllowedNets: []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"),
	}}
	for _, a := range []string{"169.254.169.254", "fd00:ec2::254", "100.100.100.200"} {
		if err := wide.CheckAddr(netip.MustParseAddr(a)); err == nil {
			t.Errorf("wide AllowedNets allowed metadata address %s", a)
		}
	}
	if err := wide.CheckAddr(netip.MustParseAddr("10.0.0.1")); err != nil {
		t.Errorf("wide AllowedNets refused 10.0.0.1: %v", err)
	}
}

// TestHTTPRefusalNamesItsSwitch: whoever tries a local http receiver learns which switch
// allows it.
func TestHTTPRefusalNamesItsSwitch(t *testing.T) {
	_, err := Policy{}.CheckURL("http://crm.example.com/hook")
	if err == nil || !strings.Contains(err.Error(), "MNV_WEBHOOK_ALLOW_HTTP=true") {
		t.Errorf("CheckURL = %v, want it to name MNV_WEBHOOK_ALLOW_HTTP", err)
	}
}

// TestPrivateRefusalNamesItsSwitch: past https, a receiver inside the network is refused for its
// address; the refusal names the variable that allows one, whether the URL or a resolved address
// is at fault.
func TestPrivateRefusalNamesItsSwitch(t *testing.T) {
	_, urlErr := Policy{AllowHTTP: true}.CheckURL("http://127.0.0.1:9999/hook")
	addrErr := Policy{}.CheckAddr(netip.MustParseAddr("10.1.2.3"))
	for name, err := range map[string]error{"url": urlErr, "resolved address": addrErr} {
		if err == nil || !strings.Contains(err.Error(), "MNV_WEBHOOK_ALLOWED_NETS") {
			t.Errorf("%s: %v, want it to name MNV_WEBHOOK_ALLOWED_NETS", name, err)
		}
	}
}
