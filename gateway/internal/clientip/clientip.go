// Package clientip finds the address of the client behind a request, for the services that believe
// header enrichment only from an operator's trusted ranges (docs/api-decisions.md#operators).
// Behind a proxy, only the proxies we configured may tell us who the client is.
//
// The socket address is the client unless it lies inside a configured trusted proxy range.
// Only then is X-Forwarded-For read, from the right (the end the trusted proxies appended to):
// trusted hops are skipped, and the first untrusted hop is the address the last trusted proxy
// saw, so the client. Everything left of it was written by the client or by proxies we do not
// trust, and is never believed. See Resolver.ClientAddr for the exact rules.
//
// The standard Forwarded header (RFC 7239) is not supported: it is ignored, like every other
// header (X-Real-Ip, True-Client-Ip, …). Trusted proxies must send X-Forwarded-For.
//
// Middleware reads X-Forwarded-For, so it must run before middleware.StripUntrusted removes
// that header.
package clientip

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver decides the client address of requests, trusting X-Forwarded-For only from the
// configured proxy ranges. It is safe for concurrent use.
type Resolver struct {
	trusted []netip.Prefix
}

// NewResolver returns a Resolver that believes X-Forwarded-For from the given proxy ranges.
// With none, the socket address is always the client. Ranges are used masked, and a range of
// IPv4-mapped IPv6 addresses as the IPv4 range it maps.
func NewResolver(trustedProxies []netip.Prefix) *Resolver {
	r := &Resolver{}
	for _, p := range trustedProxies {
		if p.IsValid() {
			r.trusted = append(r.trusted, normalizePrefix(p))
		}
	}
	return r
}

// ParsePrefixes parses a comma-separated list of trusted proxy ranges: CIDRs ("10.0.0.0/8",
// "2001:db8::/32") or bare addresses (a single host, /32 or /128). Spaces around an entry are
// ignored. An empty or blank spec is no range (nil). An empty entry, an address with an IPv6
// zone, and a range covering every address (/0: anyone could then choose their address) are
// errors.
func ParsePrefixes(spec string) ([]netip.Prefix, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for i, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		p, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %d (%q): %w", i+1, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, errors.New("empty entry")
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("an IPv6 zone is not allowed")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = normalizePrefix(p)
	if p.Bits() == 0 {
		return netip.Prefix{}, errors.New("a /0 range would let anyone choose their address")
	}
	return p, nil
}

// normalizePrefix masks p and turns a range of IPv4-mapped IPv6 addresses into the IPv4 range
// it maps, since addresses are compared unmapped.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	// After masking, only a range of /96 or longer keeps the ::ffff: marker.
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// normalize drops an IPv6 zone and turns an IPv4-mapped IPv6 address into its IPv4 form.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

func (r *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the client's address given the request's socket address (RemoteAddr,
// "host:port"; a bare address is accepted too) and its X-Forwarded-For header values:
//
//   - the socket address outside every trusted proxy range is the client, and X-Forwarded-For
//     is ignored entirely;
//   - from a trusted proxy, the X-Forwarded-For entries (all values joined, comma-separated,
//     spaces trimmed) are walked from the right: entries inside trusted ranges are skipped, and
//     the first one that is not trusted is the client;
//   - when every entry is trusted, the leftmost one is the client (no entries: the socket
//     address);
//   - an entry that is not an address (garbage, "unknown", an empty entry) stops the walk, and
//     the last trusted hop seen, or else the socket address, is the client: whatever a client
//     forged never becomes the client address.
//
// An entry is an IP address, optionally with a port ("192.0.2.1:443", "[2001:db8::1]:443") or
// in brackets ("[2001:db8::1]"), as some proxies write it. Returned addresses have no IPv6 zone
// and IPv4-mapped IPv6 addresses are in IPv4 form. ok is false only when the socket address does
// not parse.
func (r *Resolver) ClientAddr(remoteAddr string, xForwardedFor []string) (netip.Addr, bool) {
	client, ok := parseAddr(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !r.isTrusted(client) {
		return client, true
	}
	// Walk the values from the last one, and each value from its end, without splitting.
	for i := len(xForwardedFor) - 1; i >= 0; i-- {
		v := xForwardedFor[i]
		for {
			entry := v
			j := strings.LastIndexByte(v, ',')
			if j >= 0 {
				entry, v = v[j+1:], v[:j]
			}
			a, ok := parseAddr(strings.TrimSpace(entry))
			if !ok {
				return client, true
			}
			client = a
			if !r.isTrusted(a) {
				return client, true
			}
			if j < 0 {
				break
			}
		}
	}
	return client, true
}

// parseAddr parses an address, optionally with a port or in brackets, and normalizes it.
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
		if !strings.Contains(s, ":") {
			return netip.Addr{}, false // "[192.0.2.1]" is no address form
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

type contextKey struct{}

// Middleware computes the client address of every request (Resolver.ClientAddr of RemoteAddr
// and the X-Forwarded-For values) and stores it in the request context, for FromContext. When
// RemoteAddr does not parse, nothing is stored. It only reads headers: removing
// X-Forwarded-For is middleware.StripUntrusted's job, which must run after this one.
func Middleware(r *Resolver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if a, ok := r.ClientAddr(req.RemoteAddr, req.Header.Values("X-Forwarded-For")); ok {
				req = req.WithContext(WithAddr(req.Context(), a))
			}
			next.ServeHTTP(w, req)
		})
	}
}

// WithAddr returns a copy of ctx carrying addr as the client address.
func WithAddr(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, contextKey{}, addr)
}

// FromContext returns the client address stored by Middleware (or WithAddr); ok is false when
// there is none.
func FromContext(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(contextKey{}).(netip.Addr)
	return a, ok && a.IsValid()
}
