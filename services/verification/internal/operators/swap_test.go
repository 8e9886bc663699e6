package operators_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// swapOperator is one NETWORK_API operator with a swap block beside its camara block, whose
// client registration is its own.
func swapOperator(block string) string {
	return "operators:\n  - id: swapper\n    name: Swapper\n    country: GB\n    methods: [NETWORK_API]\n" +
		"    camara: {discoveryUrl: \"https://op.example/.well-known/openid-configuration\", apiRoot: \"https://api.op.example\", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}\n" +
		"    swap: " + block + "\n"
}

const swapBase = `discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example/", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s`

func TestSwapBlock(t *testing.T) {
	valid := []struct {
		name  string
		block string
		check func(s *operators.Swap) bool
	}{
		{"defaults", `{` + swapBase + `, simSwap: v2}`, func(s *operators.Swap) bool {
			return s.Grant == operators.GrantCIBA && s.Purpose == operators.DefaultSwapPurpose && s.SIMSwapVersion == "v2" &&
				s.DeviceSwapVersion == "" && s.APIRoot == "https://api.op.example"
		}},
		{"client credentials, device swap only", `{` + swapBase + `, grant: client_credentials, deviceSwap: v1}`, func(s *operators.Swap) bool {
			return s.Grant == operators.GrantClientCredentials && s.DeviceSwapVersion == "v1" && s.SIMSwapVersion == ""
		}},
		{"explicit endpoints, private_key_jwt", `{tokenEndpoint: "https://op.example/token", backchannelAuthenticationEndpoint: "https://op.example/bc", apiRoot: "https://a", clientId: mnv, clientAuth: private_key_jwt, privateKeyFile: k, keyId: k1, purpose: "dpv:FraudPreventionAndDetection#sim-swap", simSwap: v1, deviceSwap: v1}`, func(s *operators.Swap) bool {
			return s.TokenEndpoint == "https://op.example/token" && s.BackchannelEndpoint == "https://op.example/bc" &&
				s.Purpose == "dpv:FraudPreventionAndDetection#sim-swap" && s.KeyID == "k1"
		}},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, swapOperator(tt.block))
			op, _ := r.Get("swapper")
			if op.Swap == nil || !tt.check(op.Swap) {
				t.Fatalf("swap = %+v", op.Swap)
			}
		})
	}
	errs := []struct {
		name, block string
		want        []string
	}{
		{"no API", `{` + swapBase + `}`, []string{"swap.simSwap:", "at least one"}},
		{"bad version", `{` + swapBase + `, simSwap: "2"}`, []string{"swap.simSwap:", "version"}},
		{"unknown grant", `{` + swapBase + `, grant: password, simSwap: v2}`, []string{"swap.grant:", "password"}},
		{"discovery and endpoints", `{` + swapBase + `, tokenEndpoint: "https://op.example/t", simSwap: v2}`, []string{"swap.discoveryUrl:", "not both"}},
		{"two-legged, discovery and a backchannel endpoint", `{` + swapBase + `, grant: client_credentials, backchannelAuthenticationEndpoint: "https://op.example/bc", simSwap: v2}`, []string{"swap.discoveryUrl:", "not both"}},
		{"CIBA without its endpoint", `{tokenEndpoint: "https://op.example/t", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, simSwap: v2}`, []string{"swap.backchannelAuthenticationEndpoint:", "required"}},
		{"two-legged with a backchannel endpoint", `{tokenEndpoint: "https://op.example/t", backchannelAuthenticationEndpoint: "https://op.example/bc", grant: client_credentials, apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, simSwap: v2}`, []string{"swap.backchannelAuthenticationEndpoint:", "client_credentials"}},
		{"plain http", `{discoveryUrl: "http://op.example/.well-known/openid-configuration", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, simSwap: v2}`, []string{"swap.discoveryUrl:", "plain http"}},
		{"no secret", `{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, simSwap: v2}`, []string{"swap.clientSecretFile:", "required"}},
		{"bad purpose", `{` + swapBase + `, purpose: "a b", simSwap: v2}`, []string{"swap.purpose:"}},
		{"unknown field", `{` + swapBase + `, simSwap: v2, scopes: [x]}`, []string{"scopes"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := operators.Parse([]byte(swapOperator(tt.block)))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadReadsSwapSecrets(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"s": "swap-secret\n", "camara.txt": "other\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := strings.Replace(swapOperator(`{`+swapBase+`, simSwap: v2}`), "clientSecretFile: s}\n    swap", "clientSecretFile: camara.txt}\n    swap", 1)
	path := filepath.Join(dir, "operators.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := operators.Load(path, false)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := r.Get("swapper")
	if op.Swap.ClientSecret != "swap-secret" || op.CAMARA.ClientSecret != "other" {
		t.Fatalf("secrets: swap %q, camara %q", op.Swap.ClientSecret, op.CAMARA.ClientSecret)
	}
	if err := os.Remove(filepath.Join(dir, "s")); err != nil {
		t.Fatal(err)
	}
	if _, err := operators.Load(path, false); err == nil || !strings.Contains(err.Error(), "swap.clientSecretFile") {
		t.Fatalf("missing swap secret: %v", err)
	}
}
