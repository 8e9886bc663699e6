package operators_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// camaraOperator is one NETWORK_API operator whose camara block is the flow mapping block.
func camaraOperator(block string, sandbox bool) string {
	s := "operators:\n  - id: api\n    name: API\n    country: GB\n    methods: [NETWORK_API]\n    camara: " + block + "\n"
	if sandbox {
		s += "    sandbox: true\n"
	}
	return s
}

func TestCAMARABlockValid(t *testing.T) {
	tests := []struct {
		name  string
		block string
		check func(t *testing.T, c *operators.CAMARA)
	}{
		{"discovery, basic, default scopes", camaraBlock, func(t *testing.T, c *operators.CAMARA) {
			if c.DiscoveryURL != "https://op.example/.well-known/openid-configuration" || c.ClientAuth != operators.ClientSecretBasic ||
				!slices.Equal(c.Scopes, operators.DefaultScopes) || c.HashedPhoneNumber || c.ClientSecret != "" {
				t.Errorf("got %+v", c)
			}
		}},
		{"explicit endpoints, private_key_jwt, hashed", `{issuer: "https://op.example", authorizationEndpoint: "https://op.example/authorize", tokenEndpoint: "https://op.example/token", apiRoot: "https://api.op.example/", clientId: mnv, clientAuth: private_key_jwt, privateKeyFile: key.pem, keyId: k1, scopes: [openid, "number-verification:verify"], hashedPhoneNumber: true}`, func(t *testing.T, c *operators.CAMARA) {
			if c.TokenEndpoint != "https://op.example/token" || c.ClientAuth != operators.PrivateKeyJWT || c.KeyID != "k1" ||
				!c.HashedPhoneNumber || c.APIRoot != "https://api.op.example" {
				t.Errorf("got %+v", c)
			}
		}},
		{"http on loopback", `{discoveryUrl: "http://127.0.0.1:9/.well-known/openid-configuration", apiRoot: "http://localhost:9", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, func(t *testing.T, c *operators.CAMARA) {
			if c.APIRoot != "http://localhost:9" {
				t.Errorf("got %+v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, camaraOperator(tt.block, false))
			op, _ := r.Get("api")
			if op.CAMARA == nil {
				t.Fatal("no CAMARA settings")
			}
			tt.check(t, op.CAMARA)
		})
	}
}

func TestCAMARABlockErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []string
		sandbox bool
	}{
		{"NETWORK_API without camara", "operators:\n" + operator(map[string]string{"methods": "[NETWORK_API]", "headerEnrichment": "-"}), []string{"camara:", "required"}, false},
		{"camara without NETWORK_API", "operators:\n" + operator(map[string]string{"camara": camaraBlock}), []string{"camara:", "does not list"}, false},
		{"unknown field", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, clientSecret: oops}`, false), []string{"clientSecret"}, false},
		{"discovery and endpoints", camaraOperator(`{discoveryUrl: "https://op.example/d", issuer: "https://op.example", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.discoveryUrl:", "not both"}, false},
		{"no endpoints", camaraOperator(`{apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.issuer:", "required"}, false},
		{"no token endpoint", camaraOperator(`{issuer: "https://op.example", authorizationEndpoint: "https://op.example/a", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.tokenEndpoint:"}, false},
		{"relative discovery URL", camaraOperator(`{discoveryUrl: "/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.discoveryUrl:", "absolute"}, false},
		{"plain http off loopback", camaraOperator(`{discoveryUrl: "http://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.discoveryUrl:", "plain http"}, false},
		{"URL with user info", camaraOperator(`{discoveryUrl: "https://u:p@op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.discoveryUrl:", "user info"}, false},
		{"no apiRoot", camaraOperator(`{discoveryUrl: "https://op.example/d", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.apiRoot:", "required"}, false},
		{"apiRoot with a query", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a/?x=1", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.apiRoot:"}, false},
		{"no clientId", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientAuth: client_secret_basic, clientSecretFile: s}`, false), []string{"camara.clientId:"}, false},
		{"unknown clientAuth", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_post, clientSecretFile: s}`, false), []string{"camara.clientAuth:", "client_secret_post"}, false},
		{"basic without secret", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic}`, false), []string{"camara.clientSecretFile:", "required"}, false},
		{"basic with a key", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, privateKeyFile: k}`, false), []string{"camara.privateKeyFile:"}, false},
		{"jwt without key", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: private_key_jwt}`, false), []string{"camara.privateKeyFile:", "required"}, false},
		{"jwt with a secret", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: private_key_jwt, privateKeyFile: k, clientSecretFile: s}`, false), []string{"camara.clientSecretFile:"}, false},
		{"scopes without openid", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, scopes: ["number-verification:verify"]}`, false), []string{"camara.scopes:", "openid"}, false},
		{"scope with a space", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, scopes: [openid, "a b"]}`, false), []string{"camara.scopes[1]:"}, false},
		{"scope twice", camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s, scopes: [openid, openid]}`, false), []string{"camara.scopes[1]:", "twice"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := operators.Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded with %d operators; file:\n%s", len(r.List()), tt.file)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A sandbox operator may speak plain http anywhere (make run's fake operator).
	if _, err := operators.Parse([]byte(camaraOperator(`{discoveryUrl: "http://op.example/d", apiRoot: "http://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: s}`, true))); err != nil {
		t.Errorf("sandbox over http: %v", err)
	}
}

func TestLoadReadsCAMARASecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	write("secret.txt", "s3cret\n")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	write("key.pem", string(keyPEM))
	write("empty.txt", "\n")
	write("notkey.pem", "hello")
	basic := func(file string) string {
		return camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: `+file+`}`, false)
	}
	jwt := func(file string) string {
		return camaraOperator(`{discoveryUrl: "https://op.example/d", apiRoot: "https://a", clientId: mnv, clientAuth: private_key_jwt, privateKeyFile: `+file+`}`, false)
	}
	tests := []struct {
		name, file, wantErr string
		check               func(c *operators.CAMARA) bool
	}{
		{"secret, relative", basic("secret.txt"), "", func(c *operators.CAMARA) bool { return c.ClientSecret == "s3cret" }},
		{"secret, absolute", basic(filepath.Join(dir, "secret.txt")), "", func(c *operators.CAMARA) bool { return c.ClientSecret == "s3cret" }},
		{"key", jwt("key.pem"), "", func(c *operators.CAMARA) bool {
			return bytes.Equal(bytes.TrimSpace(c.PrivateKeyPEM), bytes.TrimSpace(keyPEM)) // the file's key, as written
		}},
		{"missing secret file", basic("nope.txt"), "camara.clientSecretFile:", nil},
		{"empty secret file", basic("empty.txt"), "camara.clientSecretFile:", nil},
		{"not a key", jwt("notkey.pem"), "camara.privateKeyFile: not a PEM private key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "ops.yaml")
			write("ops.yaml", tt.file)
			r, err := operators.Load(path, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `operators[0] (id "api")`) {
					t.Fatalf("Load error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			op, _ := r.Get("api")
			if !tt.check(op.CAMARA) {
				t.Errorf("got %+v", op.CAMARA)
			}
		})
	}
}
