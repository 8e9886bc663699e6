package sessions

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

type fakeStore struct{ sessions []domain.Session }

func (f *fakeStore) InsertSession(_ context.Context, s domain.Session) error {
	f.sessions = append(f.sessions, s)
	return nil
}

// registry is the shared registry and a sandbox operator, play.
const registry = verificationtest.Registry + `  - id: play
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
// lifetime. Unless a case says otherwise, the client may use every operator with header
// enrichment.
func TestCreate(t *testing.T) {
	ops, sealer := verificationtest.Operators(t, registry), verificationtest.NewKeys(t).Sealer
	client := principal.Principal{ClientID: uuid.NewString(), Features: []string{domain.FeatureVerify}, Operators: principal.LegacyOperators()}
	alphaAddr, betaAddr, elsewhere := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("203.0.113.9")
	gammaAddr := netip.MustParseAddr("198.51.100.4")
	headers := map[string]string{
		"X-Alpha-Msisdn": "+971501234567", "X-Beta-Msisdn": "+971507654321", "X-Play-Msisdn": "+971500000000", "X-Gamma-Msisdn": "+971509999999",
	}
	own := func(gs ...principal.OperatorGrant) *principal.Operators { return &principal.Operators{Grants: gs} }
	alphaOnly := own(principal.OperatorGrant{Operator: "alpha", Methods: []string{"HEADER_ENRICHMENT"}})
	gammaAPI := own(principal.OperatorGrant{Operator: "gamma", Methods: []string{"NETWORK_API"}})
	gammaHE := own(principal.OperatorGrant{Operator: "gamma", Methods: []string{"HEADER_ENRICHMENT"}})
	defaults := &principal.Operators{Default: true}

	tests := []struct {
		name       string
		features   []string
		enabled    *principal.Operators // nil: every operator with header enrichment
		req        Request
		net        network.Request
		wantReason fault.Reason
		wantOp     string // "" for none
		wantNumber string // "" for none
	}{
		{"the operator of the address, its header believed", nil, nil, Request{Platform: "ANDROID"},
			network.Request{Addr: betaAddr, Headers: headers}, "", "beta", "+971507654321"},
		{"an address no operator has: no identity", nil, nil, Request{Platform: "IOS"},
			network.Request{Addr: elsewhere, Headers: headers}, "", "", ""},
		{"the operator named, from outside its ranges: its header not believed", nil, nil, Request{Platform: "WEB", OperatorID: ptr("alpha")},
			network.Request{Addr: elsewhere, Headers: headers}, "", "alpha", ""},
		{"the operator named, from its ranges", nil, nil, Request{Platform: "WEB", OperatorID: ptr("alpha")},
			network.Request{Addr: alphaAddr, Headers: headers}, "", "alpha", "+971501234567"},
		{"another operator's header is not believed", nil, nil, Request{Platform: "WEB"},
			network.Request{Addr: alphaAddr, Headers: map[string]string{"X-Beta-Msisdn": "+971507654321"}}, "", "alpha", ""},
		{"an invalid number header", nil, nil, Request{Platform: "WEB"},
			network.Request{Addr: alphaAddr, Headers: map[string]string{"X-Alpha-Msisdn": "12"}}, "", "alpha", ""},
		{"an unknown operator named", nil, nil, Request{Platform: "WEB", OperatorID: ptr("zeta")},
			network.Request{Addr: alphaAddr, Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"the sandbox operator without SANDBOX", nil, nil, Request{Platform: "WEB", OperatorID: ptr("play")},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"the sandbox's address without SANDBOX: no identity", nil, nil, Request{Platform: "WEB"},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, "", "", ""},
		{"the sandbox with SANDBOX", []string{"SANDBOX"}, nil, Request{Platform: "WEB"},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, "", "play", "+971500000000"},
		// The client's own enablement.
		{"an operator not enabled, named", nil, alphaOnly, Request{Platform: "WEB", OperatorID: ptr("beta")},
			network.Request{Addr: betaAddr, Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"an operator not enabled, by address: no identity", nil, alphaOnly, Request{Platform: "ANDROID"},
			network.Request{Addr: betaAddr, Headers: headers}, "", "", ""},
		{"the enabled one", nil, alphaOnly, Request{Platform: "ANDROID"},
			network.Request{Addr: alphaAddr, Headers: headers}, "", "alpha", "+971501234567"},
		{"an operator enabled for its network API only: its header not believed", nil, gammaAPI, Request{Platform: "ANDROID"},
			network.Request{Addr: gammaAddr, Headers: headers}, "", "gamma", ""},
		{"the same operator with header enrichment enabled", nil, gammaHE, Request{Platform: "ANDROID"},
			network.Request{Addr: gammaAddr, Headers: headers}, "", "gamma", "+971509999999"},
		{"an own list without the sandbox, with SANDBOX: no sandbox", []string{"SANDBOX"}, alphaOnly, Request{Platform: "WEB", OperatorID: ptr("play")},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"the default set with SANDBOX: the sandbox", []string{"SANDBOX"}, defaults, Request{Platform: "WEB"},
			network.Request{Addr: netip.MustParseAddr("127.0.0.1"), Headers: headers}, "", "play", "+971500000000"},
		{"the default set: no real operator", []string{"SANDBOX"}, defaults, Request{Platform: "WEB", OperatorID: ptr("alpha")},
			network.Request{Addr: alphaAddr, Headers: headers}, fault.FeatureNotEnabled, "", ""},
		{"an unknown platform", nil, nil, Request{Platform: "SYMBIAN"}, network.Request{Addr: alphaAddr}, fault.InvalidArgument, "", ""},
		{"a device id too long", nil, nil, Request{Platform: "IOS", DeviceID: ptr(strings.Repeat("d", 129))}, network.Request{Addr: alphaAddr}, fault.InvalidArgument, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{}
			now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			s := New(st, network.NewIdentifier(ops, zaptest.NewLogger(t)), sealer, 7*time.Minute)
			s.now = func() time.Time { return now }
			p := client
			p.Features = append(slices.Clone(p.Features), tt.features...)
			if tt.enabled != nil {
				p.Operators = *tt.enabled
			}
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

// TestOperators: each client sees the operators it may use, each with only the methods it may
// use there, in the registry's order.
func TestOperators(t *testing.T) {
	s := New(&fakeStore{}, network.NewIdentifier(verificationtest.Operators(t, registry), zaptest.NewLogger(t)), verificationtest.NewKeys(t).Sealer, time.Minute)
	g := func(op string, m ...string) principal.OperatorGrant {
		return principal.OperatorGrant{Operator: op, Methods: m}
	}
	tests := []struct {
		name     string
		features []string
		ops      principal.Operators
		want     []string // id:methods
	}{
		{"every operator with header enrichment, SANDBOX", []string{"SANDBOX"}, principal.LegacyOperators(),
			[]string{"alpha:[HEADER_ENRICHMENT]", "beta:[HEADER_ENRICHMENT]", "gamma:[HEADER_ENRICHMENT]", "play:[HEADER_ENRICHMENT]"}},
		{"every operator with header enrichment", nil, principal.LegacyOperators(),
			[]string{"alpha:[HEADER_ENRICHMENT]", "beta:[HEADER_ENRICHMENT]", "gamma:[HEADER_ENRICHMENT]"}},
		{"one with its network API, another not in the registry", nil, principal.Operators{Grants: []principal.OperatorGrant{
			g("gamma", "NETWORK_API"), g("nowhere", "HEADER_ENRICHMENT"), g("beta", "NETWORK_API"),
		}}, []string{"gamma:[NETWORK_API]"}},
		{"the default set, SANDBOX", []string{"SANDBOX"}, principal.DefaultOperators(), []string{"play:[HEADER_ENRICHMENT]"}},
		{"the default set", nil, principal.DefaultOperators(), nil},
		{"none", []string{"SANDBOX"}, principal.Operators{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, op := range s.Operators(principal.Principal{Features: tt.features, Operators: tt.ops}) {
				got = append(got, fmt.Sprintf("%s:%v", op.ID, op.Methods))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Operators = %v, want %v", got, tt.want)
			}
		})
	}
}
