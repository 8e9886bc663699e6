package workflows

import (
	"net/netip"
	"time"
)

// Status is where a workflow stands.
type Status string

// Workflow statuses (docs/api-decisions.md#workflows).
const (
	InProgress  Status = "IN_PROGRESS"
	Verified    Status = "VERIFIED"
	NotVerified Status = "NOT_VERIFIED"
	Failed      Status = "FAILED"
	Expired     Status = "EXPIRED"
)

// Step statuses. A SILENT step is PENDING until its blob is verified, then VERIFIED,
// NOT_VERIFIED, UNDETERMINED or EXPIRED (the verify's status), or TIMED_OUT. An SMS_OTP step is
// QUEUED, SENT (the SMSC took it), DELIVERED or UNDELIVERABLE (its receipt), and VERIFIED when
// its code matched; REJECTED when its charge was refused, BLOCKED by the pumping guard,
// SUPERSEDED when a resend or the workflow's end made it moot before it was sent; FAILED,
// EXPIRED or TIMED_OUT with its workflow.
type StepStatus string

// Step statuses.
const (
	StepPending       StepStatus = "PENDING"
	StepQueued        StepStatus = "QUEUED"
	StepSent          StepStatus = "SENT"
	StepDelivered     StepStatus = "DELIVERED"
	StepUndeliverable StepStatus = "UNDELIVERABLE"
	StepVerified      StepStatus = "VERIFIED"
	StepNotVerified   StepStatus = "NOT_VERIFIED"
	StepUndetermined  StepStatus = "UNDETERMINED"
	StepFailed        StepStatus = "FAILED"
	StepExpired       StepStatus = "EXPIRED"
	StepTimedOut      StepStatus = "TIMED_OUT"
	StepRejected      StepStatus = "REJECTED"
	StepBlocked       StepStatus = "BLOCKED"
	StepSuperseded    StepStatus = "SUPERSEDED"
)

// ChargeStatus is where a step's charge stands. An SMS step is charged on its own (reference
// workflow-step:<id>); a silent step is charged as its verification, under the verification's
// own debit, and shows that charge (SETTLED with the verification's amount) so the workflow's
// answer tells everything it cost.
type ChargeStatus string

// Charge statuses.
const (
	ChargeNone     ChargeStatus = "NONE"
	ChargePending  ChargeStatus = "PENDING"
	ChargeSettled  ChargeStatus = "SETTLED"
	ChargeRejected ChargeStatus = "REJECTED"
	ChargeVoided   ChargeStatus = "VOIDED"
)

// SwapResult is what a SIM-swap or device-swap check found.
type SwapResult string

// Swap check results. UNAVAILABLE and NOT_OFFERED are both a check that could not be made:
// the operator did not answer (down, refusing, not serving the number), or no operator of the
// number's country offers the API (or none is configured); the policy's mode decides either
// the same way.
const (
	SwapNotChecked  SwapResult = "NOT_CHECKED"
	SwapNotSwapped  SwapResult = "NOT_SWAPPED"
	SwapSwapped     SwapResult = "SWAPPED"
	SwapUnavailable SwapResult = "UNAVAILABLE"
	SwapNotOffered  SwapResult = "NOT_OFFERED"
)

// Reasons a workflow or step ended (docs/api-decisions.md#workflows). More may come.
const (
	ReasonNetworkVerified = "NETWORK_VERIFIED"
	ReasonNumberMismatch  = "NUMBER_MISMATCH"
	ReasonCodeMatched     = "CODE_MATCHED"
	ReasonCodeMismatch    = "CODE_MISMATCH"
	ReasonTooManyAttempts = "TOO_MANY_ATTEMPTS"
	ReasonCodeExpired     = "CODE_EXPIRED"
	ReasonStepTimedOut    = "STEP_TIMED_OUT"
	ReasonUndeliverable   = "SMS_UNDELIVERABLE"
	ReasonSMSCRefused     = "SMSC_REFUSED"
	ReasonSIMSwapped      = "SIM_SWAPPED"
	// ReasonSIMSwapUnknown: the policy's SIM-swap mode is BLOCK and the check could not be
	// made (the operator unreachable, refusing, or no operator offers it): failed closed.
	ReasonSIMSwapUnknown = "SIM_SWAP_UNKNOWN"
	ReasonDeviceSwapped  = "DEVICE_SWAPPED"
	// ReasonDeviceSwapUnknown: the device-swap mode is BLOCK and the check could not be made,
	// as ReasonSIMSwapUnknown.
	ReasonDeviceSwapUnknown = "DEVICE_SWAP_UNKNOWN"
	ReasonNoChannelLeft     = "NO_CHANNEL_LEFT"
	ReasonBlocked           = "SMS_BLOCKED"
	ReasonSuperseded        = "SUPERSEDED"
	ReasonWorkflowEnded     = "WORKFLOW_ENDED"
)

// Workflow is one number verified through the channels of its resolved policy.
type Workflow struct {
	ClientID string
	ID       string
	// NumberSealed is the number sealed for this row (phone.Vault, table "workflows");
	// NumberHash its keyed hash.
	NumberSealed []byte
	NumberHash   []byte
	Masked       string
	Country      string
	Locale       string
	// TransactionID is the browser transaction whose page may check the code, "" for none.
	TransactionID string
	Policy        Resolved
	Status        Status
	DecidedBy     Channel // "" while in progress, and for an end no channel decided
	Reason        string
	// SIMSwap and DeviceSwap are what the start's swap checks found; SIMCheckedAt and
	// DeviceCheckedAt when the operator answered (zero when it did not).
	SIMSwap         SwapResult
	SIMCheckedAt    time.Time
	DeviceSwap      SwapResult
	DeviceCheckedAt time.Time
	// Sandbox and Address are the start's, kept for the pumping guard of a later SMS step
	// (SMSRequest): Address is the end user's as the per-address budget keys it (an IPv6
	// address by its /64), invalid when the start gave none.
	Sandbox bool
	Address netip.Addr
	// StepSeq is the step in play (Steps[StepSeq-1]).
	StepSeq int
	Code    CodeState
	Steps   []Step
	Created time.Time
	Updated time.Time
	Ended   time.Time
}

// CodeState is the one-time code in play: the step that sent it, its keyed hash (otp), and
// the code sealed for the sender until the SMSC has it.
type CodeState struct {
	StepID    string // "" when no code is in play
	KeyID     string
	Hash      []byte
	Sealed    []byte
	IssuedAt  time.Time
	ExpiresAt time.Time
	Attempts  int
	Resends   int
}

// Step is one channel tried, or one SMS sent.
type Step struct {
	ID             string
	Seq            int
	Channel        Channel
	Status         StepStatus
	Reason         string
	VerificationID string
	ChargeStatus   ChargeStatus
	Charged        int64
	BalanceAfter   *int64
	Started        time.Time
	Deadline       time.Time
	Ended          time.Time
	// SendAttempts counts the SMS job's submits of the step's message, each committed before
	// its submit: above zero with no message ids recorded, an earlier attempt's outcome is
	// unknown (docs/architecture.md#sms-over-smpp).
	SendAttempts int
	// InDoubtSince is when an attempt first found the step in doubt (QUEUED with an attempt
	// counted): its resend waits a hold from then for a delivery receipt that settles it. Zero
	// while it never was.
	InDoubtSince time.Time
}

// Charged is the sum of the workflow's settled step charges: every charge the workflow caused,
// the silent step's verification included.
func (w Workflow) Charged() int64 {
	var n int64
	for _, s := range w.Steps {
		if s.ChargeStatus == ChargeSettled {
			n += s.Charged
		}
	}
	return n
}

// Current is the step in play, nil before the first.
func (w *Workflow) Current() *Step {
	if w.StepSeq < 1 || w.StepSeq > len(w.Steps) {
		return nil
	}
	return &w.Steps[w.StepSeq-1]
}

// Step is the step with id, nil when the workflow has none.
func (w *Workflow) Step(id string) *Step {
	for i := range w.Steps {
		if w.Steps[i].ID == id {
			return &w.Steps[i]
		}
	}
	return nil
}

// Final reports whether the workflow ended.
func (w Workflow) Final() bool { return w.Status != InProgress }

// AttemptsLeft is how many codes may still be tried.
func (w Workflow) AttemptsLeft() int { return w.Policy.Code().AttemptsLeft(w.codeState()) }

// ResendsLeft is how many resends remain.
func (w Workflow) ResendsLeft() int { return max(0, w.Policy.MaxResends-w.Code.Resends) }

// ResendAt is when a resend is next allowed (zero: none left, or no code in play).
func (w Workflow) ResendAt() time.Time {
	if w.Code.StepID == "" || w.Final() {
		return time.Time{}
	}
	return w.Policy.Code().ResendAt(w.codeState())
}
