package outbound

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the longest endpoint URL accepted, in bytes. Real webhook URLs are short; a
// bound keeps stored integrations and logs small.
const MaxURLLength = 2048

// Error is a refusal by the package's own rules: an endpoint URL that is not acceptable, an
// address the policy does not allow, or a malformed delivery request. Its message is safe to
// show to the client that owns the integration: it never contains resolved addresses, the API
// key or other internals. A refusal is permanent, so Deliver never retries one.
type Error struct {
	// Message is the user-safe explanation.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

func refuse(msg string) *Error { return &Error{Message: msg} }

// Policy says which endpoints a deployment may deliver to. The zero value is the production
// default and the strictest: https only, public addresses only. Tests and development
// deployments relax it explicitly; nothing relaxes it implicitly.
type Policy struct {
	// AllowHTTP permits plain http:// endpoints (tests, development). Without it, records and
	// the client's API key would otherwise cross the network in clear text.
	AllowHTTP bool
	// AllowPrivate permits every non-public address: loopback, private (RFC 1918, fc00::/7),
	// link-local, CGNAT 100.64.0.0/10, unspecified, multicast, broadcast, documentation and
	// reserved ranges. Cloud metadata addresses stay refused (see CheckAddr).
	AllowPrivate bool
	// AllowedNets are explicit exceptions that apply even when AllowPrivate is false, e.g. a
	// test's 127.0.0.1/32 or an on-premises CRM's subnet. A cloud metadata address is only
	// allowed by a single-address entry naming it (169.254.169.254/32), never by a wider one.
	AllowedNets []netip.Prefix
}

// CheckURL validates an endpoint URL when an integration is created or updated and returns it
// parsed. It requires an absolute URL of length at most MaxURLLength with scheme https (or
// http when AllowHTTP), a host, no userinfo (credentials belong in the API key, not in a URL
// that ends up in logs), no fragment (never sent, so a sign of a mistake), and a port in
// 1..65535 when one is given. An IP-literal host must pass CheckAddr. Host names must be
// plain ASCII DNS names (IDNs in their xn-- form); when AllowPrivate is false, names that can
// only be internal (localhost, *.localhost, *.local, *.internal, *.home.arpa, *.localdomain,
// names without a dot) are refused too. That name check only gives early feedback: a public
// name can still resolve to a private address, which the client from NewClient refuses when
// it connects. Errors are *Error values.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, refuse("the endpoint URL is required")
	}
	if len(raw) > MaxURLLength {
		return nil, refuse("the endpoint URL is longer than " + strconv.Itoa(MaxURLLength) + " characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the input; the message stays generic.
		return nil, refuse("the endpoint URL is not a valid URL")
	}
	if !u.IsAbs() || u.Opaque != "" {
		return nil, refuse("the endpoint URL must be an absolute URL such as https://crm.example.com/hook")
	}
	if err := p.checkScheme(u.Scheme); err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, refuse("the endpoint URL must not contain credentials (user:password@); use the API key")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, refuse("the endpoint URL must not contain a fragment (#...)")
	}
	host := u.Hostname()
	if host == "" {
		return nil, refuse("the endpoint URL has no host")
	}
	if strings.HasSuffix(u.Host, ":") {
		return nil, refuse("the endpoint URL has an invalid port")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, refuse("the endpoint URL has an invalid port")
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return nil, refuse("the endpoint URL must not contain an IPv6 zone")
		}
		if err := p.CheckAddr(ip); err != nil {
			return nil, refuse("the endpoint URL points to an address that is not allowed (private, loopback, link-local, reserved or cloud metadata; a deployment may allow a receiver inside its network: MNV_WEBHOOK_ALLOWED_NETS)")
		}
		return u, nil
	}
	if strings.HasPrefix(u.Host, "[") {
		return nil, refuse("the endpoint URL has an invalid IPv6 address")
	}
	name, err := checkHostName(host)
	if err != nil {
		return nil, err
	}
	if !p.AllowPrivate && internalName(name) {
		return nil, refuse("the endpoint URL points to an internal host name")
	}
	return u, nil
}

// checkScheme allows https, and http only when the policy says so. It is shared by CheckURL
// and the client's per-request guard.
func (p Policy) checkScheme(scheme string) *Error {
	switch strings.ToLower(scheme) {
	case "https":
		return nil
	case "http":
		if p.AllowHTTP {
			return nil
		}
		return refuse("the endpoint URL must use https (a deployment for tests or development may allow http: MNV_WEBHOOK_ALLOW_HTTP=true)")
	}
	if p.AllowHTTP {
		return refuse("the endpoint URL must use http or https")
	}
	return refuse("the endpoint URL must use https")
}

// checkHostName validates an ASCII DNS name and returns it lower-cased without a trailing
// dot. The last label must start with a letter, as every top-level domain does: that refuses
// numeric forms such as 2130706433, 127.1 or 0x7f.1, which some resolvers (inet_aton) would
// quietly turn into 127.0.0.1.
func checkHostName(host string) (string, error) {
	const bad = "the endpoint URL host is not a valid host name (use the xn-- form for international names)"
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "" || len(name) > 253 {
		return "", refuse(bad)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", refuse(bad)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", refuse(bad)
			}
		}
	}
	if tld := labels[len(labels)-1]; tld[0] < 'a' || tld[0] > 'z' {
		return "", refuse(bad)
	}
	return name, nil
}

// internalName reports names that can only designate something inside our own network.
func internalName(name string) bool {
	if !strings.Contains(name, ".") {
		return true // single label: resolved through search domains, never public
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".home.arpa", ".localdomain"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// metadataAddrs are the cloud instance-metadata and credential endpoints. Reaching one of them
// hands out the host's cloud credentials, so they are refused whatever AllowPrivate says.
// Besides the three everyone knows (AWS/GCP/Azure/OCI 169.254.169.254, AWS IPv6 fd00:ec2::254,
// Alibaba 100.100.100.200) the list has AWS ECS task credentials (169.254.170.2), EKS Pod
// Identity (169.254.170.23, fd00:ec2::23), GCP's IPv6 metadata (fd20:ce::254) and Azure's
// WireServer (168.63.129.16, a public-looking address that serves VM configuration).
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("169.254.170.23"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd00:ec2::23"),
	netip.MustParseAddr("fd20:ce::254"),
}

// nonPublicV4 lists the IPv4 ranges that are not globally reachable unicast (IANA special-purpose
// registry, plus multicast and the reserved class E that includes broadcast).
var nonPublicV4 = mustPrefixes(
	"0.0.0.0/8",       // "this network", includes the unspecified 0.0.0.0
	"10.0.0.0/8",      // RFC 1918
	"100.64.0.0/10",   // CGNAT (RFC 6598)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local
	"172.16.0.0/12",   // RFC 1918
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // RFC 1918
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, includes 255.255.255.255 broadcast
)

// IPv6 is judged by allow-list: only global unicast 2000::/3 can be public, minus the special
// ranges inside it. Two translation ranges embed an IPv4 address and are judged by it.
var (
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	nonPublicV6     = mustPrefixes(
		"2001::/23",     // IETF protocol assignments (Teredo, benchmarking, ORCHID, ...)
		"2001:db8::/32", // documentation
		"3fff::/20",     // documentation (RFC 9637)
	)
	nat64V6  = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: last 32 bits are IPv4
	sixTo4V6 = netip.MustParsePrefix("2002::/16")    // 6to4: bits 16..47 are IPv4
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// CheckAddr decides whether the policy allows connecting to ip. IPv4-mapped IPv6 addresses
// (::ffff:127.0.0.1) are unmapped first and IPv6 zones ignored, so neither can disguise an
// address. Public addresses are allowed; everything else (loopback, private, link-local,
// CGNAT, unspecified, multicast, broadcast, documentation, reserved, NAT64/6to4 forms of
// those) only with AllowPrivate or a matching AllowedNets entry. Cloud metadata addresses
// (169.254.169.254, fd00:ec2::254, 100.100.100.200 and the others in this file) are ALWAYS
// refused unless an AllowedNets entry names exactly that address. Errors are *Error values
// whose message does not repeat the address, because the address may come from resolving a
// client's host name through our internal DNS.
func (p Policy) CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return refuse("the endpoint address is not valid")
	}
	ip = ip.Unmap().WithZone("")
	meta := isMetadata(ip)
	for _, n := range p.AllowedNets {
		n = normalizePrefix(n)
		if n.IsValid() && n.Contains(ip) && (!meta || n.IsSingleIP()) {
			return nil
		}
	}
	if meta {
		return refuse("the endpoint address is a cloud metadata address, which is never allowed")
	}
	if p.AllowPrivate || isPublic(ip) {
		return nil
	}
	return refuse("the endpoint address is not public (private, loopback, link-local or reserved; a deployment may allow a receiver inside its network: MNV_WEBHOOK_ALLOWED_NETS)")
}

// normalizePrefix turns an IPv4-mapped IPv6 prefix (::ffff:127.0.0.1/128) into its IPv4 form,
// since addresses are unmapped before matching.
func normalizePrefix(n netip.Prefix) netip.Prefix {
	if a := n.Addr(); a.Is4In6() && n.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), n.Bits()-96)
	}
	return n
}

// embeddedV4 extracts the IPv4 address carried by a NAT64 or 6to4 address.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case nat64V6.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixTo4V6.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

func isMetadata(ip netip.Addr) bool {
	if v4, ok := embeddedV4(ip); ok {
		ip = v4
	}
	for _, m := range metadataAddrs {
		if ip == m {
			return true
		}
	}
	return false
}

func isPublic(ip netip.Addr) bool {
	if ip.Is4() {
		for _, n := range nonPublicV4 {
			if n.Contains(ip) {
				return false
			}
		}
		return true
	}
	if v4, ok := embeddedV4(ip); ok {
		return isPublic(v4)
	}
	if !globalUnicastV6.Contains(ip) {
		return false
	}
	for _, n := range nonPublicV6 {
		if n.Contains(ip) {
			return false
		}
	}
	return true
}
