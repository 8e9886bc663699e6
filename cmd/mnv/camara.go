package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	verification "github.com/mnvhq/mnv/services/verification/app"
)

// sandboxCAMARAClient is mnv's client id at the fake operator.
const sandboxCAMARAClient = "mnv-sandbox"

// startSandboxCAMARA starts the sandbox CAMARA operator (platform/testkit/sandboxcamara) on
// loopback and points verification at a registry with the sandbox operator and a sandbox-camara
// operator (NETWORK_API) reached through it, so the NETWORK_API flow can be walked with curl. It
// does nothing when the sandbox is off or MNV_OPERATORS_FILE names a registry of its own. The
// device identifies its line to the fake with the sandbox header, X-Mnv-Sandbox-Msisdn.
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
`, f.DiscoveryURL(), f.URL, sandboxCAMARAClient)
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
