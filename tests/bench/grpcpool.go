package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/tests/harness"
)

// connPool spreads calls round-robin over a few client connections (HTTP/2 connections), so a
// single connection's write loop is not what is measured when -grpc-conns > 1. With one
// connection it is exactly what the gateway itself uses towards accounts.
type connPool struct {
	conns []*grpc.ClientConn
	next  atomic.Uint64
}

var _ grpc.ClientConnInterface = (*connPool)(nil)

// dialPool opens n plain-text connections to addr.
func dialPool(addr string, n int, opts ...grpc.DialOption) (*connPool, error) {
	p := &connPool{}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	for range n {
		c, err := grpc.NewClient(addr, opts...)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		p.conns = append(p.conns, c)
	}
	return p, nil
}

// dialAdmin is one connection to the suite's accounts with the operator's admin token.
func dialAdmin(s *harness.Suite) (*connPool, error) {
	return dialPool(s.AccountsAddr, 1, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: s.AdminToken, Insecure: true}))
}

// dialInternal is n connections to the suite's accounts as verification, the caller of the
// internal service (Debit, GetBalance).
func dialInternal(s *harness.Suite, n int) (*connPool, error) {
	return dialPool(s.AccountsAddr, n, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: s.Tokens[auth.CallerVerification], Insecure: true}))
}

func (p *connPool) pick() *grpc.ClientConn {
	return p.conns[(p.next.Add(1)-1)%uint64(len(p.conns))]
}

// Invoke implements grpc.ClientConnInterface.
func (p *connPool) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return p.pick().Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface.
func (p *connPool) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return p.pick().NewStream(ctx, desc, method, opts...)
}

// Close closes every connection.
func (p *connPool) Close() error {
	var errs []error
	for _, c := range p.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
