package server

import (
	"context"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/paging"
	"github.com/mnvhq/mnv/services/platform/usage/usagepb"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// The workflow RPCs (docs/api-decisions.md#workflows).

// StartWorkflow starts a verification workflow for a number.
func (s *Server) StartWorkflow(ctx context.Context, req *verificationv1.StartWorkflowRequest) (*verificationv1.StartWorkflowResponse, error) {
	p := principalOf(ctx)
	var addr netip.Addr
	if req.EndUserIp != nil {
		a, err := netip.ParseAddr(req.GetEndUserIp())
		if err != nil || a.Zone() != "" {
			return nil, s.fail(ctx, fault.Invalid("endUserIp", "must be an IPv4 or IPv6 address"))
		}
		addr = a
	}
	w, err := s.Workflows.Start(ctx, workflows.StartRequest{
		ClientID: p.ClientID, MobileNumber: req.GetMobileNumber(), Locale: req.GetLocale(), TransactionID: req.TransactionId,
		Sandbox: s.Sandbox && p.Has(operators.FeatureSandbox), EndUserAddress: addr,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.StartWorkflowResponse{Workflow: workflowToProto(w)}, nil
}

// GetWorkflow reads a workflow of the client's (another client's is 404).
func (s *Server) GetWorkflow(ctx context.Context, req *verificationv1.GetWorkflowRequest) (*verificationv1.GetWorkflowResponse, error) {
	w, err := s.Workflows.Get(ctx, principalOf(ctx).ClientID, req.GetWorkflowId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetWorkflowResponse{Workflow: workflowToProto(w)}, nil
}

// SubmitWorkflowSilent verifies the silent step's blob (a verify of the workflow's number) and
// gives the step its outcome.
func (s *Server) SubmitWorkflowSilent(ctx context.Context, req *verificationv1.SubmitWorkflowSilentRequest) (*verificationv1.SubmitWorkflowSilentResponse, error) {
	p := principalOf(ctx)
	w, err := s.Workflows.SubmitSilent(ctx, p.ClientID, req.GetWorkflowId(), func(ctx context.Context, e164 string) (workflows.SilentOutcome, error) {
		r, err := s.Verifier.Verify(ctx, p, verify.Request{
			MobileNumber: e164, Blob: req.GetEncryptedMobileNumber(), OperatorID: req.GetOperatorId(), ServiceType: req.GetServiceType(),
		})
		if err != nil {
			return workflows.SilentOutcome{}, err
		}
		v := r.Verification
		return workflows.SilentOutcome{Status: string(v.Status), Reason: v.Reason, VerificationID: v.ID, Charged: v.Charged, BalanceAfter: v.BalanceAfter}, nil
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.SubmitWorkflowSilentResponse{Workflow: workflowToProto(w)}, nil
}

// ListWorkflows lists the client's workflows, paged like the other lists.
func (s *Server) ListWorkflows(ctx context.Context, req *verificationv1.ListWorkflowsRequest) (*verificationv1.ListWorkflowsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	f := workflows.ListFilter{Status: req.Status, Channel: req.Channel, Country: req.Country}
	items, total, err := s.Workflows.List(ctx, principalOf(ctx).ClientID, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := make([]*verificationv1.Workflow, 0, len(items))
	for _, w := range items {
		out = append(out, workflowToProto(w))
	}
	return &verificationv1.ListWorkflowsResponse{
		Items: out, Page: pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total),
	}, nil
}

// CheckWorkflowCode checks a code the user typed; a wrong one is answered with the workflow.
func (s *Server) CheckWorkflowCode(ctx context.Context, req *verificationv1.CheckWorkflowCodeRequest) (*verificationv1.CheckWorkflowCodeResponse, error) {
	w, err := s.Workflows.CheckCode(ctx, principalOf(ctx).ClientID, req.GetWorkflowId(), req.GetCode())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.CheckWorkflowCodeResponse{Workflow: workflowToProto(w)}, nil
}

// CheckWebWorkflowCode checks a code typed on the page of a browser transaction (called by
// the gateway only): the page's origin must be one the transaction's client allowed, checked
// here as for a capture, whatever the gateway did.
func (s *Server) CheckWebWorkflowCode(ctx context.Context, req *verificationv1.CheckWebWorkflowCodeRequest) (*verificationv1.CheckWebWorkflowCodeResponse, error) {
	clientID, err := s.Browser.PageClient(ctx, req.GetTransactionId(), networkOf(ctx, s.NumberHeaders).Origin)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	w, err := s.Workflows.CheckCodeOfTransaction(ctx, clientID, req.GetTransactionId(), req.GetCode())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &verificationv1.CheckWebWorkflowCodeResponse{
		Status: string(w.Status), Reason: optString(w.Reason), AttemptsLeft: int32(w.AttemptsLeft()), //nolint:gosec // G115: at most 10
	}
	if w.Code.StepID != "" && !w.Final() {
		out.CodeExpiresAt = timestamppb.New(w.Code.ExpiresAt)
	}
	return out, nil
}

// GetWebWorkflow reads the workflow of a browser transaction for its page (called by the
// gateway only), the origin checked here as for a capture.
func (s *Server) GetWebWorkflow(ctx context.Context, req *verificationv1.GetWebWorkflowRequest) (*verificationv1.GetWebWorkflowResponse, error) {
	clientID, err := s.Browser.PageClient(ctx, req.GetTransactionId(), networkOf(ctx, s.NumberHeaders).Origin)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	w, err := s.Workflows.GetOfTransaction(ctx, clientID, req.GetTransactionId(), networkOf(ctx, s.NumberHeaders).Addr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetWebWorkflowResponse{Workflow: webWorkflowToProto(w)}, nil
}

// ResendWebWorkflowCode sends a new code for the workflow of a browser transaction (called by
// the gateway only), the origin checked here as for a capture.
func (s *Server) ResendWebWorkflowCode(ctx context.Context, req *verificationv1.ResendWebWorkflowCodeRequest) (*verificationv1.ResendWebWorkflowCodeResponse, error) {
	clientID, err := s.Browser.PageClient(ctx, req.GetTransactionId(), networkOf(ctx, s.NumberHeaders).Origin)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	w, err := s.Workflows.ResendOfTransaction(ctx, clientID, req.GetTransactionId(), networkOf(ctx, s.NumberHeaders).Addr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.ResendWebWorkflowCodeResponse{Workflow: webWorkflowToProto(w)}, nil
}

// webWorkflowToProto is what a page may know of a workflow: its state and the code's rules,
// never the number, its country or the steps' records.
func webWorkflowToProto(w workflows.Workflow) *verificationv1.WebWorkflow {
	out := &verificationv1.WebWorkflow{
		Status: string(w.Status), Reason: optString(w.Reason),
		AttemptsLeft: int32(w.AttemptsLeft()), ResendsLeft: int32(w.ResendsLeft()), //nolint:gosec // G115: at most 10 and 5
		ResendAt: tsOrNil(optTime(w.ResendAt())),
	}
	if cur := w.Current(); cur != nil && !w.Final() {
		out.Channel = optString(string(cur.Channel))
	}
	if w.Code.StepID != "" && !w.Final() {
		out.CodeExpected = true
		out.CodeExpiresAt = timestamppb.New(w.Code.ExpiresAt)
	}
	return out
}

// ResendWorkflowCode sends a new code.
func (s *Server) ResendWorkflowCode(ctx context.Context, req *verificationv1.ResendWorkflowCodeRequest) (*verificationv1.ResendWorkflowCodeResponse, error) {
	w, err := s.Workflows.Resend(ctx, principalOf(ctx).ClientID, req.GetWorkflowId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.ResendWorkflowCodeResponse{Workflow: workflowToProto(w)}, nil
}

// GetWorkflowUsage counts the client's workflow steps per day (docs/api-decisions.md#usage).
func (s *Server) GetWorkflowUsage(ctx context.Context, req *verificationv1.GetWorkflowUsageRequest) (*verificationv1.GetWorkflowUsageResponse, error) {
	rep, err := s.Workflows.Usage(ctx, principalOf(ctx).ClientID, req.From, req.To,
		workflows.UsageFilter{Channel: req.Channel, Country: req.Country})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetWorkflowUsageResponse{Usage: usagepb.ToProto(rep)}, nil
}

// GetWorkflowPolicy reads the client's policy, and what it gives a number of no override.
func (s *Server) GetWorkflowPolicy(ctx context.Context, _ *verificationv1.GetWorkflowPolicyRequest) (*verificationv1.GetWorkflowPolicyResponse, error) {
	p, err := s.Workflows.Policy(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetWorkflowPolicyResponse{Policy: policyToProto(p), Effective: resolvedToProto(p.Resolve(""))}, nil
}

// SetWorkflowPolicy replaces the client's policy (ADMIN), validated.
func (s *Server) SetWorkflowPolicy(ctx context.Context, req *verificationv1.SetWorkflowPolicyRequest) (*verificationv1.SetWorkflowPolicyResponse, error) {
	p := principalOf(ctx)
	saved, err := s.Workflows.SetPolicy(ctx, p.ClientID, policyFromProto(req.GetPolicy()), p.Credential())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.SetWorkflowPolicyResponse{Policy: policyToProto(saved), Effective: resolvedToProto(saved.Resolve(""))}, nil
}

func workflowToProto(w workflows.Workflow) *verificationv1.Workflow {
	out := &verificationv1.Workflow{
		WorkflowId: w.ID, Status: string(w.Status), DecidedBy: optString(string(w.DecidedBy)), Reason: optString(w.Reason),
		MobileNumber: w.Masked, Country: w.Country, SimSwap: string(w.SIMSwap),
		AttemptsLeft: int32(w.AttemptsLeft()), ResendsLeft: int32(w.ResendsLeft()), //nolint:gosec // G115: at most 10 and 5
		ResendAt: tsOrNil(optTime(w.ResendAt())), Charged: w.Charged(),
		CreatedAt: timestamppb.New(w.Created), EndedAt: tsOrNil(optTime(w.Ended)), TransactionId: optString(w.TransactionID),
		SimCheckedAt: tsOrNil(optTime(w.SIMCheckedAt)),
		DeviceSwap:   string(w.DeviceSwap), DeviceCheckedAt: tsOrNil(optTime(w.DeviceCheckedAt)),
	}
	if w.Code.StepID != "" && !w.Final() {
		out.CodeExpiresAt = timestamppb.New(w.Code.ExpiresAt)
	}
	for _, st := range w.Steps {
		charged := int64(0)
		if st.ChargeStatus == workflows.ChargeSettled {
			charged = st.Charged
		}
		out.Steps = append(out.Steps, &verificationv1.WorkflowStep{
			StepId: st.ID, Seq: int32(st.Seq), Channel: string(st.Channel), Status: string(st.Status), //nolint:gosec // G115: a handful of steps
			Reason: optString(st.Reason), VerificationId: optString(st.VerificationID), Charged: charged,
			StartedAt: timestamppb.New(st.Started), EndedAt: tsOrNil(optTime(st.Ended)),
		})
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func optInt32(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v) //nolint:gosec // G115: validated ranges, far inside int32
	return &n
}

func optInt(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

func settingsToProto(s workflows.Settings) *verificationv1.WorkflowSettings {
	out := &verificationv1.WorkflowSettings{
		SilentTimeoutSeconds: optInt32(s.SilentTimeoutSeconds), SmsTimeoutSeconds: optInt32(s.SMSTimeoutSeconds),
		CodeLength: optInt32(s.CodeLength), CodeTtlSeconds: optInt32(s.CodeTTLSeconds), MaxAttempts: optInt32(s.MaxAttempts),
		ResendCooldownSeconds: optInt32(s.ResendCooldownSeconds), MaxResends: optInt32(s.MaxResends), AppName: s.AppName,
	}
	for _, c := range s.Channels {
		out.Channels = append(out.Channels, string(c))
	}
	out.SimSwap, out.DeviceSwap = swapToProto(s.SIMSwap), swapToProto(s.DeviceSwap)
	return out
}

func settingsFromProto(p *verificationv1.WorkflowSettings) workflows.Settings {
	s := workflows.Settings{
		SilentTimeoutSeconds: optInt(p.SilentTimeoutSeconds), SMSTimeoutSeconds: optInt(p.SmsTimeoutSeconds),
		CodeLength: optInt(p.CodeLength), CodeTTLSeconds: optInt(p.CodeTtlSeconds), MaxAttempts: optInt(p.MaxAttempts),
		ResendCooldownSeconds: optInt(p.ResendCooldownSeconds), MaxResends: optInt(p.MaxResends), AppName: p.AppName,
	}
	for _, c := range p.GetChannels() {
		s.Channels = append(s.Channels, workflows.Channel(c))
	}
	s.SIMSwap, s.DeviceSwap = swapFromProto(p.GetSimSwap()), swapFromProto(p.GetDeviceSwap())
	return s
}

func swapToProto(sw *workflows.Swap) *verificationv1.WorkflowSimSwap {
	if sw == nil {
		return nil
	}
	return &verificationv1.WorkflowSimSwap{Mode: string(sw.Mode), MaxAgeHours: optInt32(sw.MaxAgeHours)}
}

func swapFromProto(sw *verificationv1.WorkflowSimSwap) *workflows.Swap {
	if sw == nil {
		return nil
	}
	return &workflows.Swap{Mode: workflows.SwapMode(sw.GetMode()), MaxAgeHours: optInt(sw.MaxAgeHours)}
}

func policyToProto(p workflows.Policy) *verificationv1.WorkflowPolicy {
	s := settingsToProto(p.Settings)
	out := &verificationv1.WorkflowPolicy{
		Channels: s.Channels, SilentTimeoutSeconds: s.SilentTimeoutSeconds, SmsTimeoutSeconds: s.SmsTimeoutSeconds,
		CodeLength: s.CodeLength, CodeTtlSeconds: s.CodeTtlSeconds, MaxAttempts: s.MaxAttempts,
		ResendCooldownSeconds: s.ResendCooldownSeconds, MaxResends: s.MaxResends, SimSwap: s.SimSwap, DeviceSwap: s.DeviceSwap,
		SmsCountries: p.SMSCountries, DailySmsCap: p.DailySMSCap, AppName: s.AppName,
	}
	if len(p.Countries) > 0 {
		out.Countries = map[string]*verificationv1.WorkflowSettings{}
		for cc, c := range p.Countries {
			out.Countries[cc] = settingsToProto(c)
		}
	}
	return out
}

func policyFromProto(p *verificationv1.WorkflowPolicy) workflows.Policy {
	out := workflows.Policy{Settings: settingsFromProto(&verificationv1.WorkflowSettings{
		Channels: p.GetChannels(), SilentTimeoutSeconds: p.SilentTimeoutSeconds, SmsTimeoutSeconds: p.SmsTimeoutSeconds,
		CodeLength: p.CodeLength, CodeTtlSeconds: p.CodeTtlSeconds, MaxAttempts: p.MaxAttempts,
		ResendCooldownSeconds: p.ResendCooldownSeconds, MaxResends: p.MaxResends, SimSwap: p.GetSimSwap(), AppName: p.AppName,
		DeviceSwap: p.GetDeviceSwap(),
	}), SMSCountries: p.GetSmsCountries(), DailySMSCap: p.DailySmsCap}
	if len(p.GetCountries()) > 0 {
		out.Countries = map[string]workflows.Settings{}
		for cc, c := range p.GetCountries() {
			if c == nil {
				c = &verificationv1.WorkflowSettings{}
			}
			out.Countries[cc] = settingsFromProto(c)
		}
	}
	return out
}

func resolvedToProto(r workflows.Resolved) *verificationv1.WorkflowSettings {
	secs := func(d time.Duration) *int32 { n := int32(d / time.Second); return &n } //nolint:gosec // G115: validated ranges
	n := func(v int) *int32 { x := int32(v); return &x }                            //nolint:gosec // G115: validated ranges
	out := &verificationv1.WorkflowSettings{
		SilentTimeoutSeconds: secs(r.SilentTimeout), SmsTimeoutSeconds: secs(r.SMSTimeout), CodeLength: n(r.CodeLength),
		CodeTtlSeconds: secs(r.CodeTTL), MaxAttempts: n(r.MaxAttempts), ResendCooldownSeconds: secs(r.ResendCooldown),
		MaxResends: n(r.MaxResends),
		SimSwap:    &verificationv1.WorkflowSimSwap{Mode: string(r.SIMSwapMode), MaxAgeHours: n(int(r.SIMSwapMaxAge / time.Hour))},
		DeviceSwap: &verificationv1.WorkflowSimSwap{Mode: string(r.DeviceSwapMode), MaxAgeHours: n(int(r.DeviceSwapMaxAge / time.Hour))},
	}
	if r.AppName != "" {
		out.AppName = &r.AppName
	}
	for _, c := range r.Channels {
		out.Channels = append(out.Channels, string(c))
	}
	return out
}

// ListSandboxSms lists the sandbox SMS centre's messages of the client's workflows (404 where
// the SMS centre is a real one).
func (s *Server) ListSandboxSms(ctx context.Context, _ *verificationv1.ListSandboxSmsRequest) (*verificationv1.ListSandboxSmsResponse, error) {
	msgs, err := s.Workflows.SandboxSMS(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &verificationv1.ListSandboxSmsResponse{Items: make([]*verificationv1.SandboxSms, len(msgs))}
	for i, m := range msgs {
		out.Items[i] = &verificationv1.SandboxSms{
			WorkflowId: m.WorkflowID, StepId: m.StepID, MobileNumber: m.Masked, From: m.From, Text: m.Text, ReceivedAt: timestamppb.New(m.At),
		}
	}
	return out, nil
}
