package profiles_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func ptr[T any](v T) *T { return &v }

func TestCreate(t *testing.T) {
	client := principal.Principal{ClientID: uuid.NewString(), KeyID: "k1"}
	tests := []struct {
		name    string
		before  []string // numbers the client has profiles of already
		req     profiles.CreateRequest
		wantErr func(error) bool
	}{
		{name: "valid", req: profiles.CreateRequest{MobileNumber: "+971501234567", Fields: profiles.Fields{Email: ptr("a@example.com")}}},
		{name: "bad number", req: profiles.CreateRequest{MobileNumber: "0501234567"},
			wantErr: func(err error) bool {
				f := fault.Find(err, fault.InvalidArgument)
				return f != nil && f.Field == "mobileNumber"
			}},
		{name: "not a number", req: profiles.CreateRequest{MobileNumber: "hello"},
			wantErr: func(err error) bool { return fault.Find(err, fault.InvalidArgument) != nil }},
		{name: "bad email", req: profiles.CreateRequest{MobileNumber: "+971501234567", Fields: profiles.Fields{Email: ptr("not an email")}},
			wantErr: func(err error) bool {
				f := fault.Find(err, fault.InvalidArgument)
				return f != nil && f.Field == "email"
			}},
		{name: "too many attributes", req: profiles.CreateRequest{MobileNumber: "+971501234567", Fields: profiles.Fields{Attributes: manyAttrs(51)}},
			wantErr: func(err error) bool {
				f := fault.Find(err, fault.InvalidArgument)
				return f != nil && f.Field == "attributes"
			}},
		{name: "duplicate", before: []string{"+971501234567"}, req: profiles.CreateRequest{MobileNumber: "+971501234567"},
			wantErr: func(err error) bool { return errors.Is(err, domain.ErrProfileExists) }},
		{name: "another number", before: []string{"+971501234567"}, req: profiles.CreateRequest{MobileNumber: "+971552345678"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			for _, n := range tt.before {
				if _, err := f.svc.Create(ctx, client, profiles.CreateRequest{MobileNumber: n}); err != nil {
					t.Fatal(err)
				}
			}
			f.st.queued = nil
			had := len(f.st.profiles)
			got, err := f.svc.Create(ctx, client, tt.req)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Create: %v, want the rule's error", err)
				}
				if len(f.st.profiles) != had || len(f.st.queued) != 0 {
					t.Error("a refused profile was stored or queued")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ClientID != client.ClientID || got.Source != domain.SourceAPI || got.CountryCode != "AE" {
				t.Errorf("profile %+v", got)
			}
			if strings.Contains(got.NumberMasked, "234") || string(got.NumberSealed) == tt.req.MobileNumber {
				t.Errorf("the number is kept in clear: masked %q", got.NumberMasked)
			}
			if ids := f.st.triggered(domain.TriggerProfileCreated); !slices.Equal(ids, []string{got.ID}) {
				t.Errorf("queued for PROFILE_CREATED: %v, want the new profile", ids)
			}
		})
	}
}

func manyAttrs(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "v"
	}
	return m
}

func TestCreateMatchesAVerifiedNumber(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := principal.Principal{ClientID: uuid.NewString(), KeyID: "k1"}
	p, err := f.svc.Create(ctx, client, profiles.CreateRequest{MobileNumber: "+971501234567"})
	if err != nil {
		t.Fatal(err)
	}
	items := []domain.VerifiedNumber{{ClientID: client.ClientID, NumberHash: p.NumberHash, VerificationID: uuid.NewString(), VerifiedAt: time.Now()}}
	for i, want := range []int64{1, 0} { // a replay of the same fact matches nothing new
		n, err := f.svc.RecordVerified(ctx, items)
		if err != nil || n != want {
			t.Fatalf("RecordVerified #%d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if ids := f.st.triggered(domain.TriggerProfileMatched); !slices.Equal(ids, []string{p.ID}) {
		t.Errorf("queued for PROFILE_MATCHED: %v, want the profile once", ids)
	}
}

func TestGetAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner := principal.Principal{ClientID: uuid.NewString(), KeyID: "k1"}
	p, err := f.svc.Create(ctx, owner, profiles.CreateRequest{MobileNumber: "+971501234567"})
	if err != nil {
		t.Fatal(err)
	}
	other := uuid.NewString()
	for _, tt := range []struct {
		name, client, id string
	}{
		{"another client's profile", other, p.ID},
		{"not a uuid", owner.ClientID, "nope"},
		{"unknown id", owner.ClientID, uuid.NewString()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.svc.Get(ctx, tt.client, tt.id); !errors.Is(err, fault.ErrNotFound) {
				t.Errorf("Get: %v, want not found", err)
			}
			if _, err := f.svc.Delete(ctx, tt.client, tt.id); !errors.Is(err, fault.ErrNotFound) {
				t.Errorf("Delete: %v, want not found", err)
			}
		})
	}
	if _, ok := f.st.profiles[p.ID]; !ok || len(f.st.forgot) != 0 {
		t.Fatal("a refused erasure removed the profile or its answers")
	}
	if _, err := f.svc.Delete(ctx, owner.ClientID, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.st.profiles[p.ID]; ok {
		t.Error("the profile is still there")
	}
	if want := owner.ClientID + "/" + profiles.Subject(p.ID); !slices.Equal(f.st.forgot, []string{want}) {
		t.Errorf("answers forgotten: %v, want %s", f.st.forgot, want)
	}
}
