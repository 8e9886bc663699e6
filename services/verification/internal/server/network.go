package server

import (
	"context"
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
