package browser_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/principal"
)

// cookie is the browser's session cookie (HttpOnly: read from the browser context, as no
// page can).
func (p *person) cookie(t *testing.T) string {
	t.Helper()
	var value string
	for _, c := range p.page.Context.Cookies(t, p.origin+"/") {
		if c.Name == principal.SessionCookie {
			value = c.Value
		}
	}
	return value
}

// sessionWith asks who a session cookie is, outside any browser: 401 once it has ended.
func sessionWith(t *testing.T, origin, cookie string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, origin+"/v1/api/console/session", nil)
	req.AddCookie(&http.Cookie{Name: principal.SessionCookie, Value: cookie})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testInvitationWhileSignedIn: a browser signed in as one person accepts an invitation for
// another; the first session ends (not merely its cookie replaced), so the browser holds one
// identity, the new one. admin invites (stepped up).
func (e *env) testInvitationWhileSignedIn(t *testing.T, admin *person, origin string) {
	invite := func(email string) string {
		inv := admin.api(t, "POST", "/me/invitations", map[string]any{"email": email, "role": "MEMBER"})
		want(t, "invite "+email, inv, http.StatusOK)
		link := inv.data()["link"].(string)
		return link[strings.Index(link, "#")+1:]
	}
	first, second := invite("first-identity@example.com"), invite("second-identity@example.com")
	b := e.newPerson(t, origin)
	want(t, "accept the first", b.accept(t, first, "First"), http.StatusOK)
	old := b.cookie(t)
	if old == "" || sessionWith(t, origin, old) != http.StatusOK {
		t.Fatal("no working session cookie after accepting the first invitation")
	}
	want(t, "accept the second while signed in", b.accept(t, second, "Second"), http.StatusOK)
	if now := b.cookie(t); now == "" || now == old {
		t.Fatalf("the cookie was not replaced")
	}
	if status := sessionWith(t, origin, old); status != http.StatusUnauthorized {
		t.Fatalf("the first identity's session answered %d after the second signed in, want 401", status)
	}
	s := b.api(t, "GET", "/console/session", nil)
	want(t, "session", s, http.StatusOK)
	if email := s.data()["person"].(map[string]any)["email"]; email != "second-identity@example.com" {
		t.Fatalf("the browser is signed in as %v", email)
	}
	if n := len(b.api(t, "GET", "/console/sessions", nil).data()["items"].([]any)); n != 1 {
		t.Fatalf("the second identity has %d sessions, want 1", n)
	}
}
