package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/identity"
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
	for name, ops := range map[string]identity.Operators{
		"default set": identity.DefaultOperators(),
		"none":        {},
		"own list": {Grants: []identity.OperatorGrant{
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
	if !reflect.DeepEqual(got.Operators, identity.LegacyOperators()) {
		t.Errorf("a row from before: %+v, want %+v", got.Operators, identity.LegacyOperators())
	}
}
