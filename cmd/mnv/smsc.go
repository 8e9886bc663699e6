package main

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
	verification "github.com/mnvhq/mnv/services/verification/app"
)

// sandboxSMSCSystemID is verification's system id at the sandbox SMSC.
const sandboxSMSCSystemID = "mnv-sandbox"

// startSandboxSMSC starts the sandbox SMSC (platform/testkit/sandboxsmsc) on loopback and
// points verification's SMS provider at it, with a password made for this run: the workflows'
// one-time codes then arrive there, kept in memory, without an operator. It does nothing when
// the sandbox is off or MNV_SMPP_ADDR names an SMSC of its own.
func startSandboxSMSC(vcfg *verification.Config) (*sandboxsmsc.Server, error) {
	if !vcfg.Sandbox || vcfg.SMPP.Addr != "" {
		return nil, nil
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	password := hex.EncodeToString(b) // 8 characters, SMPP's most
	srv, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: sandboxSMSCSystemID, Password: password})
	if err != nil {
		return nil, err
	}
	vcfg.SMPP.Addr, vcfg.SMPP.SystemID, vcfg.SMPP.Password = srv.Addr(), sandboxSMSCSystemID, password
	vcfg.SandboxInbox = inbox{srv}
	return srv, nil
}

// inbox is the sandbox SMSC as verification reads it: each client sees its own workflows'
// messages only (GET /v1/api/me/sandbox/sms).
type inbox struct{ srv *sandboxsmsc.Server }

func (i inbox) Sent() []verification.SandboxMessage {
	all := i.srv.All()
	out := make([]verification.SandboxMessage, len(all))
	for k, m := range all {
		out[k] = verification.SandboxMessage{ProviderIDs: m.IDs, From: m.From, Text: m.Text, At: m.At}
	}
	return out
}
