package grpcserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/mnvhq/mnv/services/platform/config"
)

// Transport is how the server meets its callers: TLS when a certificate is configured,
// optionally a plaintext port that answers health checks alone, and whether it describes its
// services to them (reflection).
type Transport struct {
	// CertFile and KeyFile are the server's certificate (chain) and private key, PEM
	// (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY). Set, the server speaks TLS only; the certificate
	// must name the host part of the address callers dial (deploy/k8s/README.md lists them).
	// Both files are read again when they change, so a renewed certificate (cert-manager, a
	// rotated Secret) is served to new connections without a restart.
	CertFile, KeyFile string
	// HealthAddr, when set, serves grpc.health.v1 alone, in plaintext (MNV_GRPC_HEALTH_ADDR):
	// the kubelet's gRPC probes cannot speak TLS. It says whether the server serves, nothing
	// more, so it needs no credential.
	HealthAddr string
	// Reflection serves gRPC server reflection (grpc.reflection.v1 and v1alpha) on the main
	// listener (MNV_GRPC_REFLECTION, default on), so that an internal system or an operator
	// can call the services with grpcurl or buf curl without the .proto files. It describes
	// the services' schemas, never data, and needs no credential; the services' own methods
	// still need theirs. The prod overlay turns it off (deploy/k8s): a production caller
	// builds against the protos.
	Reflection bool
}

// LoadTransport reads the server's transport from the environment.
func LoadTransport(env *config.Env) (Transport, error) {
	t := Transport{
		CertFile:   env.String("MNV_GRPC_TLS_CERT", ""),
		KeyFile:    env.String("MNV_GRPC_TLS_KEY", ""),
		HealthAddr: env.String("MNV_GRPC_HEALTH_ADDR", ""),
		Reflection: env.Bool("MNV_GRPC_REFLECTION", true),
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return t, errors.New("MNV_GRPC_TLS_CERT and MNV_GRPC_TLS_KEY: set both (TLS) or neither (plaintext)")
	}
	return t, nil
}

// credentials returns the server's TLS credentials, or nil for plaintext.
func (t Transport) credentials() (credentials.TransportCredentials, error) {
	c, err := t.TLSConfig()
	if c == nil || err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// TLSConfig is the server side of TLS with the transport's certificate, or nil for plaintext:
// the gRPC server's, and that of any other listener of the service its callers reach with the
// same CA (verification's CAMARA facade). The certificate is loaded once here, so that a wrong
// file stops the start-up with a clear error, then again whenever its files change. Each call
// returns a config of its own.
func (t Transport) TLSConfig() (*tls.Config, error) {
	if t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	kp := &keyPair{certFile: t.CertFile, keyFile: t.KeyFile}
	if err := kp.reload(); err != nil {
		return nil, fmt.Errorf("MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY: %w", err)
	}
	// TLS 1.3 only: both ends are ours, so there is no older client to wait for.
	return &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: kp.get}, nil
}

// keyPair is a certificate and key read from files, read again when either file changes.
type keyPair struct {
	certFile, keyFile string

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp string // the files' sizes and modification times when cert was read
}

func (k *keyPair) stampNow() (string, error) {
	var s string
	for _, f := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// reload reads the pair if it changed since it was last read.
func (k *keyPair) reload() error {
	stamp, err := k.stampNow()
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if stamp == k.stamp {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return err
	}
	k.cert, k.stamp = &cert, stamp
	return nil
}

// get serves each handshake the current pair. A pair that fails to load (a renewal caught
// half-written) keeps the previous one until the files are whole again: connections are long
// lived and new ones rare, so looking at the files each time costs nothing.
func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	_ = k.reload()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert, nil
}
