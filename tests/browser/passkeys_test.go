package browser_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// testPasskeys: the signed-in person adds a second passkey from the console's "Your passkeys"
// page (a registration through the virtual authenticator, from which the first has gone: a
// device lost), signs out and in again with the second, removes the first on the page, and is
// refused the removal of the last one. p is signed in; othersPasskey is another person's.
func (e *env) testPasskeys(t *testing.T, p *person, othersPasskey string) {
	credentials := func() map[string]bool {
		t.Helper()
		cs, err := p.webAuthn.Credentials(p.authenticator)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, c := range cs {
			ids[c.CredentialID] = true
		}
		return ids
	}
	listed := func() []map[string]any {
		t.Helper()
		a := p.api(t, "GET", "/console/passkeys", nil)
		want(t, "list passkeys", a, http.StatusOK)
		var out []map[string]any
		for _, it := range a.data()["items"].([]any) {
			out = append(out, it.(map[string]any))
		}
		return out
	}
	first := listed()
	if len(first) != 1 || first[0]["name"] != "" || first[0]["createdAt"] == nil || first[0]["lastUsedAt"] == nil {
		t.Fatalf("the invited person's passkeys: %v", first)
	}
	for k := range first[0] {
		if strings.Contains(strings.ToLower(k), "credential") {
			t.Fatalf("a passkey is listed with its %s", k)
		}
	}
	before := credentials()

	// Adding one asks for a step-up: fresh here, so the page goes straight to the registration.
	var stepped answer
	p.run(t, fetchJS+`
const start = await api('POST', '/console/step-up/options', {});
const o = JSON.parse(start.body.data.optionsJson);
const cred = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.publicKey)});
return await api('POST', '/console/step-up', {ceremonyId: start.body.data.ceremonyId, credentialJson: JSON.stringify(cred.toJSON())});`, nil, &stepped)
	want(t, "step up", stepped, http.StatusOK)
	// The authenticator becomes the second device: the first's credential leaves it (a device
	// lost), since an authenticator that holds one of the person's passkeys refuses a second
	// (the registration excludes the person's own).
	for id := range before {
		if err := p.webAuthn.RemoveCredential(p.authenticator, id); err != nil {
			t.Fatal(err)
		}
	}
	rows := `document.querySelectorAll('tr[data-passkey]').length`
	p.page.Goto(t, p.origin+"/console/passkeys")
	p.page.WaitVisible(t, `main h1`)
	p.page.Poll(t, rows+` === 1`, nil, 15*time.Second)
	p.page.Click(t, `xpath=//main//button[normalize-space()="Add a passkey"]`)
	p.page.WaitVisible(t, `dialog[open] input`)
	p.page.Type(t, `dialog[open] input`, "Second device")
	p.page.Click(t, `dialog[open] button[type=submit]`)
	if err := p.page.PollErr(rows+` === 2`, nil, 15*time.Second); err != nil {
		text, _ := p.page.TextErr(`body`)
		t.Fatalf("add a passkey on the page: %v\n%s", err, text)
	}
	both := listed()
	if len(both) != 2 || both[1]["name"] != "Second device" || both[1]["lastUsedAt"] != nil {
		t.Fatalf("after adding: %v", both)
	}
	if after := credentials(); len(after) != 1 {
		t.Fatalf("the authenticator holds %d credentials after the registration, want the new one", len(after))
	}

	want(t, "sign out", p.api(t, "POST", "/console/session/sign-out", map[string]any{}), http.StatusOK)
	want(t, "sign in with the second passkey", p.signIn(t), http.StatusOK)
	if now := listed(); now[1]["lastUsedAt"] == nil {
		t.Fatalf("the second passkey signed in but was not recorded as used: %v", now)
	}

	// Remove the first on the page (signed in a moment ago: stepped up), then try the last.
	remove := func(name string) {
		t.Helper()
		p.page.Goto(t, p.origin+"/console/passkeys")
		p.page.WaitVisible(t, `main h1`)
		p.page.Poll(t, rows+` > 0`, nil, 15*time.Second)
		p.page.Click(t, `xpath=//main//button[@aria-label="Remove `+name+`"]`)
		p.page.Click(t, `xpath=//dialog[@open]//button[normalize-space()="Remove passkey"]`)
	}
	remove("Unnamed passkey")
	if err := p.page.PollErr(rows+` === 1`, nil, 15*time.Second); err != nil {
		t.Fatalf("the first passkey is still listed: %v", err)
	}
	remove("Second device")
	var refusal string
	err := p.page.WaitVisibleErr(`dialog[open] .form-error`)
	if err == nil {
		refusal, err = p.page.TextErr(`dialog[open] .form-error`)
	}
	if err != nil || !strings.Contains(refusal, "last passkey") {
		t.Fatalf("removing the last passkey: %q, %v", refusal, err)
	}
	last := listed()
	want(t, "remove the last passkey by the API", p.api(t, "DELETE", "/console/passkeys/"+last[0]["id"].(string), nil), http.StatusConflict)
	if len(last) != 1 || last[0]["name"] != "Second device" {
		t.Fatalf("after removing: %v", last)
	}
	// Another person's passkey is not found, nor one removed; a rename needs a name.
	for _, id := range []string{othersPasskey, first[0]["id"].(string)} {
		want(t, "remove a passkey that is not one's own", p.api(t, "DELETE", "/console/passkeys/"+id, nil), http.StatusNotFound)
		want(t, "rename a passkey that is not one's own", p.api(t, "PATCH", "/console/passkeys/"+id, map[string]any{"name": "x"}), http.StatusNotFound)
	}
	want(t, "rename with no name", p.api(t, "PATCH", "/console/passkeys/"+last[0]["id"].(string), map[string]any{"name": ""}), http.StatusBadRequest)
	renamed := p.api(t, "PATCH", "/console/passkeys/"+last[0]["id"].(string), map[string]any{"name": "Phone"})
	want(t, "rename", renamed, http.StatusOK)

	audit := p.api(t, "GET", "/me/audit-log?size=100", nil)
	want(t, "audit log", audit, http.StatusOK)
	seen := map[string]bool{}
	for _, it := range audit.data()["items"].([]any) {
		seen[it.(map[string]any)["action"].(string)] = true
	}
	for _, a := range []string{"StartAddPasskey", "AddPasskey", "DeletePasskey", "RenamePasskey"} {
		if !seen[a] {
			t.Errorf("the audit log does not record %s: %v", a, seen)
		}
	}
}
