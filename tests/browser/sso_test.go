package browser_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
)

// testSSO: a client's own OpenID Connect provider (mockoidc, a fake of the client's identity
// provider) signs its people in, with the role its groups claim gives; the flow is bound to the
// browser that began it, used once, and ends when the ADMIN turns single sign-on off. admin is a
// signed-in ADMIN of the demo client, stepped up.
func (e *env) testSSO(t *testing.T, admin *person, origin, adminPersonID string) {
	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Shutdown() })
	cfg := idp.Config()

	set := admin.api(t, "PUT", "/me/sso", map[string]any{
		"issuer": cfg.Issuer, "oidcClientId": cfg.ClientID, "clientSecret": cfg.ClientSecret,
		"roleClaim": "groups", "adminValues": []string{"mnv-admins"}, "memberValues": []string{"engineering"},
		"scopes": []string{"groups"},
	})
	want(t, "set single sign-on", set, http.StatusOK)
	if set.data()["redirectUri"] != origin+"/v1/api/console/sso/callback" || set.data()["settings"].(map[string]any)["hasClientSecret"] != true {
		t.Fatalf("set: %v", set.data())
	}
	want(t, "an issuer that does not answer", admin.api(t, "PUT", "/me/sso", map[string]any{
		"issuer": "http://127.0.0.1:1/nothing", "oidcClientId": "x", "roleClaim": "groups", "adminValues": []string{"a"},
	}), http.StatusBadRequest)

	// ssoSignIn signs p in through the provider as u and returns where the browser ended.
	ssoSignIn := func(p *person, u *mockoidc.MockUser) string {
		t.Helper()
		idp.QueueUser(u)
		start := p.api(t, "POST", "/console/sso/start", map[string]any{"clientId": e.client.ClientID})
		want(t, "start single sign-on", start, http.StatusOK)
		p.page.Goto(t, start.data()["authorizationUrl"].(string))
		return p.page.URL(t)
	}
	member := &mockoidc.MockUser{Subject: "sso-member", Email: "dev@example.com", EmailVerified: true, Groups: []string{"engineering"}}
	p := e.newPerson(t, origin)
	if at := ssoSignIn(p, member); !strings.HasPrefix(at, origin+"/console/") || strings.Contains(at, "sso=failed") {
		t.Fatalf("after single sign-on the browser is at %s", at)
	}
	s := p.api(t, "GET", "/console/session", nil)
	want(t, "the session single sign-on opened", s, http.StatusOK)
	who := s.data()["person"].(map[string]any)
	if s.data()["membership"].(map[string]any)["role"] != "MEMBER" || who["email"] != "dev@example.com" || who["id"] == adminPersonID {
		// The provider names the passkey person's e-mail: it still signs in a person of its
		// client's own, never that one.
		t.Fatalf("signed in through the provider as %v", s.data())
	}
	want(t, "a MEMBER of the provider creates a key", p.api(t, "POST", "/me/api-keys", map[string]any{"name": "x", "role": "MEMBER"}), http.StatusForbidden)
	if n := len(s.data()["memberships"].([]any)); n != 1 {
		t.Fatalf("the provider's person belongs to %d clients", n)
	}

	// The provider's groups decide the role, at every sign-in.
	bossUser := &mockoidc.MockUser{Subject: "sso-boss", Email: "boss@example.com", EmailVerified: true, Groups: []string{"engineering", "mnv-admins"}}
	boss := e.newPerson(t, origin)
	ssoSignIn(boss, bossUser)
	if r := boss.api(t, "GET", "/console/session", nil).data()["membership"].(map[string]any)["role"]; r != "ADMIN" {
		t.Fatalf("the provider's admin is %v", r)
	}
	nobody := e.newPerson(t, origin)
	if at := ssoSignIn(nobody, &mockoidc.MockUser{Subject: "sso-none", Email: "none@example.com", EmailVerified: true, Groups: []string{"sales"}}); !strings.Contains(at, "sso=failed") {
		t.Fatalf("a person of no mapped group ended at %s", at)
	}
	want(t, "a person of no mapped group", nobody.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)

	// The flow is bound to the browser that began it: another browser that follows the same
	// authorization URL (a link an attacker sends) is not signed in.
	idp.QueueUser(member)
	start := p.api(t, "POST", "/console/sso/start", map[string]any{"clientId": e.client.ClientID})
	victim := e.newPerson(t, origin)
	victim.page.Goto(t, start.data()["authorizationUrl"].(string))
	at := victim.page.URL(t)
	if !strings.Contains(at, "sso=failed") {
		t.Fatalf("a browser that did not begin the flow ended at %s", at)
	}
	want(t, "the other browser's session", victim.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	// And a state is used once: coming back twice with it fails.
	u, _ := url.Parse(start.data()["authorizationUrl"].(string))
	replay := origin + "/v1/api/console/sso/callback?code=x&state=" + u.Query().Get("state")
	p.page.Goto(t, replay)
	at = p.page.URL(t)
	if !strings.Contains(at, "sso=failed") {
		t.Fatalf("a used state ended at %s", at)
	}

	// Off: the people it signed in lose their sessions.
	want(t, "turn single sign-on off", admin.api(t, "DELETE", "/me/sso", nil), http.StatusOK)
	want(t, "the provider's person once it is off", p.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	want(t, "start once it is off", p.api(t, "POST", "/console/sso/start", map[string]any{"clientId": e.client.ClientID}), http.StatusNotFound)
}
