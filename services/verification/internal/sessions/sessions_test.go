package sessions

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

type fakeStore struct{ sessions []domain.Session }

func (f *fakeStore) InsertSession(_ context.Context, s domain.Session) error {
	f.sessions = append(f.sessions, s)
	return nil
}

const registry = `operators:
  - id: alpha
    name: Alpha
    country: AE
    mccMnc: ["424-02"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["10.0.0.0/8"]
      numberHeader: X-Alpha-Msisdn
  - id: beta
    name: Beta
    country: AE
    mccMnc: ["424-03"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["192.0.2.0/24"]
      numberHeader: X-Beta-Msisdn
  - id: play
    name: Sandbox
    country: ZZ
    mccMnc: ["001-01"]
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.0/8"]
      numberHeader: X-Play-Msisdn
`

func ptr(s string) *string { return &s }

// TestCreate checks which operator and number a session takes from the network, and its
// lifetime.
func TestCreate(t *testing.T) {
	ops, sealer := verificationtest.Operators(t, registry), verificationtest.NewKeys(t).Sealer
	client := identity.Principal{ClientID: uuid.NewString(), Features: []string{domain.FeatureVerify}}
	alphaAddr, betaAddr, elsewhere := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("203.0.113.9")
	headers := map[string]string{"X-Alpha-Msisdn": "+971501234567", "X-Beta-Msisdn": "+971507654321", "X-Play-Msisdn": "+971500000000"}

	tests := []struct {
		name       string
		features   []string
		req        Request
		net        network.Request
		wantReason fault.Reason
		wantOp     string // "" for none
		wantNumber string // "" for none
	}{
		{"the operator of the address, its header believed", nil, Request{Platform: "ANDROID"},
			network.Request{Addr: betaAddr, Headers: headers}, "", "beta", "+971507654321"},
		{"an address no operator has: no identity", nil, Request{Platform: "IOS"},
			network.Request{Addr: elsewhere, Headers: headers}, "", "", ""},
		{"the operator named, from outside its ranges: its header not believed", nil, Request{Platform: "WEB", OperatorID: ptr("alpha")},
			network.Request{Addr: elsewhere, Headers: headers}, "", "alpha", ""},
		{"the operator named, from its ranges", nil, Request{Platform: "WEB", OperatorID: ptr("alpha")},
			network.Request{Addr: alphaAddr, Headers: headers}, "", "alpha", "+971501234567"},
		{"another operator's header is not believed", nil, Request{Platform: "WEB"},
			network.Request{Addr: alphaAddr, Headers: map[string]string{"X-Beta-Msisdn": "+971507654321"}}, "", "alpha", ""},
		{"an invalid number header", nil, Request{Platform: "WEB"},
			network.Request{Addr: alphaAddr, Headers: map[string]string{"X-Alpha-Msisdn": "12"}}, "", "alpha", ""},
		{"an unknown operator named", nil, Request{Platform: "WEB", OperatorID: ptr("zeta")},
			network.Request{Addr: alphaAddr, Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"the sandbox operator without SANDBOX", nil, Request{Platform: "WEB", OperatorID: ptr("play")},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"the sandbox's address without SANDBOX: no identity", nil, Request{Platform: "WEB"},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, "", "", ""},
		{"the sandbox with SANDBOX", []string{"SANDBOX"}, Request{Platform: "WEB"},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, "", "play", "+971500000000"},
		{"an unknown platform", nil, Request{Platform: "SYMBIAN"}, network.Request{Addr: alphaAddr}, fault.InvalidArgument, "", ""},
		{"a device id too long", nil, Request{Platform: "IOS", DeviceID: ptr(strings.Repeat("d", 129))}, network.Request{Addr: alphaAddr}, fault.InvalidArgument, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{}
			now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			s := New(st, network.NewIdentifier(ops, zaptest.NewLogger(t)), sealer, 7*time.Minute)
			s.now = func() time.Time { return now }
			p := client
			p.Features = append(p.Features, tt.features...)
			c, err := s.Create(context.Background(), p, tt.req, tt.net)
			if tt.wantReason != "" {
				if fault.Find(err, tt.wantReason) == nil || len(st.sessions) != 0 {
					t.Fatalf("Create = %v with %d sessions stored, want a %s error and none", err, len(st.sessions), tt.wantReason)
				}
				return
			}
			if err != nil || len(st.sessions) != 1 {
				t.Fatalf("Create = %v with %d sessions stored", err, len(st.sessions))
			}
			sess := st.sessions[0]
			if got := deref(c.OperatorID); got != tt.wantOp || deref(sess.OperatorID) != tt.wantOp {
				t.Errorf("operator %q (stored %q), want %q", got, deref(sess.OperatorID), tt.wantOp)
			}
			wantStatus := domain.Captured
			if tt.wantNumber == "" {
				wantStatus = domain.NoNetworkIdentity
			}
			if c.Status != wantStatus || sess.Status != wantStatus {
				t.Errorf("status %s (stored %s), want %s", c.Status, sess.Status, wantStatus)
			}
			claims, err := sealer.Open(c.Blob)
			if err != nil {
				t.Fatal(err)
			}
			if claims.Number != tt.wantNumber || claims.OperatorID != tt.wantOp || claims.ClientID != client.ClientID || claims.SessionID != sess.ID {
				t.Errorf("sealed %+v, want number %q of operator %q, session %s", claims, tt.wantNumber, tt.wantOp, sess.ID)
			}
			if want := now.Add(7 * time.Minute); !c.ExpiresAt.Equal(want) || !sess.ExpiresAt.Equal(want) || !claims.ExpiresAt.Equal(want) {
				t.Errorf("expires %v (stored %v, sealed %v), want %v: the TTL from the capture", c.ExpiresAt, sess.ExpiresAt, claims.ExpiresAt, want)
			}
			if sess.Source != "SDK" || sess.Platform == nil || *sess.Platform != tt.req.Platform {
				t.Errorf("stored %+v, want an SDK session of platform %s", sess, tt.req.Platform)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
