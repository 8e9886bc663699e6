// Package workflows runs verification workflows (docs/architecture.md#verification-workflows):
// a client's policy chains channels for one number, the silent network check then a one-time
// code by SMS, until one decides. It holds the policy, the step machine, the SMS job's work and
// the ports the channels plug into (SMSProvider, SIMSwap, PumpingGuard), and imports neither
// pgx nor gRPC nor the generated protos.
package workflows

import "bytes"

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
