package console_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// The options go-webauthn writes (protocol.CredentialCreation / CredentialAssertion), for the
// RP "localhost": an IP address cannot be a WebAuthn RP ID, so the tab opens the gateway by name.
const (
	creationOptions = `{"publicKey":{"rp":{"name":"mnv","id":"localhost"},"user":{"id":"dXNlci0x","name":"new@example.com","displayName":"New Person"},` +
		`"challenge":"Y3JlYXRlLWNoYWxsZW5nZS0wMTIzNDU2Nzg5YWJjZGVm","pubKeyCredParams":[{"type":"public-key","alg":-7},{"type":"public-key","alg":-257}],` +
		`"timeout":60000,"authenticatorSelection":{"residentKey":"required","requireResidentKey":true,"userVerification":"required"},"attestation":"none"}}`
	assertionOptions = `{"publicKey":{"challenge":"Z2V0LWNoYWxsZW5nZS0wMTIzNDU2Nzg5YWJjZGVmZ2hp","timeout":60000,"rpId":"localhost","userVerification":"required"}}`
)

// TestPasskeys runs the console's three ceremonies in Chromium with its virtual authenticator
// (DevTools' WebAuthn domain) against the fake API: an invitation creates a passkey, sign-in
// asserts it, and an action answered 403 STEP_UP_REQUIRED asks for it again and is retried once,
// with a new Idempotency-Key. The server's checks of the credentials are the people API's tests.
func TestPasskeys(t *testing.T) {
	root, gateway, browser := setUp(t)
	// An IP address cannot be a WebAuthn RP ID: the tab opens the gateway by name.
	gateway = strings.Replace(gateway, "127.0.0.1", "localhost", 1)

	answers := fakeAnswers(time.Now())
	answers["POST /v1/api/console/invitations/open"] = map[string]any{"ceremonyId": "cer-1", "clientName": "Acme Shop", "email": "new@example.com",
		"role": "MEMBER", "recovery": false, "optionsJson": creationOptions}
	answers["POST /v1/api/console/invitations/accept"] = map[string]any{"person": map[string]any{"id": "u3", "name": "New Person", "email": "new@example.com"},
		"membership": map[string]any{"clientId": "c1", "clientName": "Acme Shop", "role": "MEMBER"}}
	answers["POST /v1/api/console/sign-in/options"] = map[string]any{"ceremonyId": "cer-2", "optionsJson": assertionOptions}
	answers["POST /v1/api/console/sign-in"] = answers["POST /v1/api/console/invitations/accept"]
	answers["POST /v1/api/console/step-up/options"] = map[string]any{"ceremonyId": "cer-3", "optionsJson": assertionOptions}
	answers["POST /v1/api/console/step-up"] = map[string]any{"steppedUpUntil": time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)}
	api := newFakeAPI(answers)
	// The first creation of a key needs a step-up; the retry after it is answered.
	api.hook = func(key string, n int, _ string) (int, any, bool) {
		if key == "POST /v1/api/me/api-keys" && n == 1 {
			return 403, apiError{"STEP_UP_REQUIRED", "confirm with your passkey"}, true
		}
		return 0, nil, false
	}
	tab := api.tab(t, browser, harness.ContextOptions{Width: 1200, Height: 800})
	webAuthn, authenticator := tab.VirtualAuthenticator(t)

	t.Run("an invitation creates a passkey", func(t *testing.T) {
		var address, path string
		tab.Goto(t, gateway+"/console/invite#tok-secret-123")
		tab.WaitVisible(t, `form input`)
		tab.Eval(t, `location.href`, &address)
		client := tab.Text(t, `.facts dd`)
		tab.Type(t, `form input`, "New Person")
		tab.Click(t, `form button[type=submit]`)
		if err := tab.PollErr(`location.pathname === '/console'`, nil, 20*time.Second); err != nil {
			text, _ := tab.TextErr(`body`)
			t.Fatalf("%v\n%s", err, text)
		}
		tab.WaitVisible(t, `main h1`)
		tab.Eval(t, `location.pathname`, &path)
		if strings.Contains(address, "tok-secret") {
			t.Errorf("the token stays in the address bar: %s", address)
		}
		if client != "Acme Shop" {
			t.Errorf("client %q", client)
		}
		if r := api.requests("POST /v1/api/console/invitations/open"); len(r) != 1 || !strings.Contains(r[0].body, `"token":"tok-secret-123"`) {
			t.Errorf("open: %+v", r)
		}
		accept := api.requests("POST /v1/api/console/invitations/accept")
		if len(accept) != 1 {
			t.Fatalf("accept: %+v", accept)
		}
		var body struct{ Token, CeremonyID, CredentialJSON, Name string }
		if err := json.Unmarshal([]byte(accept[0].body), &body); err != nil {
			t.Fatal(err)
		}
		if body.Token != "tok-secret-123" || body.CeremonyID != "cer-1" || body.Name != "New Person" ||
			!strings.Contains(body.CredentialJSON, `"attestationObject"`) || !strings.Contains(body.CredentialJSON, `"type":"public-key"`) {
			t.Errorf("accept body %+v", body)
		}
		creds, err := webAuthn.Credentials(authenticator)
		if err != nil || len(creds) != 1 || creds[0].RpID != "localhost" {
			t.Errorf("the authenticator holds %d credentials (%v)", len(creds), err)
		}
	})

	t.Run("sign-in asserts it", func(t *testing.T) {
		tab.Goto(t, gateway+"/console/sign-in")
		tab.WaitVisible(t, `#sign-in-title`)
		tab.Click(t, `main button`)
		tab.Poll(t, `location.pathname === '/console'`, nil, 20*time.Second)
		r := api.requests("POST /v1/api/console/sign-in")
		if len(r) != 1 || !strings.Contains(r[0].body, `"ceremonyId":"cer-2"`) || !strings.Contains(r[0].body, `authenticatorData`) {
			t.Errorf("sign-in: %+v", r)
		}
	})

	t.Run("a step-up, then the action once more", func(t *testing.T) {
		tab.Goto(t, gateway+"/console/keys")
		tab.WaitVisible(t, `main h1`)
		tab.Type(t, `form.inline-form input`, "CI")
		tab.Click(t, `form.inline-form button[type=submit]`)
		tab.WaitVisible(t, `dialog[open]`)
		screenshot(t, tab, root, "console-step-up.png")
		tab.Click(t, `dialog[open] .button-primary`)
		tab.WaitVisible(t, `.secret-value`)
		secret := tab.Text(t, `.secret-value`)
		if secret == "" {
			t.Error("no secret shown")
		}
		creates := api.requests("POST /v1/api/me/api-keys")
		if len(creates) != 2 || creates[0].idempotencyKey == "" || creates[0].idempotencyKey == creates[1].idempotencyKey {
			t.Errorf("creates %+v: want two, each with its own Idempotency-Key", creates)
		}
		if r := api.requests("POST /v1/api/console/step-up"); len(r) != 1 || !strings.Contains(r[0].body, `"ceremonyId":"cer-3"`) {
			t.Errorf("step-up: %+v", r)
		}
	})
	api.checkAnswered(t)
}
