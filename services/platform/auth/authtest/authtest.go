// Package authtest holds the internal tokens that tests give the mnv processes, one per caller
// as in a deployment, and the caller list every server of the tests accepts.
package authtest

import "github.com/mnvhq/mnv/services/platform/auth"

// The tokens each process presents (MNV_INTERNAL_TOKEN).
const (
	GatewayToken      = "authtest-gateway-token-0123456789abcdef"
	VerificationToken = "authtest-verification-token-0123456789ab"
	ConnectToken      = "authtest-connect-token-0123456789abcdef"
)

// Callers admits each token as its caller (MNV_INTERNAL_CALLERS).
func Callers() auth.Callers {
	return auth.Callers{}.
		With(auth.CallerGateway, GatewayToken).
		With(auth.CallerVerification, VerificationToken).
		With(auth.CallerConnect, ConnectToken)
}
