// Package grpcclient dials one mnv service from another: the internal credential on every call,
// the request id carried along, traces when tracing is on, and calls spread over replicas.
package grpcclient

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// serviceConfig replaces grpc-go's default policy, pick_first, which sends every call of a
// process down one connection to one replica for as long as that connection lives: a scaled-out
// service would sit idle behind a busy one. round_robin keeps a connection to every address the
// target resolves to (the pods of a headless Kubernetes Service) and takes them in turn; the
// servers' maximum connection age (grpcserver) makes clients resolve again, so new replicas get
// their share.
const serviceConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// Dial connects to the mnv service at target (host:port, or any gRPC target) with the internal
// token. extra options come last, so they may override these.
func Dial(target, internalToken string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: internalToken, Insecure: true}),
		grpc.WithChainUnaryInterceptor(requestid.UnaryClientInterceptor()),
		grpc.WithDefaultServiceConfig(serviceConfig),
	}
	opts = append(opts, tracing.DialOptions()...)
	conn, err := grpc.NewClient(target, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return conn, nil
}
