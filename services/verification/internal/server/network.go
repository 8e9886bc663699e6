package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/verification/internal/network"
)

// networkOf reads what the request showed of its network (the gateway's auth.MDClientIP,
// auth.MDHeaderPrefix and auth.MDOrigin metadata). Only the gateway (a call with the gateway's
// own token) may speak for the client address, pass number headers and name the page's origin;
// anyone else, another mnv service included, is taken at its socket address, without headers.
func networkOf(ctx context.Context, numberHeaders []string) network.Request {
	var n network.Request
	if caller, _ := auth.Caller(ctx); caller != auth.CallerGateway {
		if p, ok := peer.FromContext(ctx); ok {
			if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
				n.Addr = ap.Addr().Unmap()
			}
		}
		return n
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(auth.MDClientIP); len(v) == 1 {
		if a, err := netip.ParseAddr(v[0]); err == nil {
			n.Addr = a.Unmap()
		}
	}
	if v := md.Get(auth.MDOrigin); len(v) == 1 {
		n.Origin = v[0]
	}
	n.Headers = map[string]string{}
	for _, h := range numberHeaders {
		if v := md.Get(auth.MDHeaderPrefix + strings.ToLower(h)); len(v) == 1 {
			n.Headers[h] = v[0]
		}
	}
	return n
}

// HTTPNetworkOf reads what a request to the CAMARA facade showed of its network, by the rule of
// networkOf: the address and number headers the gateway passed (auth.MDClientIP,
// auth.MDHeaderPrefix + name, as HTTP headers) are believed only when the request carries the
// gateway's own token in auth.HTTPCallerHeader; anyone else is its socket address, no headers.
func HTTPNetworkOf(callers auth.Callers, numberHeaders []string) func(r *http.Request) network.Request {
	return func(r *http.Request) network.Request {
		var n network.Request
		if name, ok := callers.Name(r.Header.Get(auth.HTTPCallerHeader)); !ok || name != auth.CallerGateway {
			if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
				if a, err := netip.ParseAddr(h); err == nil {
					n.Addr = a.Unmap()
				}
			}
			return n
		}
		if v := r.Header.Values(auth.MDClientIP); len(v) == 1 {
			if a, err := netip.ParseAddr(v[0]); err == nil {
				n.Addr = a.Unmap()
			}
		}
		n.Headers = map[string]string{}
		for _, h := range numberHeaders {
			if v := r.Header.Values(auth.MDHeaderPrefix + strings.ToLower(h)); len(v) == 1 {
				n.Headers[h] = v[0]
			}
		}
		return n
	}
}
