package apijson_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/apijson"
)

// TestAPIShapes pins what mnvctl and the gateway both rely on; the gateway's jsonpb tests cover
// the rest of the representation.
func TestAPIShapes(t *testing.T) {
	days := int32(3)
	tests := []struct {
		name string
		msg  *accountsv1.Client
		want string
	}{
		{"enums lose their prefix, int64 is a number", &accountsv1.Client{
			Id: "c1", ClientStatus: accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE, Balance: 600,
			BalanceExpiryDate: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)), BalanceValid: true,
			DaysUntilBalanceExpiry: &days,
			EnabledFeatures:        []accountsv1.Feature{accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_STUCK_PLUS},
		}, `{"id":"c1","clientName":"","contactPersonName":"","contactPersonEmail":"","contactPhoneNumber":"",` +
			`"clientStatus":"ACTIVE","balance":600,"balanceExpiryDate":"2026-01-02T03:04:05.006Z","balanceValid":true,` +
			`"daysUntilBalanceExpiry":3,"enabledFeatures":["VERIFY","STUCK_PLUS"]}`},
		{"unspecified and absent are null, empty lists []", &accountsv1.Client{Id: "c2"},
			`{"id":"c2","clientName":"","contactPersonName":"","contactPersonEmail":"","contactPhoneNumber":"",` +
				`"clientStatus":null,"balance":0,"balanceExpiryDate":null,"balanceValid":false,` +
				`"daysUntilBalanceExpiry":null,"enabledFeatures":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(apijson.AppendMessage(nil, tt.msg.ProtoReflect())); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
