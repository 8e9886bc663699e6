package operatorapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// unit is what a second of the CIBA interval is waited for here.
const unit = 10 * time.Millisecond

// swapSetup starts a fake operator and returns it with the swap settings of its clients: "basic"
// (CIBA, client_secret_basic), "ec" (CIBA, private_key_jwt), "cc" (client credentials) and
// "wrong" (a wrong secret).
func swapSetup(t *testing.T) (*sandboxcamara.Fake, map[string]operators.Operator) {
	t.Helper()
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := "swap-" + operatorapi.NewState() // made at run time: no literal looks like a credential
	f, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{
		{ID: "basic", Secret: secret},
		{ID: "ec", PublicKey: &ecKey.PublicKey},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	op := func(id string, s operators.Swap) operators.Operator {
		s.DiscoveryURL, s.APIRoot, s.Purpose = f.DiscoveryURL(), f.URL, operators.DefaultSwapPurpose
		s.SIMSwapVersion, s.DeviceSwapVersion = "v2", "v1"
		if s.Grant == "" {
			s.Grant = operators.GrantCIBA
		}
		return operators.Operator{ID: id, Country: "GB", Methods: []operators.Method{operators.MethodHeaderEnrichment}, Swap: &s}
	}
	return f, map[string]operators.Operator{
		"basic": op("op-basic", operators.Swap{Registration: operators.Registration{ClientID: "basic", ClientAuth: operators.ClientSecretBasic, ClientSecret: secret}}),
		"ec":    op("op-ec", operators.Swap{Registration: operators.Registration{ClientID: "ec", ClientAuth: operators.PrivateKeyJWT, PrivateKeyPEM: pemOf(t, ecKey)}}),
		"cc":    op("op-cc", operators.Swap{Registration: operators.Registration{ClientID: "basic", ClientAuth: operators.ClientSecretBasic, ClientSecret: secret}, Grant: operators.GrantClientCredentials}),
		"wrong": op("op-wrong", operators.Swap{Registration: operators.Registration{ClientID: "basic", ClientAuth: operators.ClientSecretBasic, ClientSecret: "not-" + secret}}),
	}
}

func newSwap(t *testing.T, op operators.Operator) *operatorapi.SwapClient {
	t.Helper()
	c, err := operatorapi.NewSwap(op, &http.Client{Timeout: 2 * time.Second}, operatorapi.SwapOptions{PollUnit: unit, MaxWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const line = "+447700900123"

func TestSwapCheckAndRetrieveDate(t *testing.T) {
	fake, ops := swapSetup(t)
	ctx := context.Background()
	simAt := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	devAt := time.Now().Add(-50 * time.Hour).Truncate(time.Millisecond)
	fake.SetLine(line, sandboxcamara.Line{SIMChange: simAt, DeviceChange: devAt})
	fake.SetLine("+447700900456", sandboxcamara.Line{MonitoredDays: 120}) // no change known
	for _, name := range []string{"basic", "ec", "cc"} {
		t.Run(name, func(t *testing.T) {
			c := newSwap(t, ops[name])
			for _, tt := range []struct {
				kind   operatorapi.SwapKind
				number string
				maxAge time.Duration
				want   operatorapi.Outcome
			}{
				{operatorapi.SIMSwap, line, 24 * time.Hour, operatorapi.Swapped},
				{operatorapi.SIMSwap, line, time.Hour, operatorapi.NotSwapped},
				{operatorapi.SIMSwap, line, 90 * time.Minute, operatorapi.NotSwapped}, // asked as 2 h: the swap is 2 h old
				{operatorapi.SIMSwap, "+447700900456", 2400 * time.Hour, operatorapi.NotSwapped},
				{operatorapi.DeviceSwap, line, 24 * time.Hour, operatorapi.NotSwapped},
				{operatorapi.DeviceSwap, line, 72 * time.Hour, operatorapi.Swapped},
			} {
				a := c.Check(ctx, tt.kind, tt.number, tt.maxAge, "corr-1")
				if a.Outcome != tt.want || a.Reason != "" || a.OperatorID != ops[name].ID {
					t.Errorf("%s check(%v) = %+v, want %v", tt.kind, tt.maxAge, a, tt.want)
				}
			}
			d := c.RetrieveDate(ctx, operatorapi.SIMSwap, line, "")
			if !d.Known || !d.At.Equal(simAt) || d.Outcome != operatorapi.Swapped {
				t.Errorf("sim retrieve-date = %+v, want %v", d, simAt)
			}
			d = c.RetrieveDate(ctx, operatorapi.DeviceSwap, line, "")
			if !d.Known || !d.At.Equal(devAt) {
				t.Errorf("device retrieve-date = %+v, want %v", d, devAt)
			}
			d = c.RetrieveDate(ctx, operatorapi.SIMSwap, "+447700900456", "")
			if !d.Known || !d.At.IsZero() || d.MonitoredDays != 120 || d.Outcome != operatorapi.NotSwapped {
				t.Errorf("null retrieve-date = %+v", d)
			}
			// Above the API's range: refused here, not asked for a shorter period.
			if a := c.Check(ctx, operatorapi.SIMSwap, line, 2401*time.Hour, ""); a.Outcome != operatorapi.SwapUnknown || a.Code != "OUT_OF_RANGE" {
				t.Errorf("maxAge 2401 h = %+v", a)
			}
		})
	}
}

func TestSwapClientCredentialsTokenIsReused(t *testing.T) {
	fake, ops := swapSetup(t)
	c := newSwap(t, ops["cc"])
	for range 3 {
		if a := c.Check(context.Background(), operatorapi.SIMSwap, line, time.Hour, ""); a.Outcome != operatorapi.NotSwapped {
			t.Fatalf("check = %+v", a)
		}
	}
	if n := len(fake.CIBAPolls()); n != 0 {
		t.Errorf("the two-legged client ran the backchannel flow %d times", n)
	}
	if n := fake.SwapCalls(); n != 3 {
		t.Errorf("swap calls = %d, want 3", n)
	}
}

func TestSwapCIBAPolling(t *testing.T) {
	ctx := context.Background()
	t.Run("pending", func(t *testing.T) {
		fake, ops := swapSetup(t)
		fake.SetCIBA(sandboxcamara.CIBA{Interval: 1, PendingPolls: 3})
		a := newSwap(t, ops["basic"]).Check(ctx, operatorapi.SIMSwap, line, time.Hour, "")
		if a.Outcome != operatorapi.NotSwapped {
			t.Fatalf("check = %+v", a)
		}
		polls := fake.CIBAPolls()
		if len(polls) != 4 {
			t.Fatalf("%d polls, want 3 pending and the one that got the tokens", len(polls))
		}
		for i := 1; i < len(polls); i++ {
			if gap := polls[i].Sub(polls[i-1]); gap < unit {
				t.Errorf("poll %d came %v after the one before, under the 1-unit interval", i, gap)
			}
		}
	})
	t.Run("slow_down", func(t *testing.T) {
		fake, ops := swapSetup(t)
		fake.SetCIBA(sandboxcamara.CIBA{Interval: 1, SlowDownPolls: 1, PendingPolls: 1})
		a := newSwap(t, ops["ec"]).Check(ctx, operatorapi.SIMSwap, line, time.Hour, "")
		if a.Outcome != operatorapi.NotSwapped {
			t.Fatalf("check = %+v", a)
		}
		polls := fake.CIBAPolls()
		if len(polls) != 3 {
			t.Fatalf("%d polls, want 3", len(polls))
		}
		// slow_down adds 5 s to the interval, for every poll after it.
		for i := 1; i < 3; i++ {
			if gap := polls[i].Sub(polls[i-1]); gap < 6*unit {
				t.Errorf("poll %d came %v after the one before; slow_down asks for 6 units", i, gap)
			}
		}
	})
	t.Run("denied", func(t *testing.T) {
		fake, ops := swapSetup(t)
		fake.SetCIBA(sandboxcamara.CIBA{Interval: 1, PendingPolls: 1, Deny: true})
		a := newSwap(t, ops["basic"]).Check(ctx, operatorapi.SIMSwap, line, time.Hour, "")
		if a.Outcome != operatorapi.SwapUnknown || a.Reason != operatorapi.ReasonConsent || a.Code != "access_denied" {
			t.Fatalf("check = %+v", a)
		}
	})
	t.Run("never finishes", func(t *testing.T) {
		fake, ops := swapSetup(t)
		fake.SetCIBA(sandboxcamara.CIBA{Interval: 1, PendingPolls: 1 << 20})
		c, _ := operatorapi.NewSwap(ops["basic"], &http.Client{Timeout: time.Second}, operatorapi.SwapOptions{PollUnit: unit, MaxWait: 200 * time.Millisecond})
		a := c.Check(ctx, operatorapi.SIMSwap, line, time.Hour, "")
		if a.Outcome != operatorapi.SwapUnknown || a.Reason != operatorapi.ReasonUnavailable {
			t.Fatalf("check = %+v", a)
		}
	})
}

func TestSwapUnknowns(t *testing.T) {
	fake, ops := swapSetup(t)
	ctx := context.Background()
	fake.SetLine("+447700900500", sandboxcamara.Line{Status5xx: http.StatusServiceUnavailable})
	fake.SetLine("+447700900404", sandboxcamara.Line{NotServed: true})
	for _, tt := range []struct {
		name, op, number string
		reason, code     string
	}{
		{"bad client credentials", "wrong", line, operatorapi.ReasonClientRefused, "invalid_client"},
		{"operator 5xx", "basic", "+447700900500", operatorapi.ReasonUnavailable, "UNAVAILABLE"},
		{"operator 5xx, two-legged", "cc", "+447700900500", operatorapi.ReasonUnavailable, "UNAVAILABLE"},
		{"number not served (CIBA)", "basic", "+447700900404", operatorapi.ReasonNotServed, "unknown_user_id"},
		{"number not served (API)", "cc", "+447700900404", operatorapi.ReasonNotServed, "IDENTIFIER_NOT_FOUND"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newSwap(t, ops[tt.op]).Check(ctx, operatorapi.SIMSwap, tt.number, time.Hour, "")
			if a.Outcome != operatorapi.SwapUnknown || a.Reason != tt.reason || a.Code != tt.code || a.Err == nil {
				t.Fatalf("check = %+v, want unknown %s %s", a, tt.reason, tt.code)
			}
		})
	}
	t.Run("operator down", func(t *testing.T) {
		op := ops["basic"]
		s := *op.Swap
		s.DiscoveryURL = "http://127.0.0.1:1/.well-known/openid-configuration"
		op.Swap = &s
		a := newSwap(t, op).Check(ctx, operatorapi.SIMSwap, line, time.Hour, "")
		if a.Outcome != operatorapi.SwapUnknown || a.Reason != operatorapi.ReasonUnavailable {
			t.Fatalf("check = %+v", a)
		}
	})
}

// Swaps asks the operators of the number's country in turn: one that does not serve the
// number passes to the next.
func TestSwapsFindTheServingOperator(t *testing.T) {
	fake, ops := swapSetup(t)
	ctx := context.Background()
	fake.SetLine(line, sandboxcamara.Line{SIMChange: time.Now().Add(-time.Hour)})
	// A second fake serves no number at all.
	other, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "basic", Secret: ops["basic"].Swap.ClientSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	other.SetLine("", sandboxcamara.Line{NotServed: true})
	first := ops["cc"]
	s := *first.Swap
	s.DiscoveryURL, s.APIRoot = other.DiscoveryURL(), other.URL
	first.Swap, first.ID = &s, "op-first"
	fr := ops["basic"]
	fr.Country, fr.ID = "FR", "op-fr"
	sw, err := operatorapi.NewSwaps([]operators.Operator{fr, first, ops["basic"]}, &http.Client{Timeout: 2 * time.Second}, operatorapi.SwapOptions{PollUnit: unit})
	if err != nil {
		t.Fatal(err)
	}
	a := sw.Check(ctx, operatorapi.SIMSwap, line, "GB", 2*time.Hour, "")
	if a.Outcome != operatorapi.Swapped || a.OperatorID != "op-basic" {
		t.Fatalf("check = %+v, want swapped from op-basic", a)
	}
	if other.SwapCalls() != 1 {
		t.Errorf("the first operator was asked %d times", other.SwapCalls())
	}
	if a := sw.Check(ctx, operatorapi.SIMSwap, "+33612345678", "DE", time.Hour, ""); a.Reason != operatorapi.ReasonNotOffered {
		t.Errorf("a region without operators = %+v", a)
	}
}

// SIMSwapGate is the check as the workflow asks it: a number and maxAge.
func TestSIMSwapGate(t *testing.T) {
	fake, ops := swapSetup(t)
	fake.SetLine(line, sandboxcamara.Line{SIMChange: time.Now().Add(-3 * time.Hour)})
	fake.SetLine("+447400123456", sandboxcamara.Line{Status5xx: http.StatusBadGateway})
	sw, err := operatorapi.NewSwaps([]operators.Operator{ops["basic"]}, &http.Client{Timeout: 2 * time.Second}, operatorapi.SwapOptions{PollUnit: unit})
	if err != nil {
		t.Fatal(err)
	}
	g := operatorapi.SIMSwapGate{Swaps: sw}
	ctx := context.Background()
	// +447700900123 is a drama number the plans call invalid: the gate refuses to ask.
	if _, _, err := g.Check(ctx, line, time.Hour); !errors.Is(err, operatorapi.ErrSwapUnknown) {
		t.Fatalf("an invalid number: %v", err)
	}
	fake.SetLine("+447400123457", sandboxcamara.Line{SIMChange: time.Now().Add(-3 * time.Hour)})
	for _, tt := range []struct {
		number  string
		maxAge  time.Duration
		swapped bool
		err     error
	}{
		{"+447400123457", 4 * time.Hour, true, nil},
		{"+447400123457", 2 * time.Hour, false, nil},
		{"+447400123456", time.Hour, false, operatorapi.ErrUnavailable},
		{"+33612345678", time.Hour, false, operatorapi.ErrSwapUnknown}, // no French operator
	} {
		swapped, at, err := g.Check(ctx, tt.number, tt.maxAge)
		if swapped != tt.swapped || (tt.err == nil) != (err == nil) || (tt.err != nil && !errors.Is(err, tt.err)) {
			t.Errorf("%s within %v = %v, %v; want %v, %v", tt.number, tt.maxAge, swapped, err, tt.swapped, tt.err)
		}
		if err == nil && time.Since(at) > time.Minute {
			t.Errorf("checked at %v", at)
		}
		if err != nil && strings.Contains(err.Error(), tt.number) {
			t.Errorf("the error quotes the number: %v", err)
		}
	}
	// The workflow tells "no operator offers it" from "the operator did not answer".
	for number, want := range map[string]bool{"+33612345678": true, "+447400123456": false} {
		_, _, err := g.Check(ctx, number, time.Hour)
		var ge *operatorapi.GateError
		if !errors.As(err, &ge) || ge.NotOffered() != want {
			t.Errorf("%s: %v, not offered %v", number, err, want)
		}
	}
	// The device swap gate asks the other API: the line's device never changed.
	dev := operatorapi.SIMSwapGate{Swaps: sw, Kind: operatorapi.DeviceSwap}
	if swapped, _, err := dev.Check(ctx, "+447400123457", 4*time.Hour); swapped || err != nil {
		t.Errorf("device swap = %v, %v", swapped, err)
	}
	fake.SetLine("+447400123457", sandboxcamara.Line{DeviceChange: time.Now().Add(-time.Hour)})
	if swapped, _, err := dev.Check(ctx, "+447400123457", 4*time.Hour); !swapped || err != nil {
		t.Errorf("device swap after a change = %v, %v", swapped, err)
	}
}
