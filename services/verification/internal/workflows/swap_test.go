package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// The device-swap gate (docs/api-decisions.md#workflows): the SIM-swap gate's modes asked of the
// operator's Device Swap API, and the two checks together.

// notOfferedErr is a check no operator offers, as operatorapi.GateError says it.
type notOfferedErr struct{}

func (notOfferedErr) Error() string    { return "no operator offers device-swap for the region" }
func (notOfferedErr) NotOffered() bool { return true }

// The situations a device-swap check meets.
var (
	devSwapped    = func() *swapper { return &swapper{swapped: true} }
	devNotSwapped = func() *swapper { return &swapper{} }
	devDown       = func() *swapper { return &swapper{err: errors.New("device-swap check: status 503")} }
	devNotOffered = func() *swapper { return &swapper{err: notOfferedErr{}} }
)

// TestDeviceSwapModes: each mode against each answer. BLOCK fails on a recent change
// (DEVICE_SWAPPED) and fails closed on no answer, whether the operator is down (UNAVAILABLE) or
// offers no Device Swap (NOT_OFFERED): DEVICE_SWAP_UNKNOWN, nothing queued. FALLBACK skips the
// silent step in those cases, REPORT only says. OFF never asks. The SIM check, off, says
// NOT_CHECKED throughout.
func TestDeviceSwapModes(t *testing.T) {
	type want struct {
		status workflows.Status
		reason string
		steps  string
	}
	failed := func(reason string) want { return want{workflows.Failed, reason, ""} }
	silent := want{workflows.InProgress, "", "SILENT:PENDING"}
	sms := want{workflows.InProgress, "", "SMS_OTP:QUEUED"}
	cases := []struct {
		mode   string
		answer string
		port   func() *swapper
		want   want
		result workflows.SwapResult
	}{
		{"BLOCK", "swapped", devSwapped, failed(workflows.ReasonDeviceSwapped), workflows.SwapSwapped},
		{"BLOCK", "not swapped", devNotSwapped, silent, workflows.SwapNotSwapped},
		{"BLOCK", "operator down", devDown, failed(workflows.ReasonDeviceSwapUnknown), workflows.SwapUnavailable},
		{"BLOCK", "not offered", devNotOffered, failed(workflows.ReasonDeviceSwapUnknown), workflows.SwapNotOffered},
		{"BLOCK", "not configured", nil, failed(workflows.ReasonDeviceSwapUnknown), workflows.SwapNotOffered},
		{"FALLBACK", "swapped", devSwapped, sms, workflows.SwapSwapped},
		{"FALLBACK", "not swapped", devNotSwapped, silent, workflows.SwapNotSwapped},
		{"FALLBACK", "operator down", devDown, sms, workflows.SwapUnavailable},
		{"FALLBACK", "not offered", devNotOffered, sms, workflows.SwapNotOffered},
		{"REPORT", "swapped", devSwapped, silent, workflows.SwapSwapped},
		{"REPORT", "not swapped", devNotSwapped, silent, workflows.SwapNotSwapped},
		{"REPORT", "operator down", devDown, silent, workflows.SwapUnavailable},
		{"REPORT", "not offered", devNotOffered, silent, workflows.SwapNotOffered},
		{"OFF", "swapped", devSwapped, silent, workflows.SwapNotChecked},
	}
	for _, tc := range cases {
		t.Run(tc.mode+", "+tc.answer, func(t *testing.T) {
			var port *swapper
			ports := workflows.Ports{}
			if tc.port != nil {
				port = tc.port()
				ports.DeviceSwap = port
			}
			e := newEnv(t, 100, ports)
			e.setPolicy(t, `{"deviceSwap":{"mode":"`+tc.mode+`","maxAgeHours":48}}`)
			w := e.start(t)
			if got := (want{w.Status, w.Reason, steps(w)}); got != tc.want || w.DeviceSwap != tc.result || w.SIMSwap != workflows.SwapNotChecked {
				t.Fatalf("got %+v, device %s, SIM %s; want %+v, %s", got, w.DeviceSwap, w.SIMSwap, tc.want, tc.result)
			}
			answered := tc.result == workflows.SwapSwapped || tc.result == workflows.SwapNotSwapped
			if answered == w.DeviceCheckedAt.IsZero() || !w.SIMCheckedAt.IsZero() {
				t.Fatalf("deviceCheckedAt %v, simCheckedAt %v with %s", w.DeviceCheckedAt, w.SIMCheckedAt, w.DeviceSwap)
			}
			if port != nil && (port.asked == 1) != (tc.mode != "OFF") {
				t.Fatalf("the port was asked %d times under %s", port.asked, tc.mode)
			}
			stored := e.get(t, w.ID)
			if stored.Status != w.Status || stored.Reason != w.Reason || stored.DeviceSwap != w.DeviceSwap || !stored.DeviceCheckedAt.Equal(w.DeviceCheckedAt) {
				t.Fatalf("stored %s %s %s %v", stored.Status, stored.Reason, stored.DeviceSwap, stored.DeviceCheckedAt)
			}
			if tc.want.status == workflows.Failed && (len(pendingJobs(t, e)) != 0 || e.ledger.calls != 0) {
				t.Fatal("a failed start queued or charged an SMS")
			}
			checkSwapEvents(t, e, w)
		})
	}
}

// checkSwapEvents: every event of the workflow carries its checks' results and times.
func checkSwapEvents(t *testing.T, e *env, w workflows.Workflow) {
	t.Helper()
	n := 0
	for _, raw := range e.events(t) {
		var a struct {
			Events []struct{ Type, Data string }
		}
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Fatal(err)
		}
		for _, ev := range a.Events {
			var d struct {
				WorkflowID      string
				SIMSwap         string
				DeviceSwap      *string
				DeviceCheckedAt *time.Time
			}
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatal(err)
			}
			if d.WorkflowID != w.ID {
				continue
			}
			n++
			if d.DeviceSwap == nil || *d.DeviceSwap != string(w.DeviceSwap) || d.SIMSwap != string(w.SIMSwap) ||
				(d.DeviceCheckedAt == nil) != w.DeviceCheckedAt.IsZero() {
				t.Fatalf("%s: %s, want device %s (at %v), SIM %s", ev.Type, ev.Data, w.DeviceSwap, w.DeviceCheckedAt, w.SIMSwap)
			}
		}
	}
	if n == 0 {
		t.Fatal("no event of the workflow")
	}
}

// meeting is a swap port that answers only once its partner was asked too: two checks made one
// after the other never meet (the first gives up after a second, unanswered), so a start whose
// checks both answered ran them at once.
type meeting struct {
	swapped       bool
	here, partner chan struct{}
}

func (m *meeting) Check(ctx context.Context, _ string, _ time.Duration) (bool, time.Time, error) {
	close(m.here)
	select {
	case <-m.partner:
		return m.swapped, time.Now(), nil
	case <-time.After(time.Second):
		return false, time.Time{}, errors.New("the other check was not asked meanwhile")
	case <-ctx.Done():
		return false, time.Time{}, ctx.Err()
	}
}

// TestBothSwapChecks: with both checks on, both are asked at once (a start waits for the slower,
// not the sum), and each mode decides: a blocking SIM check's reason goes first, a device BLOCK
// fails a start the SIM check let through, a FALLBACK of either skips the silent step.
func TestBothSwapChecks(t *testing.T) {
	cases := []struct {
		name             string
		policy           string
		simSwapped       bool
		deviceSwapped    bool
		wantStatus       workflows.Status
		wantReason       string
		wantSteps        string
		wantSIM, wantDev workflows.SwapResult
	}{
		{"both clean", `{"simSwap":{"mode":"BLOCK"},"deviceSwap":{"mode":"BLOCK"}}`, false, false,
			workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotSwapped, workflows.SwapNotSwapped},
		{"both swapped, both blocking: the SIM's reason", `{"simSwap":{"mode":"BLOCK"},"deviceSwap":{"mode":"BLOCK"}}`, true, true,
			workflows.Failed, workflows.ReasonSIMSwapped, "", workflows.SwapSwapped, workflows.SwapSwapped},
		{"device swapped under BLOCK, SIM reported", `{"simSwap":{"mode":"REPORT"},"deviceSwap":{"mode":"BLOCK"}}`, true, true,
			workflows.Failed, workflows.ReasonDeviceSwapped, "", workflows.SwapSwapped, workflows.SwapSwapped},
		{"device swapped under FALLBACK, SIM clean", `{"simSwap":{"mode":"BLOCK"},"deviceSwap":{"mode":"FALLBACK"}}`, false, true,
			workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapNotSwapped, workflows.SwapSwapped},
		{"SIM swapped under FALLBACK, device clean", `{"simSwap":{"mode":"FALLBACK"},"deviceSwap":{"mode":"BLOCK"}}`, true, false,
			workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapSwapped, workflows.SwapNotSwapped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simAsked, devAsked := make(chan struct{}), make(chan struct{})
			e := newEnv(t, 100, workflows.Ports{
				SIMSwap:    &meeting{swapped: tc.simSwapped, here: simAsked, partner: devAsked},
				DeviceSwap: &meeting{swapped: tc.deviceSwapped, here: devAsked, partner: simAsked},
			})
			e.setPolicy(t, tc.policy)
			w := e.start(t)
			if w.Status != tc.wantStatus || w.Reason != tc.wantReason || steps(w) != tc.wantSteps || w.SIMSwap != tc.wantSIM || w.DeviceSwap != tc.wantDev {
				t.Fatalf("got %s %q [%s] SIM %s device %s", w.Status, w.Reason, steps(w), w.SIMSwap, w.DeviceSwap)
			}
			if w.SIMCheckedAt.IsZero() || w.DeviceCheckedAt.IsZero() {
				t.Fatalf("checked at %v, %v", w.SIMCheckedAt, w.DeviceCheckedAt)
			}
			checkSwapEvents(t, e, w)
		})
	}
}

// TestDeviceSwapWithTheFakeOperator: the device-swap gate through the operator API client and
// the fake operator, beside the SIM-swap one on the same client, as the app wires them. An
// operator with SIM Swap and no Device Swap answers the SIM check and is never asked the device
// one (NOT_OFFERED); BLOCK then fails closed.
func TestDeviceSwapWithTheFakeOperator(t *testing.T) {
	hourAgo, longAgo := time.Now().Add(-time.Hour), time.Now().Add(-2000*time.Hour)
	tests := []struct {
		name        string
		policy      string
		line        sandboxcamara.Line
		noDevice    bool // the operator offers SIM Swap only
		down        bool // the operator is not listening
		wantStatus  workflows.Status
		wantReason  string
		wantSteps   string
		wantSIM     workflows.SwapResult
		wantDevice  workflows.SwapResult
		wantSIMTime bool
	}{
		{"block, device changed an hour ago", `{"deviceSwap":{"mode":"BLOCK","maxAgeHours":24}}`, sandboxcamara.Line{DeviceChange: hourAgo}, false, false,
			workflows.Failed, workflows.ReasonDeviceSwapped, "", workflows.SwapNotChecked, workflows.SwapSwapped, false},
		{"block, no recent change", `{"deviceSwap":{"mode":"BLOCK","maxAgeHours":24}}`, sandboxcamara.Line{DeviceChange: longAgo}, false, false,
			workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotChecked, workflows.SwapNotSwapped, false},
		{"block, the operator erring", `{"deviceSwap":{"mode":"BLOCK"}}`, sandboxcamara.Line{Status5xx: http.StatusServiceUnavailable}, false, false,
			workflows.Failed, workflows.ReasonDeviceSwapUnknown, "", workflows.SwapNotChecked, workflows.SwapUnavailable, false},
		{"block, the operator unreachable", `{"deviceSwap":{"mode":"BLOCK"}}`, sandboxcamara.Line{}, false, true,
			workflows.Failed, workflows.ReasonDeviceSwapUnknown, "", workflows.SwapNotChecked, workflows.SwapUnavailable, false},
		{"block, not offered", `{"deviceSwap":{"mode":"BLOCK"}}`, sandboxcamara.Line{DeviceChange: hourAgo}, true, false,
			workflows.Failed, workflows.ReasonDeviceSwapUnknown, "", workflows.SwapNotChecked, workflows.SwapNotOffered, false},
		{"fallback, not offered", `{"deviceSwap":{"mode":"FALLBACK"}}`, sandboxcamara.Line{}, true, false,
			workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapNotChecked, workflows.SwapNotOffered, false},
		{"fallback, device changed", `{"deviceSwap":{"mode":"FALLBACK","maxAgeHours":24}}`, sandboxcamara.Line{DeviceChange: hourAgo}, false, false,
			workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapNotChecked, workflows.SwapSwapped, false},
		{"report, not offered", `{"deviceSwap":{"mode":"REPORT"}}`, sandboxcamara.Line{}, true, false,
			workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotChecked, workflows.SwapNotOffered, false},
		{"both on, SIM clean, device changed", `{"simSwap":{"mode":"BLOCK"},"deviceSwap":{"mode":"BLOCK"}}`, sandboxcamara.Line{SIMChange: longAgo, DeviceChange: hourAgo}, false, false,
			workflows.Failed, workflows.ReasonDeviceSwapped, "", workflows.SwapNotSwapped, workflows.SwapSwapped, true},
		{"both on, device not offered, reported", `{"simSwap":{"mode":"BLOCK"},"deviceSwap":{"mode":"REPORT"}}`, sandboxcamara.Line{}, true, false,
			workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotSwapped, workflows.SwapNotOffered, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := "swap-" + uuid.NewString() // made at run time: no literal looks like a credential
			fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv", Secret: secret}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fake.Close() })
			fake.SetLine(gbNumber, tt.line)
			swap := &operators.Swap{
				DiscoveryURL: fake.DiscoveryURL(), APIRoot: fake.URL, Purpose: operators.DefaultSwapPurpose, SIMSwapVersion: "v2", DeviceSwapVersion: "v1",
				Registration: operators.Registration{ClientID: "mnv", ClientAuth: operators.ClientSecretBasic, ClientSecret: secret}, Grant: operators.GrantClientCredentials,
			}
			if tt.noDevice {
				swap.DeviceSwapVersion = ""
			}
			op := operators.Operator{ID: "op-gb", Country: "GB", Methods: []operators.Method{operators.MethodHeaderEnrichment}, Swap: swap}
			sw, err := operatorapi.NewSwaps([]operators.Operator{op}, &http.Client{Timeout: 2 * time.Second}, operatorapi.SwapOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.down {
				fake.Close()
			}
			e := newEnv(t, 100, workflows.Ports{
				SIMSwap: operatorapi.SIMSwapGate{Swaps: sw}, DeviceSwap: operatorapi.SIMSwapGate{Swaps: sw, Kind: operatorapi.DeviceSwap},
			})
			e.setPolicy(t, tt.policy)
			w := e.start(t)
			if w.Status != tt.wantStatus || w.Reason != tt.wantReason || steps(w) != tt.wantSteps || w.SIMSwap != tt.wantSIM || w.DeviceSwap != tt.wantDevice {
				t.Fatalf("got %s %q [%s] SIM %s device %s", w.Status, w.Reason, steps(w), w.SIMSwap, w.DeviceSwap)
			}
			answered := tt.wantDevice == workflows.SwapSwapped || tt.wantDevice == workflows.SwapNotSwapped
			if answered == w.DeviceCheckedAt.IsZero() || tt.wantSIMTime == w.SIMCheckedAt.IsZero() {
				t.Fatalf("deviceCheckedAt %v, simCheckedAt %v", w.DeviceCheckedAt, w.SIMCheckedAt)
			}
			if stored := e.get(t, w.ID); stored.Status != w.Status || stored.Reason != w.Reason || stored.DeviceSwap != w.DeviceSwap || stored.SIMSwap != w.SIMSwap {
				t.Fatalf("stored %s %s SIM %s device %s", stored.Status, stored.Reason, stored.SIMSwap, stored.DeviceSwap)
			}
			if tt.wantStatus == workflows.Failed && (len(pendingJobs(t, e)) != 0 || e.ledger.calls != 0) {
				t.Fatal("a failed start queued or charged an SMS")
			}
		})
	}
}
