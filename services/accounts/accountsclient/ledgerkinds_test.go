package accountsclient_test

import (
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/platform/money"
)

func TestLedgerKinds(t *testing.T) {
	kinds := []money.Kind{money.KindTopUp, money.KindVerification, money.KindConnectEnrichment, money.KindStuckPlusReveal, money.KindVerificationStep, money.KindRefund, money.KindAdjustment}
	if err := enumtable.Check(accountsclient.LedgerKinds, kinds, accountsv1.LedgerKind(0).Descriptor()); err != nil {
		t.Error(err)
	}
}
