package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestListVerificationsFilters: each filter of the verifications list (status, reason,
// operator, method, and their combination) keeps exactly the client's settled rows that match
// it, newest first, with their total; another client's matching row and a PENDING one never.
func TestListVerificationsFilters(t *testing.T) {
	t.Parallel()
	_, stores := newStores(t)
	ctx := context.Background()
	st := stores.Pool()
	client, other := uuid.NewString(), uuid.NewString()

	record := func(owner string, status domain.Status, reason, operator, method string) string {
		t.Helper()
		s := domain.Session{ID: uuid.NewString(), ClientID: owner, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
		if err := st.InsertSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		v := domain.Verification{ID: uuid.NewString(), ClientID: owner, SessionID: s.ID, Status: status, Outcome: status,
			Reason: reason, OperatorID: operator, ServiceType: method, NumberSealed: []byte{1}, NumberHash: []byte{7}}
		if status == domain.StatusPending {
			v.Outcome = domain.StatusVerified
		}
		if rec, err := st.RecordVerifications(ctx, []domain.Verification{v}, domain.NumberLimit{}, nil); err != nil || !rec[0].OK {
			t.Fatalf("record: %v %v", rec, err)
		}
		return v.ID
	}
	// Newest last here; the list answers newest first.
	match := record(client, domain.StatusVerified, domain.ReasonMatch, "alpha", "HEADER_ENRICHMENT")
	mismatch := record(client, domain.StatusNotVerified, domain.ReasonMismatch, "alpha", "HEADER_ENRICHMENT")
	network := record(client, domain.StatusVerified, domain.ReasonMatch, "beta", "NETWORK_API")
	refused := record(client, domain.StatusUndetermined, domain.ReasonOperatorRefused, "beta", "NETWORK_API")
	record(client, domain.StatusPending, domain.ReasonMatch, "alpha", "HEADER_ENRICHMENT")
	record(other, domain.StatusVerified, domain.ReasonMatch, "alpha", "HEADER_ENRICHMENT")

	s := func(v string) *string { return &v }
	verified := domain.StatusVerified
	for _, tt := range []struct {
		name string
		f    domain.VerificationFilter
		want []string
	}{
		{"none", domain.VerificationFilter{}, []string{refused, network, mismatch, match}},
		{"reason", domain.VerificationFilter{Reason: s(domain.ReasonMatch)}, []string{network, match}},
		{"operator", domain.VerificationFilter{OperatorID: s("alpha")}, []string{mismatch, match}},
		{"method", domain.VerificationFilter{Method: s("NETWORK_API")}, []string{refused, network}},
		{"reason and operator", domain.VerificationFilter{Reason: s(domain.ReasonMatch), OperatorID: s("beta")}, []string{network}},
		{"status, reason, operator and method", domain.VerificationFilter{Status: &verified, Reason: s(domain.ReasonMatch), OperatorID: s("alpha"), Method: s("HEADER_ENRICHMENT")}, []string{match}},
		{"an operator with none", domain.VerificationFilter{OperatorID: s("gamma")}, nil},
		{"a reason with none", domain.VerificationFilter{Reason: s(domain.ReasonTokenExpired)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := st.ListVerifications(ctx, client, tt.f, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range p.Items {
				got = append(got, v.ID)
			}
			if !slices.Equal(got, tt.want) || p.Total != int64(len(tt.want)) {
				t.Errorf("%v (total %d), want %v", got, p.Total, tt.want)
			}
		})
	}
}
