package integrations_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// fakeStore is an in-memory integrations.Store: an integration of another client is not
// found, as in the database.
type fakeStore struct {
	its    map[string]domain.Integration
	synced []string // integration ids queued by EnqueueAll
}

func (f *fakeStore) InsertIntegration(_ context.Context, it domain.Integration) (domain.Integration, error) {
	it.CreatedAt, it.UpdatedAt = time.Now(), time.Now()
	f.its[it.ID] = it
	return it, nil
}

func (f *fakeStore) UpdateIntegration(ctx context.Context, it domain.Integration) (domain.Integration, error) {
	if _, err := f.GetIntegration(ctx, it.ClientID, it.ID); err != nil {
		return it, err
	}
	it.UpdatedAt = time.Now()
	f.its[it.ID] = it
	return it, nil
}

func (f *fakeStore) GetIntegration(_ context.Context, clientID, id string) (domain.Integration, error) {
	it, ok := f.its[id]
	if !ok || it.ClientID != clientID {
		return domain.Integration{}, fault.ErrNotFound
	}
	return it, nil
}

func (f *fakeStore) ListIntegrations(_ context.Context, clientID string, _, _ int64) (domain.Page[domain.Integration], error) {
	var p domain.Page[domain.Integration]
	for _, it := range f.its {
		if it.ClientID == clientID {
			p.Items = append(p.Items, it)
		}
	}
	p.Total = int64(len(p.Items))
	return p, nil
}

func (f *fakeStore) DeleteIntegration(ctx context.Context, clientID, id string) error {
	if _, err := f.GetIntegration(ctx, clientID, id); err != nil {
		return err
	}
	delete(f.its, id)
	return nil
}

func (f *fakeStore) EnqueueAll(_ context.Context, it domain.Integration, _ string, _ *string) (int64, error) {
	f.synced = append(f.synced, it.ID)
	return 3, nil
}

func (f *fakeStore) ListSyncEvents(context.Context, string, string, *domain.SyncStatus, int64, int64) (domain.Page[domain.SyncEvent], error) {
	return domain.Page[domain.SyncEvent]{}, nil
}

// InTx runs fn over the fake: it has no transactions to fake beyond that.
func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st integrations.Store) error) error {
	return fn(ctx, f)
}

func newService(t *testing.T) (*integrations.Service, *fakeStore, *crypto.Keyring) {
	t.Helper()
	_, keyring := connecttest.Keys(t)
	st := &fakeStore{its: map[string]domain.Integration{}}
	return integrations.New(st, st, keyring, outbound.Policy{}), st, keyring
}

func ptr[T any](v T) *T { return &v }

// valid is a request every rule accepts.
func valid() integrations.CreateRequest {
	return integrations.CreateRequest{
		DisplayName: "CRM", Type: domain.TypeWebhook, EndpointURL: "https://crm.example.com/hook", HTTPMethod: "POST",
		APIKey: "crm-secret-key", TriggerEvent: domain.TriggerProfileCreated,
		FieldMappings: map[string]string{"mobileNumber": "phone", "attributes.tier": "tier"},
	}
}

// invalid says whether err is the refusal of field.
func invalid(field string) func(error) bool {
	return func(err error) bool { f := fault.Find(err, fault.InvalidArgument); return f != nil && f.Field == field }
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(r *integrations.CreateRequest)
		wantErr func(error) bool
	}{
		{name: "valid", edit: func(*integrations.CreateRequest) {}},
		{name: "valid without a credential", edit: func(r *integrations.CreateRequest) { r.APIKey = "" }},
		{name: "largest batch", edit: func(r *integrations.CreateRequest) { r.BatchSize = ptr(1000) }},
		{name: "no name", edit: func(r *integrations.CreateRequest) { r.DisplayName = "" }, wantErr: invalid("displayName")},
		{name: "not a webhook", edit: func(r *integrations.CreateRequest) { r.Type = "SALESFORCE" },
			wantErr: func(err error) bool { return fault.Find(err, fault.FeatureNotEnabled) != nil }},
		{name: "plain http", edit: func(r *integrations.CreateRequest) { r.EndpointURL = "http://crm.example.com/hook" }, wantErr: invalid("endpointUrl")},
		{name: "loopback", edit: func(r *integrations.CreateRequest) { r.EndpointURL = "https://127.0.0.1/hook" }, wantErr: invalid("endpointUrl")},
		{name: "cloud metadata", edit: func(r *integrations.CreateRequest) { r.EndpointURL = "https://169.254.169.254/" }, wantErr: invalid("endpointUrl")},
		{name: "credentials in the URL", edit: func(r *integrations.CreateRequest) { r.EndpointURL = "https://u:p@crm.example.com/" }, wantErr: invalid("endpointUrl")},
		{name: "relative URL", edit: func(r *integrations.CreateRequest) { r.EndpointURL = "/hook" }, wantErr: invalid("endpointUrl")},
		{name: "GET", edit: func(r *integrations.CreateRequest) { r.HTTPMethod = "GET" }, wantErr: invalid("httpMethod")},
		{name: "lower-case method", edit: func(r *integrations.CreateRequest) { r.HTTPMethod = "post" }, wantErr: invalid("httpMethod")},
		{name: "unknown trigger", edit: func(r *integrations.CreateRequest) { r.TriggerEvent = "PROFILE_DELETED" }, wantErr: invalid("triggerEvent")},
		{name: "no mapping", edit: func(r *integrations.CreateRequest) { r.FieldMappings = nil }, wantErr: invalid("fieldMappings")},
		{name: "unknown field", edit: func(r *integrations.CreateRequest) { r.FieldMappings = map[string]string{"password": "p"} }, wantErr: invalid("fieldMappings")},
		{name: "empty attribute name", edit: func(r *integrations.CreateRequest) { r.FieldMappings = map[string]string{"attributes.": "a"} }, wantErr: invalid("fieldMappings")},
		{name: "empty target", edit: func(r *integrations.CreateRequest) { r.FieldMappings = map[string]string{"email": ""} }, wantErr: invalid("fieldMappings")},
		{name: "target with a newline", edit: func(r *integrations.CreateRequest) { r.FieldMappings = map[string]string{"email": "e\nmail"} }, wantErr: invalid("fieldMappings")},
		{name: "batch of 0", edit: func(r *integrations.CreateRequest) { r.BatchSize = ptr(0) }, wantErr: invalid("batchSize")},
		{name: "batch over 1000", edit: func(r *integrations.CreateRequest) { r.BatchSize = ptr(1001) }, wantErr: invalid("batchSize")},
		{name: "credential with a space", edit: func(r *integrations.CreateRequest) { r.APIKey = "a b" }, wantErr: invalid("apiKey")},
		{name: "credential too long", edit: func(r *integrations.CreateRequest) { r.APIKey = strings.Repeat("k", 4097) }, wantErr: invalid("apiKey")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, st, keyring := newService(t)
			req := valid()
			tt.edit(&req)
			client := uuid.NewString()
			c, err := svc.Create(context.Background(), client, req)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Create: %v, want the rule's refusal", err)
				}
				if len(st.its) != 0 {
					t.Error("a refused integration was stored")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			it := st.its[c.Integration.ID]
			if it.ClientID != client || it.Status != domain.IntegrationActive || (req.BatchSize == nil && it.BatchSize != 100) {
				t.Errorf("stored %+v", it)
			}
			if !strings.HasPrefix(c.SigningSecret, "mnvwhsec_") {
				t.Errorf("signing secret %q", c.SigningSecret)
			}
			// The secret is shown once: stored sealed, and opened only by the worker.
			secret, err := integrations.OpenSecret(keyring, it)
			if err != nil || string(secret) != c.SigningSecret {
				t.Errorf("the stored secret opens to %q, %v", secret, err)
			}
			// The same key as a Standard Webhooks secret: what a receiver's library is given
			// verifies what the worker signs (webhook-signature over id, timestamp and body).
			std, err := outbound.ParseSecret(c.WebhookSecret)
			if err != nil || !bytes.Equal(std, secret) {
				t.Fatalf("webhook secret %q parses to %q, %v; want the signing secret's bytes", c.WebhookSecret, std, err)
			}
			now, body := time.Now(), []byte(`[{"phone":"+971501234567"}]`)
			sig := outbound.SignStandard([][]byte{secret}, "delivery-1", now, body)
			ts := strconv.FormatInt(now.Unix(), 10)
			if err := outbound.VerifyStandard(std, "delivery-1", ts, sig, body, now, 0); err != nil {
				t.Errorf("a delivery signed with the integration's key does not verify with its webhook secret: %v", err)
			}
			if err := outbound.VerifyStandard(std, "delivery-2", ts, sig, body, now, 0); err == nil {
				t.Error("the signature verifies under another delivery id: the id is not signed")
			}
			key, err := integrations.OpenAPIKey(keyring, it)
			if err != nil || key != req.APIKey {
				t.Errorf("the stored credential opens to %q, %v", key, err)
			}
			got, err := svc.Get(context.Background(), client, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, shown := range []string{fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", c.Integration), string(got.APIKeySealed)} {
				if strings.Contains(shown, c.SigningSecret) || strings.Contains(shown, c.WebhookSecret) || req.APIKey != "" && strings.Contains(shown, req.APIKey) {
					t.Errorf("a secret in clear in what is returned: %s", shown)
				}
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name    string
		patch   integrations.Patch
		wantErr func(error) bool
		check   func(t *testing.T, keyring *crypto.Keyring, it domain.Integration)
	}{
		{name: "rename", patch: integrations.Patch{DisplayName: ptr("ERP")},
			check: func(t *testing.T, k *crypto.Keyring, it domain.Integration) {
				if key, _ := integrations.OpenAPIKey(k, it); it.DisplayName != "ERP" || key != "crm-secret-key" {
					t.Errorf("name %q, credential %q", it.DisplayName, key)
				}
			}},
		{name: "new endpoint drops the credential", patch: integrations.Patch{EndpointURL: ptr("https://other.example.com/hook")},
			check: func(t *testing.T, _ *crypto.Keyring, it domain.Integration) {
				if it.APIKeySealed != nil {
					t.Error("the credential given for the old endpoint would be sent to the new one")
				}
			}},
		{name: "new endpoint with its credential", patch: integrations.Patch{EndpointURL: ptr("https://other.example.com/hook"), APIKey: ptr("new-key")},
			check: func(t *testing.T, k *crypto.Keyring, it domain.Integration) {
				if key, err := integrations.OpenAPIKey(k, it); err != nil || key != "new-key" {
					t.Errorf("credential %q, %v", key, err)
				}
			}},
		{name: "pause", patch: integrations.Patch{Status: ptr(domain.IntegrationPaused)},
			check: func(t *testing.T, _ *crypto.Keyring, it domain.Integration) {
				if it.Status != domain.IntegrationPaused {
					t.Errorf("status %s", it.Status)
				}
			}},
		{name: "bad status", patch: integrations.Patch{Status: ptr(domain.IntegrationStatus("DELETED"))}, wantErr: invalid("status")},
		{name: "bad endpoint", patch: integrations.Patch{EndpointURL: ptr("ftp://crm.example.com")}, wantErr: invalid("endpointUrl")},
		{name: "bad method", patch: integrations.Patch{HTTPMethod: ptr("DELETE")}, wantErr: invalid("httpMethod")},
		{name: "bad batch", patch: integrations.Patch{BatchSize: ptr(5000)}, wantErr: invalid("batchSize")},
		{name: "bad mapping", patch: integrations.Patch{FieldMappings: map[string]string{"nope": "x"}}, wantErr: invalid("fieldMappings")},
		{name: "bad credential", patch: integrations.Patch{APIKey: ptr("two words")}, wantErr: invalid("apiKey")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, st, keyring := newService(t)
			ctx := context.Background()
			client := uuid.NewString()
			c, err := svc.Create(ctx, client, valid())
			if err != nil {
				t.Fatal(err)
			}
			before := st.its[c.Integration.ID]
			_, err = svc.Update(ctx, client, c.Integration.ID, tt.patch)
			after := st.its[c.Integration.ID]
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Update: %v, want the rule's refusal", err)
				}
				if fmt.Sprint(after) != fmt.Sprint(before) {
					t.Error("a refused patch was written")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, keyring, after)
		})
	}
}

// TestAnotherClientsIntegration: every call about an integration of another client, or about
// no integration, is not found, and changes nothing.
func TestAnotherClientsIntegration(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := context.Background()
	owner := uuid.NewString()
	c, err := svc.Create(ctx, owner, valid())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{c.Integration.ID, uuid.NewString(), "not-a-uuid"} {
		other := uuid.NewString()
		calls := map[string]func() error{
			"Get": func() error { _, err := svc.Get(ctx, other, id); return err },
			"Update": func() error {
				_, err := svc.Update(ctx, other, id, integrations.Patch{DisplayName: ptr("mine")})
				return err
			},
			"Delete": func() error { return svc.Delete(ctx, other, id) },
			"Sync":   func() error { _, err := svc.Sync(ctx, other, id); return err },
			"History": func() error {
				_, err := svc.History(ctx, other, id, nil, 10, 0)
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, fault.ErrNotFound) {
				t.Errorf("%s of %s by another client: %v, want not found", name, id, err)
			}
		}
	}
	if it, ok := st.its[c.Integration.ID]; !ok || it.DisplayName != "CRM" || len(st.synced) != 0 {
		t.Errorf("another client changed the integration: %+v, synced %v", it, st.synced)
	}
	if n, err := svc.Sync(ctx, owner, c.Integration.ID); err != nil || n != 3 || len(st.synced) != 1 {
		t.Errorf("the owner's Sync = %d, %v", n, err)
	}
}
