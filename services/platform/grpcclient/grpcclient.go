// Package grpcclient dials one mnv service from another: the caller's own internal token on
// every call, over TLS when a CA is configured, the request id carried along, traces when
// tracing is on, and calls spread over replicas.
package grpcclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcflow"
	"github.com/mnvhq/mnv/services/platform/requestid/requestidgrpc"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// serviceConfig replaces grpc-go's default policy, pick_first, which sends every call of a
// process down one connection to one replica for as long as that connection lives: a scaled-out
// service would sit idle behind a busy one. round_robin keeps a connection to every address the
// target resolves to (the pods of a headless Kubernetes Service) and takes them in turn; the
// servers' maximum connection age (grpcserver) makes clients resolve again, so new replicas get
// their share.
const serviceConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// Options are what a process presents when it calls another mnv service.
type Options struct {
	// Token is the process's own internal token (MNV_INTERNAL_TOKEN): it tells the server
	// which caller this is.
	Token string
	// CAFile is the PEM bundle of the CAs that sign the services' certificates
	// (MNV_GRPC_TLS_CA). Set, every call goes over TLS and the server's certificate must name
	// the host part of the target; empty, calls are plaintext.
	CAFile string
}

// Dial connects to the mnv service at target (host:port, or any gRPC target). extra options
// come last, so they may override these.
func Dial(target string, o Options, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	// The servers see only digests, so the caller is where a weak token can be caught.
	if o.Token != "" && len(o.Token) < auth.MinTokenLength {
		return nil, fmt.Errorf("MNV_INTERNAL_TOKEN: must be at least %d characters", auth.MinTokenLength)
	}
	opts, err := CredentialOptions(o.Token, o.CAFile)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		grpc.WithChainUnaryInterceptor(requestidgrpc.UnaryClientInterceptor()),
		grpc.WithDefaultServiceConfig(serviceConfig),
	)
	opts = append(opts, grpcflow.DialOptions()...)
	opts = append(opts, tracing.DialOptions()...)
	conn, err := grpc.NewClient(target, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return conn, nil
}

// CredentialOptions are the dial options that carry token (as a bearer credential; "" for
// none) over the transport caFile asks for: TLS verified against caFile's CAs, or plaintext
// when caFile is empty. With TLS the bearer credential requires it, so a token never travels in
// clear. mnvctl and the all-in-one dial with these too.
func CredentialOptions(token, caFile string) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if caFile == "" {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		c, err := TLSConfig(caFile)
		if err != nil {
			return nil, err
		}
		// The server name checked is the host part of the target (grpc-go takes it from the
		// authority), so "mnv-accounts:9091" needs a certificate for mnv-accounts.
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c)))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: caFile == ""}))
	}
	return opts, nil
}

// TLSConfig is the client side of TLS to an mnv service: its certificate verified against
// caFile's CAs (MNV_GRPC_TLS_CA), TLS 1.3 only. The gRPC calls use it, and so does the
// gateway's proxy to verification's CAMARA facade, which the same certificate serves.
func TLSConfig(caFile string) (*tls.Config, error) {
	pool, err := LoadCAs(caFile)
	if err != nil {
		return nil, fmt.Errorf("MNV_GRPC_TLS_CA: %w", err)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// LoadCAs reads the PEM certificates of file into a pool, for a client that trusts them rather
// than the system's roots (also the SMS centre's MNV_SMPP_TLS_CA).
func LoadCAs(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New(file + ": no PEM certificate in it")
	}
	return pool, nil
}
