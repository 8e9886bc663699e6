package facade_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/verification/internal/facade"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// newFacade serves a facade over a fresh schema on a real socket, its issuer the server's URL.
// Accounts, principals, sessions and the verifier are left out: the routes tried here never
// reach them.
func newFacade(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	pool := verificationtest.Database(t, 4)
	ring, err := crypto.ParseKeyring(crypto.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	f, err := facade.New(ctx, facade.Config{
		Issuer:    srv.URL,
		NetworkOf: func(*http.Request) network.Request { return network.Request{} },
	}, facade.Deps{Store: store.New(pool), Keyring: ring, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h = f
	return srv
}

func discovery(t *testing.T, srv *httptest.Server) map[string]any {
	t.Helper()
	resp, err := http.Get(srv.URL + facade.DiscoveryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %d %v", resp.StatusCode, err)
	}
	return d
}

// TestTrimmedEndpoints: the provider serves what CAMARA uses (discovery, authorize, token, the
// ID tokens' keys) and nothing else the library has, on any method; discovery names none of the
// rest and offers only the code flow.
func TestTrimmedEndpoints(t *testing.T) {
	srv := newFacade(t)
	d := discovery(t, srv)

	for _, path := range []string{
		"/oauth2/userinfo", "/oauth2/introspect", "/oauth2/revoke", "/oauth2/end_session",
		"/oauth2/device_authorization", "/userinfo", "/oauth/introspect", "/revoke", "/end_session",
		"/device_authorization", "/keys", "/authorize", "/oauth/token",
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(method+" "+path, func(t *testing.T) {
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("token=x&client_id=y"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer x")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("%s %s: %d, want 404", method, path, resp.StatusCode)
				}
			})
		}
	}

	t.Run("discovery names only the served endpoints", func(t *testing.T) {
		for _, key := range []string{
			"userinfo_endpoint", "introspection_endpoint", "revocation_endpoint", "end_session_endpoint",
			"device_authorization_endpoint", "check_session_iframe", "registration_endpoint",
			"introspection_endpoint_auth_methods_supported", "introspection_endpoint_auth_signing_alg_values_supported",
			"revocation_endpoint_auth_methods_supported", "revocation_endpoint_auth_signing_alg_values_supported",
		} {
			if v, ok := d[key]; ok {
				t.Errorf("discovery names %s: %v", key, v)
			}
		}
		want := map[string]string{
			"authorization_endpoint": srv.URL + "/oauth2/authorize",
			"token_endpoint":         srv.URL + "/oauth2/token",
			"jwks_uri":               srv.URL + "/oauth2/keys",
		}
		for key, url := range want {
			if d[key] != url {
				t.Errorf("%s = %v, want %s", key, d[key], url)
			}
		}
		if g := asStrings(d["grant_types_supported"]); !slices.Equal(g, []string{"authorization_code"}) {
			t.Errorf("grant_types_supported %v", g)
		}
		if r := asStrings(d["response_types_supported"]); !slices.Equal(r, []string{"code"}) {
			t.Errorf("response_types_supported %v", r)
		}
		if m := asStrings(d["token_endpoint_auth_methods_supported"]); !slices.Equal(m, []string{"client_secret_basic", "client_secret_post"}) {
			t.Errorf("token_endpoint_auth_methods_supported %v", m)
		}
	})

	t.Run("every endpoint discovery names is served", func(t *testing.T) {
		for _, key := range []string{"authorization_endpoint", "token_endpoint", "jwks_uri"} {
			resp, err := http.Get(d[key].(string))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500 {
				t.Errorf("%s (%s): %d", key, d[key], resp.StatusCode)
			}
		}
	})

	t.Run("the JWT bearer grant is refused", func(t *testing.T) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {"a.b.c"}}
		resp, err := http.PostForm(srv.URL+"/oauth2/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error != "unsupported_grant_type" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
}

// TestDiscoveryValidates: an OpenID Connect relying party (coreos/go-oidc) accepts the trimmed
// metadata (issuer equal to the URL it was fetched from, the required fields) and reads the
// keys it names.
func TestDiscoveryValidates(t *testing.T) {
	srv := newFacade(t)
	ctx := context.Background()
	p, err := gooidc.NewProvider(ctx, srv.URL)
	if err != nil {
		t.Fatalf("go-oidc refuses the discovery: %v", err)
	}
	if e := p.Endpoint(); e.AuthURL != srv.URL+"/oauth2/authorize" || e.TokenURL != srv.URL+"/oauth2/token" {
		t.Fatalf("endpoints %+v", e)
	}
	// OpenID Connect Discovery 1.0 §3: the metadata a provider must publish.
	d := discovery(t, srv)
	for _, key := range []string{
		"issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "response_types_supported",
		"subject_types_supported", "id_token_signing_alg_values_supported",
	} {
		if v, ok := d[key]; !ok || v == "" || v == nil {
			t.Errorf("required %s missing", key)
		}
	}
	// The keys are a JWK set with the RS256 signing key.
	resp, err := http.Get(d["jwks_uri"].(string))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct{ Kty, Alg, Use, Kid string } `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 ||
		set.Keys[0].Kty != "RSA" || set.Keys[0].Alg != "RS256" || set.Keys[0].Use != "sig" || set.Keys[0].Kid == "" {
		t.Fatalf("keys %+v %v", set, err)
	}
}

func asStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
