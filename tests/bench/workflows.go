package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
	"github.com/mnvhq/mnv/tests/harness"
)

// Benchmark H runs verification workflows whose one-time code goes by SMS over one SMPP bind to
// sandboxsmsc, started in this process. Not the Node test SMSC: that one keeps every PDU for
// the tests to inspect and runs its SMPP and control port on one Node thread, so it would
// measure itself; sandboxsmsc answers from our codec and lets the flow read the code the moment
// it arrives (Messages), with no HTTP polling in the way. Its CPU is gen's.

// smsNumbers is the prefix of H's numbers (UAE mobiles), apart from F's.
const smsNumbers = "+9715590"

// WorkflowReport is benchmark H.
type WorkflowReport struct {
	Flow   FlowResult
	Notes  []string
	Checks []Check
}

// startBenchSMSC starts the SMSC H's verification binds to, with a password made for the run,
// and returns the environment that points verification at it.
func startBenchSMSC() (*sandboxsmsc.Server, []string, error) {
	password := fmt.Sprintf("b%07d", time.Now().UnixNano()%10_000_000)
	srv, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv-bench", Password: password, Keep: 1_000_000})
	if err != nil {
		return nil, nil, err
	}
	// The bench's workflows go to numbers of few prefixes at a rate the pumping controls would
	// rightly refuse: it measures the channel, so their budgets are off and the figure leaves
	// out the budgets' Redis round trips (the other checks of the controls still run).
	return srv, []string{"MNV_SMPP_ADDR=" + srv.Addr(), "MNV_SMPP_SYSTEM_ID=mnv-bench", "MNV_SMPP_PASSWORD=" + password,
		"MNV_PUMPING_PREFIX_RATE=0", "MNV_PUMPING_NUMBER_PER_HOUR=0", "MNV_PUMPING_DAILY_CAP=0"}, nil
}

var benchCode = regexp.MustCompile(`^([0-9]{4,10}) `)

// benchWorkflows is benchmark H: n workflows (SMS only) on workers goroutines; each starts a
// workflow, waits for its code at the SMSC, checks it at once and expects VERIFIED. verify is
// the start to the code's arrival, flow the start to the VERIFIED answer.
func benchWorkflows(ctx context.Context, s *harness.Suite, smsc *sandboxsmsc.Server, n, workers int, progress io.Writer) (WorkflowReport, error) {
	var rep WorkflowReport
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	c, err := s.CreateClient(ctx, int64(10*n+1000), "--features", "VERIFY,SANDBOX")
	if err != nil {
		return rep, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	call := func(ctx context.Context, method, path, body string, out any) error {
		req, err := http.NewRequestWithContext(ctx, method, s.GatewayURL+path, bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		req.Header.Set("X-API-KEY", c.APIKey)
		req.Header.Set("X-Client-Id", c.ID)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			return err
		}
		return json.Unmarshal(env.Data, out)
	}
	if err := call(ctx, http.MethodPut, "/v1/api/me/workflow-policy", `{"channels":["SMS_OTP"],"maxAttempts":3}`, &struct{}{}); err != nil {
		return rep, err
	}
	var seq atomic.Int64
	type answer struct {
		WorkflowID string `json:"workflowId"`
		Status     string `json:"status"`
	}
	flows := []flow{{name: "H: workflow, SMS to VERIFIED", run: func(ctx context.Context, _ int) (time.Duration, error) {
		number := fmt.Sprintf("%s%05d", smsNumbers, seq.Add(1))
		t0 := time.Now()
		var w answer
		if err := call(ctx, http.MethodPost, "/v1/api/workflows", fmt.Sprintf(`{"mobileNumber":%q}`, number), &w); err != nil {
			return 0, err
		}
		var code string
		for code == "" {
			for _, m := range smsc.Messages(number[1:]) {
				if mm := benchCode.FindStringSubmatch(m.Text); mm != nil {
					code = mm[1]
				}
			}
			if code != "" {
				break
			}
			select {
			case <-ctx.Done():
				return 0, errors.New("no SMS in time")
			case <-time.After(2 * time.Millisecond):
			}
		}
		arrived := time.Since(t0)
		if err := call(ctx, http.MethodPost, "/v1/api/workflows/"+w.WorkflowID+"/code", fmt.Sprintf(`{"code":%q}`, code), &w); err != nil {
			return 0, err
		}
		if w.Status != "VERIFIED" {
			return 0, fmt.Errorf("workflow %s after its code", w.Status)
		}
		return arrived, nil
	}}}
	fmt.Fprintf(progress, "  %d workflows on %d workers\n", n, workers)
	before := len(smsc.All())
	rep.Flow = runFlows(ctx, workers, n, 30*time.Second, flows...)[0]
	msgs := smsc.All()[before:]
	if len(msgs) >= 2 {
		span := msgs[len(msgs)-1].At.Sub(msgs[0].At)
		rep.Notes = append(rep.Notes, fmt.Sprintf("H: %d SMS steps through one bind (window 10) in %s: %.1f SMS/s at the SMSC (first to last arrival), with the code checked as each arrived; %d workers",
			len(msgs), span.Round(time.Millisecond), float64(len(msgs)-1)/span.Seconds(), workers))
	}
	rep.Checks = append(rep.Checks, Check{Name: "H: one SMS per workflow", OK: len(msgs) == rep.Flow.OK()+rep.Flow.Errors,
		Text: fmt.Sprintf("%d SMS for %d workflows", len(msgs), rep.Flow.OK()+rep.Flow.Errors)})
	return rep, nil
}
