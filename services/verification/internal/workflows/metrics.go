package workflows

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what workflows do, by channel: steps by the status they reach, workflows by
// how they end, SMS sends by outcome, code checks by outcome. Counted after the transaction
// that made the change committed. A nil *Metrics counts nothing.
type Metrics struct {
	steps     *prometheus.CounterVec
	workflows *prometheus.CounterVec
	sms       *prometheus.CounterVec
	checks    *prometheus.CounterVec
}

// SMS send outcomes (mnv_verification_workflow_sms_total{outcome}).
const (
	smsSent          = "sent"
	smsRefused       = "refused"
	smsFailed        = "failed"
	smsChargeRefused = "charge_refused"
	smsInDoubt       = "in_doubt"
	// smsInDoubtResolved: a step in doubt settled by its delivery receipt, not sent again.
	smsInDoubtResolved = "in_doubt_resolved"
)

var (
	smsOutcomes   = []string{smsSent, smsRefused, smsFailed, smsChargeRefused, smsInDoubt, smsInDoubtResolved}
	checkOutcomes = []string{"matched", "mismatch", "exhausted", "expired"}
	finalStatuses = []Status{Verified, NotVerified, Failed, Expired}
)

// NewMetrics creates the metrics and registers them on reg (none when reg is nil). The series
// of known label values exist from the start, so a rate over them is never empty.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "workflow_steps_total",
			Help: "Workflow steps by channel (SILENT, SMS_OTP) and the status they reached (QUEUED, SENT, DELIVERED, VERIFIED, TIMED_OUT, …): a step counts once per status.",
		}, []string{"channel", "status"}),
		workflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "workflows_total",
			Help: "Workflows by final status and the channel that decided (none when no channel did): conversion by channel.",
		}, []string{"status", "decided_by"}),
		sms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "workflow_sms_total",
			Help: "SMS sends of workflows by outcome: sent (the provider took it), refused (for good, refunded), failed (unknown, retried), charge_refused (not sent), in_doubt (sent again although an earlier submit's outcome was lost and no receipt matched it within the hold: possibly doubled), in_doubt_resolved (a step in doubt settled by its delivery receipt, not sent again).",
		}, []string{"outcome"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "workflow_code_checks_total",
			Help: "One-time code checks by outcome: matched, mismatch, exhausted (the last attempt failed the workflow), expired. A surge of mismatches is someone guessing.",
		}, []string{"outcome"}),
	}
	for _, c := range knownChannels {
		for _, s := range []StepStatus{StepQueued, StepSent, StepDelivered, StepUndeliverable, StepVerified} {
			m.steps.WithLabelValues(string(c), string(s))
		}
	}
	for _, s := range finalStatuses {
		m.workflows.WithLabelValues(string(s), "")
	}
	for _, o := range smsOutcomes {
		m.sms.WithLabelValues(o)
	}
	for _, o := range checkOutcomes {
		m.checks.WithLabelValues(o)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.steps, m.workflows, m.sms, m.checks} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// changed counts what a committed transaction changed of a workflow (before nil: it was new).
func (m *Metrics) changed(before *Workflow, w Workflow) {
	if m == nil {
		return
	}
	for _, st := range w.Steps {
		if before != nil {
			if old := before.Step(st.ID); old != nil && old.Status == st.Status {
				continue
			}
		}
		m.steps.WithLabelValues(string(st.Channel), string(st.Status)).Inc()
	}
	if w.Final() && (before == nil || !before.Final()) {
		m.workflows.WithLabelValues(string(w.Status), string(w.DecidedBy)).Inc()
	}
}

func (m *Metrics) sent(outcome string) {
	if m != nil {
		m.sms.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) checked(outcome string) {
	if m != nil && outcome != "" {
		m.checks.WithLabelValues(outcome).Inc()
	}
}
