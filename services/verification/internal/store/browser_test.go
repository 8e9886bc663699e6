package store_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestTransactionOperators: a flow keeps the client's operators as they were when it started,
// each form of them exactly; a row written before they were kept reads as what every client
// could use then.
func TestTransactionOperators(t *testing.T) {
	pool, stores := newStores(t)
	ctx := context.Background()
	st := stores.Pool()
	clientID := uuid.NewString()
	for name, ops := range map[string]principal.Operators{
		"default set": principal.DefaultOperators(),
		"none":        {},
		"own list": {Grants: []principal.OperatorGrant{
			{Operator: "*", Methods: []string{"HEADER_ENRICHMENT"}}, {Operator: "acme-ae", Methods: []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := st.InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: clientID, ServiceCode: "VERIFY",
				MetadataID: "m", Features: []string{"VERIFY"}, Operators: ops, Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.GetTransaction(ctx, clientID, tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Operators, ops) {
				t.Errorf("read back %+v, want %+v", got.Operators, ops)
			}
		})
	}

	old := uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO verification.transactions (id, client_id, service_code, metadata_id, features, status, expires_at)
		VALUES ($1, $2, 'VERIFY', 'm', '{VERIFY}', 'PENDING', now() + interval '1 minute')`, old, clientID); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetTransaction(ctx, clientID, old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Operators, principal.LegacyOperators()) {
		t.Errorf("a row from before: %+v, want %+v", got.Operators, principal.LegacyOperators())
	}
}

// TestListPages reads the paged lists of a client, two at a time: each page holds its rows,
// newest first, and the total of the client's rows alone (settled ones, for verifications),
// a page past the end too.
func TestListPages(t *testing.T) {
	t.Parallel()
	_, stores := newStores(t)
	ctx := context.Background()
	st := stores.Pool()
	client, other := uuid.NewString(), uuid.NewString()

	verification := func(owner string, status domain.Status) string {
		s := domain.Session{ID: uuid.NewString(), ClientID: owner, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
		if err := st.InsertSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		v := domain.Verification{ID: uuid.NewString(), ClientID: owner, SessionID: s.ID, Status: status, Outcome: domain.StatusUndetermined,
			Reason: "NUMBER_MATCH", OperatorID: "alpha", ServiceType: "HEADER_ENRICHMENT", NumberSealed: []byte{1}, NumberHash: []byte{7}}
		if rec, err := st.RecordVerifications(ctx, []domain.Verification{v}, domain.NumberLimit{}, nil); err != nil || !rec[0].OK {
			t.Fatalf("record: %v %v", rec, err)
		}
		return v.ID
	}
	session := func(owner string) string {
		tr, err := st.InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: owner, ServiceCode: "VERIFY", MetadataID: "m",
			Features: []string{"VERIFY"}, Operators: principal.DefaultOperators(), Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		s := domain.StuckPlusSession{ID: uuid.NewString(), ClientID: owner, TransactionID: tr.ID, MetadataID: "m", OperatorID: "alpha",
			NumberSealed: []byte{1}, NumberMasked: "+9715*****67"}
		if err := st.InsertStuckPlusSession(ctx, s, []byte{7}); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	reveal := func(owner, sessionID string) string {
		r, err := st.RecordReveal(ctx, domain.Reveal{ID: uuid.NewString(), ClientID: owner, SessionID: sessionID, KeyID: uuid.NewString(),
			Reason: "support ticket 1234", Charged: 1, Status: domain.RevealSettled})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}

	// Each written after the one before, so newest first is the reverse of writing.
	var verifications, sessions, reveals []string
	for range 3 {
		verifications = slices.Insert(verifications, 0, verification(client, domain.StatusUndetermined))
		sessions = slices.Insert(sessions, 0, session(client))
		reveals = slices.Insert(reveals, 0, reveal(client, sessions[0]))
	}
	verification(client, domain.StatusPending)
	verification(other, domain.StatusUndetermined)
	reveal(other, session(other))

	t.Run("verifications", func(t *testing.T) {
		checkPages(t, verifications, func(limit, offset int64) (domain.Page[domain.Verification], error) {
			return st.ListVerifications(ctx, client, domain.VerificationFilter{}, limit, offset)
		}, func(v domain.Verification) string { return v.ID })
	})
	t.Run("stuck-plus sessions", func(t *testing.T) {
		checkPages(t, sessions, func(limit, offset int64) (domain.Page[domain.StuckPlusSession], error) {
			return st.ListStuckPlusSessions(ctx, client, limit, offset)
		}, func(s domain.StuckPlusSession) string { return s.ID })
	})
	t.Run("reveals", func(t *testing.T) {
		checkPages(t, reveals, func(limit, offset int64) (domain.Page[domain.Reveal], error) {
			return st.ListReveals(ctx, client, limit, offset)
		}, func(r domain.Reveal) string { return r.ID })
	})
}

// checkPages reads list two at a time, to a page past the end: each page must hold its part
// of want, and len(want) as its total.
func checkPages[T any](t *testing.T, want []string, list func(limit, offset int64) (domain.Page[T], error), id func(T) string) {
	t.Helper()
	n := int64(len(want))
	for offset := int64(0); offset <= n+1; offset += 2 {
		p, err := list(2, offset)
		if err != nil {
			t.Fatalf("offset %d: %v", offset, err)
		}
		var got []string
		for _, item := range p.Items {
			got = append(got, id(item))
		}
		if page := want[min(offset, n):min(offset+2, n)]; !slices.Equal(got, page) || p.Total != n {
			t.Errorf("offset %d: %v, total %d; want %v, total %d", offset, got, p.Total, page, n)
		}
	}
}
