package openapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/mnvhq/mnv/tests/openapi/apiclient"
)

// TestGeneratedClientWalksTheMainFlows calls the real gateway with the Go client oapi-codegen
// generated from the committed document (make generate): if the document said something the
// gateway does not do, or a mainstream generator could not read it, the client would not
// compile or its calls would not decode. The walk: the account, API keys (create, rotate,
// revoke), an SDK session and a verify, the list of verifications, Connect profiles, webhooks.
func TestGeneratedClientWalksTheMainFlows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, "VERIFY,CONNECT,SANDBOX")
	headers := func(h map[string]string) apiclient.ClientOption {
		return apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			for k, v := range h {
				req.Header.Set(k, v)
			}
			return nil
		})
	}
	api, err := apiclient.NewClientWithResponses(suite.GatewayURL, headers(keyOf(c)))
	if err != nil {
		t.Fatal(err)
	}
	me, err := apiclient.NewClientWithResponses(suite.GatewayURL, headers(meOf(c)))
	if err != nil {
		t.Fatal(err)
	}
	// must fails the test unless the answer is the documented success.
	must := func(name string, status int, answer *http.Response, body []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if answer.StatusCode != status {
			t.Fatalf("%s: %d %s", name, answer.StatusCode, body)
		}
	}

	// The account.
	client, err := api.GetClientWithResponse(ctx, nil)
	must("GetClient", 200, client.HTTPResponse, client.Body, err)
	if client.JSON200 == nil || client.JSON200.Data.Id != c.ID || client.JSON200.Data.Balance != 10 {
		t.Fatalf("GetClient: %s", client.Body)
	}
	who, err := me.GetMeWithResponse(ctx, nil)
	must("GetMe", 200, who.HTTPResponse, who.Body, err)
	if who.JSON200 == nil || who.JSON200.Data.ClientId != c.ID {
		t.Fatalf("GetMe: %s", who.Body)
	}

	// API keys: create a MEMBER key, rotate the ADMIN one, revoke the MEMBER one.
	var role apiclient.CreateApiKeyRequest_Role
	if err := role.FromRole(apiclient.MEMBER); err != nil {
		t.Fatal(err)
	}
	idem := "walk-" + c.ID
	created, err := me.CreateApiKeyWithResponse(ctx, &apiclient.CreateApiKeyParams{IdempotencyKey: &idem},
		apiclient.CreateApiKeyRequest{Name: "walk", Role: role})
	must("CreateApiKey", 200, created.HTTPResponse, created.Body, err)
	if created.JSON200 == nil || created.JSON200.Data.ApiKey == "" {
		t.Fatalf("CreateApiKey: %s", created.Body)
	}
	grace := int32(60)
	rotated, err := me.RotateOwnApiKeyWithResponse(ctx, nil, apiclient.RotateOwnApiKeyJSONRequestBody{SecretKey: c.Secret, OldKeyGraceSeconds: &grace})
	must("RotateOwnApiKey", 200, rotated.HTTPResponse, rotated.Body, err)
	if rotated.JSON200 == nil || rotated.JSON200.Data.NewApiKey == "" {
		t.Fatalf("RotateOwnApiKey: %s", rotated.Body)
	}
	admin, err := apiclient.NewClientWithResponses(suite.GatewayURL,
		headers(map[string]string{"X-Api-Key": rotated.JSON200.Data.NewApiKey, "X-Client-Id": c.ID}))
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := admin.RevokeApiKeyWithResponse(ctx, uuidOf(t, created.JSON200.Data.Id), nil)
	must("RevokeApiKey", 200, revoked.HTTPResponse, revoked.Body, err)
	keys, err := admin.ListApiKeysWithResponse(ctx, nil)
	must("ListApiKeys", 200, keys.HTTPResponse, keys.Body, err)
	for _, k := range keys.JSON200.Data.Items {
		if k.Id == created.JSON200.Data.Id {
			t.Errorf("the revoked key is still listed: %s", keys.Body)
		}
	}

	// Verify: an SDK token opens a session (the sandbox operator reads the number from a
	// header), the backend verifies the sealed number, then lists its verifications.
	tok, err := admin.CreateSdkTokenWithResponse(ctx, nil, apiclient.CreateSdkTokenRequest{Label: "walk"})
	must("CreateSdkToken", 200, tok.HTTPResponse, tok.Body, err)
	number := "+971501234569"
	sdk, err := apiclient.NewClientWithResponses(suite.GatewayURL, headers(map[string]string{
		"X-Sdk-Token": tok.JSON200.Data.SdkToken, "X-Client-Id": c.ID, sandboxHeader: number}))
	if err != nil {
		t.Fatal(err)
	}
	var platform apiclient.CreateSdkSessionRequest_Platform
	if err := platform.FromPlatform(apiclient.ANDROID); err != nil {
		t.Fatal(err)
	}
	session, err := sdk.CreateSdkSessionWithResponse(ctx, nil, apiclient.CreateSdkSessionRequest{Platform: platform})
	must("CreateSdkSession", 200, session.HTTPResponse, session.Body, err)
	if session.JSON200 == nil || session.JSON200.Data.EncryptedMobileNumber == nil {
		t.Fatalf("CreateSdkSession: %s", session.Body)
	}
	verified, err := admin.VerifyWithResponse(ctx, nil, apiclient.VerifyRequest{MobileNumber: number,
		EncryptedMobileNumber: *session.JSON200.Data.EncryptedMobileNumber, OperatorId: "sandbox",
		ServiceType: apiclient.VerifyRequestServiceTypeHEADERENRICHMENT})
	must("Verify", 200, verified.HTTPResponse, verified.Body, err)
	if verified.JSON200 == nil || verified.JSON200.Data.Status == nil || *verified.JSON200.Data.Status != "VERIFIED" {
		t.Fatalf("Verify: %s", verified.Body)
	}
	size := int32(5)
	list, err := admin.ListVerificationsWithResponse(ctx, &apiclient.ListVerificationsParams{Size: &size})
	must("ListVerifications", 200, list.HTTPResponse, list.Body, err)
	if list.JSON200 == nil || len(list.JSON200.Data.Items) != 1 || list.JSON200.Data.Items[0].VerificationId != verified.JSON200.Data.VerificationId {
		t.Fatalf("ListVerifications: %s", list.Body)
	}

	// Connect profiles.
	external := "crm-walk"
	profile, err := admin.CreateProfileWithResponse(ctx, nil, apiclient.CreateProfileRequest{MobileNumber: "+971501234570", ExternalId: &external})
	must("CreateProfile", 200, profile.HTTPResponse, profile.Body, err)
	got, err := admin.GetProfileWithResponse(ctx, uuidOf(t, profile.JSON200.Data.Id), nil)
	must("GetProfile", 200, got.HTTPResponse, got.Body, err)
	profiles, err := admin.ListProfilesWithResponse(ctx, nil)
	must("ListProfiles", 200, profiles.HTTPResponse, profiles.Body, err)
	if profiles.JSON200 == nil || len(profiles.JSON200.Data.Items) != 1 {
		t.Fatalf("ListProfiles: %s", profiles.Body)
	}

	// Webhooks.
	events := []apiclient.CreateWebhookRequestEvents{apiclient.CreateWebhookRequestEventsApiKeyRotated}
	hook, err := admin.CreateWebhookWithResponse(ctx, nil, apiclient.CreateWebhookRequest{Url: "https://hooks.example/mnv", Events: &events})
	must("CreateWebhook", 200, hook.HTTPResponse, hook.Body, err)
	if hook.JSON200 == nil || hook.JSON200.Data.Secret == nil {
		t.Fatalf("CreateWebhook: %s", hook.Body)
	}
	hooks, err := admin.ListWebhooksWithResponse(ctx, nil)
	must("ListWebhooks", 200, hooks.HTTPResponse, hooks.Body, err)
	deleted, err := admin.DeleteWebhookWithResponse(ctx, uuidOf(t, hook.JSON200.Data.Id), nil)
	must("DeleteWebhook", 200, deleted.HTTPResponse, deleted.Body, err)
}

func uuidOf(t *testing.T, s string) openapi_types.UUID {
	t.Helper()
	var u openapi_types.UUID
	if err := u.UnmarshalText([]byte(s)); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return u
}
