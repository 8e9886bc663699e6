// Package grpcflow sets the HTTP/2 flow-control windows of the gRPC connections between mnv's
// services, both ends alike: fixed windows instead of grpc-go's dynamic ones.
//
// A dynamic window is sized by bandwidth-delay probes: the receiver of a DATA frame sends a
// PING whenever none is outstanding, and the peer answers it. Between our services, whose
// messages are small and whose load is spread thin outside of bursts, that is one more write,
// read and wake-up on each side for most calls (2.6 TCP segments per sequential unary call on
// loopback against 2.0 with fixed windows), paid on every hop of a verify: gateway to
// verification, verification to accounts. Fixed windows the size the probes would reach on a
// cluster's network (a 10 Gbit/s link at 0.5 ms round trip holds about 600 KiB) keep the
// throughput of the large streams (a CSV upload to connect) without the probes.
package grpcflow

import "google.golang.org/grpc"

const (
	// StreamWindow is how much one call may have in flight towards its receiver unread.
	StreamWindow = 1 << 20
	// ConnWindow is how much all the calls of one connection may have in flight together: a
	// few large streams at once at full speed, and the most a connection buffers for a
	// receiver that does not read.
	ConnWindow = 4 << 20
)

// DialOptions are the windows of a client's connections to another mnv service.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow)}
}

// ServerOptions are the windows of an mnv service's server side of those connections.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow)}
}
