package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	verification "github.com/mnvhq/mnv/services/verification/app"
)

// sandboxCAMARAClient is mnv's client id at the fake operator.
const sandboxCAMARAClient = "mnv-sandbox"

// SandboxSwappedNumber is the line whose SIM (and device) the sandbox operator says changed an
// hour ago: a workflow started for it under a SIM-swap policy sees SWAPPED. A GB mobile number
// (the pumping controls send codes to mobile lines only).
const SandboxSwappedNumber = "+447400900666"

// SandboxDeviceSwappedNumber is the line the sandbox operator says moved to another device an
// hour ago, its SIM unchanged: a workflow for it under a device-swap policy sees its device
// SWAPPED while a SIM-swap check alone lets it through.
const SandboxDeviceSwappedNumber = "+447400900667"

// startSandboxCAMARA starts the sandbox CAMARA operator (platform/testkit/sandboxcamara) on
// loopback and points verification at a registry with the sandbox operator and a sandbox-camara
// operator (NETWORK_API) reached through it, so the NETWORK_API flow can be walked with curl. It
// does nothing when the sandbox is off or MNV_OPERATORS_FILE names a registry of its own. The
// device identifies its line to the fake with the sandbox header, X-Mnv-Sandbox-Msisdn.
//
// sandbox-camara also answers CAMARA SIM Swap and Device Swap (its swap block, two-legged so a
// check costs no backchannel wait), so a workflow policy's SIM-swap and device-swap gates work
// out of the box: every line's SIM and device never changed, except SandboxSwappedNumber's, both
// changed an hour before the run started, and SandboxDeviceSwappedNumber's device alone
// (docs/operations.md#sim-swap-settings).
func startSandboxCAMARA(state string, vcfg *verification.Config, gatewayAddr string) (*sandboxcamara.Fake, error) {
	if !vcfg.Sandbox || vcfg.OperatorsFile != "" {
		return nil, nil
	}
	if vcfg.PublicURL == "" {
		vcfg.PublicURL = "http://" + browserAddrString(gatewayAddr)
	}
	secret := crypto.NewSecret()
	f, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{
		ID: sandboxCAMARAClient, Secret: secret, RedirectURIs: []string{vcfg.PublicURL + verification.CallbackPath},
	}}})
	if err != nil {
		return nil, err
	}
	secretFile := filepath.Join(state, "sandbox-camara.secret")
	registry := filepath.Join(state, "operators.yaml")
	yaml := fmt.Sprintf(`# Written by make run (cmd/mnv) at each start: the sandbox operator, and sandbox-camara, the
# fake CAMARA operator this run started (NETWORK_API). Set MNV_OPERATORS_FILE to use a registry
# of your own instead.
operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    mccMnc: ["001-01"]
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.0/8", "::1/128"]
      numberHeader: X-Mnv-Sandbox-Msisdn
  - id: sandbox-camara
    name: mnv sandbox (CAMARA network API)
    country: ZZ
    mccMnc: ["001-02"]
    methods: [NETWORK_API]
    sandbox: true
    camara:
      discoveryUrl: %s
      apiRoot: %s
      clientId: %s
      clientAuth: client_secret_basic
      clientSecretFile: sandbox-camara.secret
    swap:
      discoveryUrl: %[1]s
      apiRoot: %[2]s
      clientId: %[3]s
      clientAuth: client_secret_basic
      clientSecretFile: sandbox-camara.secret
      grant: client_credentials
      simSwap: v2
      deviceSwap: v1
`, f.DiscoveryURL(), f.URL, sandboxCAMARAClient)
	swappedAt := time.Now().Add(-time.Hour).UTC()
	f.SetLine(SandboxSwappedNumber, sandboxcamara.Line{SIMChange: swappedAt, DeviceChange: swappedAt})
	f.SetLine(SandboxDeviceSwappedNumber, sandboxcamara.Line{DeviceChange: swappedAt})
	for _, w := range []struct{ path, text string }{{secretFile, secret + "\n"}, {registry, yaml}} {
		if err := os.WriteFile(w.path, []byte(w.text), 0o600); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	vcfg.OperatorsFile = registry
	return f, nil
}

// browserAddrString is browserAddr for an address in text.
func browserAddrString(addr string) string {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return addr
	}
	return browserAddr(a)
}
