package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/charge"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/verification/internal/otp"
)

// DebitTimeout bounds an SMS step's debit: the job retries a debit that did not answer.
const DebitTimeout = 10 * time.Second

// stepRef is an SMS step's charge record.
type stepRef struct {
	ClientID, WorkflowID, StepID string
}

// Reference is an SMS step's debit reference (docs/architecture.md#verification-workflows).
func Reference(stepID string) string { return "workflow-step:" + stepID }

// Variant is the price variant of a step of channel for a number of country: the channel and
// the country, which accounts' prices read as the variant, else the channel, else the kind.
func Variant(c Channel, country string) string {
	if country == "" {
		return string(c)
	}
	return string(c) + ":" + country
}

// SendSMS is the SMS job's work (at least once per step): it has the step paid, then sends its
// code under the step's id as the message id, and records the provider's ids with the step
// SENT, clearing the sealed code. A step that is no longer the one to send (a resend replaced
// it, the workflow ended) is superseded and sends nothing. An error retries the job.
func (s *Service) SendSMS(ctx context.Context, job SMSJob) error {
	var (
		send bool
		w    Workflow
		e164 string
	)
	_, err := s.locked(ctx, job.ClientID, job.WorkflowID, func(_ context.Context, _ Store, lw *Workflow, num string, now time.Time) error {
		step := lw.Step(job.StepID)
		if step == nil || step.Status != StepQueued {
			return nil
		}
		if lw.Final() || lw.Code.StepID != step.ID || lw.Code.Sealed == nil {
			step.Status, step.Reason, step.Ended = StepSuperseded, ReasonSuperseded, now
			if lw.Final() {
				step.Reason = ReasonWorkflowEnded
			}
			return nil
		}
		if step.ChargeStatus == ChargeNone {
			step.ChargeStatus = ChargePending
		}
		send, w, e164 = true, cloneWorkflow(*lw), num
		return nil
	})
	if err != nil || !send {
		if errors.Is(err, fault.ErrNotFound) {
			return nil // purged: nothing to send
		}
		return err
	}
	step := *w.Step(job.StepID)
	if step.ChargeStatus == ChargePending {
		saga := charge.Saga[stepRef]{Ledger: s.ledger, DebitTimeout: DebitTimeout}
		in := charge.Intent[stepRef]{
			Record: stepRef{ClientID: w.ClientID, WorkflowID: w.ID, StepID: step.ID},
			Charge: money.Charge{ClientID: w.ClientID, Kind: money.KindVerificationStep, Variant: Variant(SMSOTP, w.Country), Reference: Reference(step.ID)},
		}
		outcome, _, err := saga.Complete(ctx, books{s}, in)
		switch outcome {
		case charge.Settled:
		case charge.Rejected:
			s.metrics.sent(smsChargeRefused)
			return nil // recorded by the books: nothing to send
		case charge.Voided:
			return nil
		default:
			return fmt.Errorf("sms step %s: charge: %w", step.ID, err)
		}
	}
	digits, err := s.keyring.Open(w.Code.Sealed, codeAD(w.ClientID, w.ID, step.ID, e164))
	if err != nil {
		return fmt.Errorf("sms step %s: open the code: %w", step.ID, err)
	}
	code := otp.Parse(string(digits))
	// The attempt is committed before the submit, so the next attempt after a crash (or after
	// a submit whose outcome was lost) knows the message may already be on its way.
	send, inDoubt, err := s.markSending(ctx, w, step.ID)
	if err != nil || !send {
		return err
	}
	if inDoubt {
		s.metrics.sent(smsInDoubt)
		s.log.Warn("sms in doubt: an earlier attempt's submit has no recorded outcome; sending again, which may double it",
			zap.String("workflow", w.ID), zap.String("step", step.ID))
	}
	ids, err := s.ports.SMS.Send(ctx, Message{ID: step.ID, To: e164, Text: Text(w.Locale, w.Policy.AppName, code, w.Policy.CodeTTL), Locale: w.Locale})
	if errors.Is(err, ErrRefused) {
		s.metrics.sent(smsRefused)
		return s.refused(ctx, w, step.ID, err)
	}
	if errors.Is(err, ErrNotSent) {
		s.metrics.sent(smsFailed)
		if uerr := s.unmarkSending(ctx, w, step.ID); uerr != nil {
			s.log.Warn("sms not sent: the attempt stays counted (the next is flagged in doubt)", zap.String("step", step.ID), zap.Error(uerr))
		}
		return fmt.Errorf("sms step %s: send: %w", step.ID, err)
	}
	if err != nil {
		s.metrics.sent(smsFailed)
		return fmt.Errorf("sms step %s: send: %w", step.ID, err)
	}
	s.metrics.sent(smsSent)
	_, err = s.locked(ctx, w.ClientID, w.ID, func(ctx context.Context, st Store, lw *Workflow, _ string, now time.Time) error {
		if err := st.AddMessages(ctx, lw.ClientID, step.ID, ids); err != nil {
			return err
		}
		if lw.Code.StepID == step.ID {
			lw.Code.Sealed = nil // the SMSC has it: only the hash stays
		}
		if st := lw.Step(step.ID); st.Status == StepQueued {
			st.Status = StepSent
		}
		return nil
	})
	return err
}

// markSending counts a submit of the step's message and commits it before the submit. It
// answers whether the step is still to be sent and whether an earlier attempt's submit has no
// recorded outcome (in doubt: it may have reached the SMS centre).
func (s *Service) markSending(ctx context.Context, w Workflow, stepID string) (send, inDoubt bool, err error) {
	_, err = s.locked(ctx, w.ClientID, w.ID, func(_ context.Context, _ Store, lw *Workflow, _ string, _ time.Time) error {
		step := lw.Step(stepID)
		if step == nil || step.Status != StepQueued || lw.Final() || lw.Code.StepID != stepID || lw.Code.Sealed == nil {
			return nil // superseded or decided while it was charged: the sweep or the books end it
		}
		send, inDoubt = true, step.SendAttempts > 0
		step.SendAttempts++
		return nil
	})
	if errors.Is(err, fault.ErrNotFound) {
		return false, false, nil
	}
	return send, inDoubt, err
}

// unmarkSending takes back the count of a submit the provider is sure never left.
func (s *Service) unmarkSending(ctx context.Context, w Workflow, stepID string) error {
	_, err := s.locked(ctx, w.ClientID, w.ID, func(_ context.Context, _ Store, lw *Workflow, _ string, _ time.Time) error {
		if step := lw.Step(stepID); step != nil && step.Status == StepQueued && step.SendAttempts > 0 {
			step.SendAttempts--
		}
		return nil
	})
	return err
}

// refused records an SMS the SMS centre refused for good: its charge refunded, the step
// UNDELIVERABLE, and the workflow failed when it was the code in play.
func (s *Service) refused(ctx context.Context, w Workflow, stepID string, cause error) error {
	s.log.Info("sms refused by the provider", zap.String("workflow", w.ID), zap.String("step", stepID), zap.Error(cause))
	why := "SMS refused by the SMS centre"
	if _, err := s.ledger.Refund(ctx, money.Refund{ClientID: w.ClientID, Reference: Reference(stepID), Description: &why}); err != nil && !errors.Is(err, money.ErrNothingToRefund) {
		return fmt.Errorf("sms step %s: refund: %w", stepID, err)
	}
	_, err := s.locked(ctx, w.ClientID, w.ID, func(_ context.Context, _ Store, lw *Workflow, _ string, now time.Time) error {
		step := lw.Step(stepID)
		if step.ChargeStatus == ChargeSettled || step.ChargeStatus == ChargePending {
			step.ChargeStatus, step.Charged, step.BalanceAfter = ChargeVoided, 0, nil
		}
		step.Status, step.Reason, step.Ended = StepUndeliverable, ReasonSMSCRefused, now
		if lw.Code.StepID == stepID && !lw.Final() {
			s.clearCode(lw)
			s.end(lw, Failed, SMSOTP, ReasonUndeliverable, now)
		}
		return nil
	})
	return err
}

// books are the SMS steps' charge records (charge.Books).
type books struct{ s *Service }

func (b books) Settle(ctx context.Context, r stepRef, c money.Charged) error {
	_, err := b.s.locked(ctx, r.ClientID, r.WorkflowID, func(_ context.Context, _ Store, w *Workflow, _ string, _ time.Time) error {
		step := w.Step(r.StepID)
		if step == nil || step.ChargeStatus != ChargePending {
			return nil // finished by someone else
		}
		if step.Status != StepQueued {
			return charge.Void(fmt.Errorf("%w: the step was superseded while it was charged", fault.ErrUnavailable), "workflow step superseded")
		}
		after := c.BalanceAfter
		step.ChargeStatus, step.Charged, step.BalanceAfter = ChargeSettled, c.Amount, &after
		return nil
	})
	return err
}

func (b books) Reject(ctx context.Context, r stepRef, refusal error) error {
	_, err := b.s.locked(ctx, r.ClientID, r.WorkflowID, func(_ context.Context, _ Store, w *Workflow, _ string, now time.Time) error {
		step := w.Step(r.StepID)
		if step == nil || step.ChargeStatus != ChargePending {
			return nil
		}
		reason := charge.Refusal(refusal)
		if reason == "" {
			reason = string(fault.InsufficientBalance)
		}
		step.ChargeStatus = ChargeRejected
		step.Status, step.Reason, step.Ended = StepRejected, reason, now
		if w.Code.StepID == step.ID && !w.Final() {
			b.s.clearCode(w)
			b.s.end(w, Failed, "", reason, now)
		}
		return nil
	})
	return err
}

func (b books) Void(ctx context.Context, r stepRef) error {
	_, err := b.s.locked(ctx, r.ClientID, r.WorkflowID, func(_ context.Context, _ Store, w *Workflow, _ string, _ time.Time) error {
		if step := w.Step(r.StepID); step != nil && step.ChargeStatus == ChargePending {
			step.ChargeStatus, step.Charged, step.BalanceAfter = ChargeVoided, 0, nil
		}
		return nil
	})
	return err
}

// Receipt records a delivery receipt for the provider's message id: the SMS step becomes
// DELIVERED or UNDELIVERABLE (one undeliverable part makes the message undeliverable). A
// receipt for an unknown id is fault.ErrNotFound; a late one for a step already decided
// changes nothing.
func (s *Service) Receipt(ctx context.Context, providerID, status string) error {
	if status != ReceiptDelivered && status != ReceiptUndeliverable {
		return fault.Invalid("status", "must be %s or %s", ReceiptDelivered, ReceiptUndeliverable)
	}
	clientID, workflowID, stepID, err := s.st.FindMessage(ctx, providerID)
	if err != nil {
		return err
	}
	_, err = s.locked(ctx, clientID, workflowID, func(_ context.Context, _ Store, w *Workflow, _ string, now time.Time) error {
		step := w.Step(stepID)
		if step == nil {
			return nil
		}
		switch {
		case status == ReceiptDelivered && (step.Status == StepSent || step.Status == StepQueued):
			step.Status = StepDelivered
		case status == ReceiptUndeliverable && (step.Status == StepSent || step.Status == StepQueued || step.Status == StepDelivered):
			step.Status, step.Reason = StepUndeliverable, ReasonUndeliverable
		}
		return nil
	})
	return err
}

// texts are the SMS's words per language (the locale's first subtag), without and with the
// policy's app name; English for the rest. The code comes first, so a phone's autofill and a
// glance at the notification both find it. Each is one SMS part with the longest code, app
// name and lifetime (a second part is a second charge from the operator): in GSM 7-bit, 160
// characters, so Spanish goes without the accents GSM lacks (á, í, ó, ú), as Spanish SMS
// commonly do; Arabic needs UCS-2, 70 characters, so it is short, and with a name shorter
// still. TestTextsFitOneSMS (internal/smsc) holds them to it.
var texts = map[string]struct{ plain, named string }{
	"en": {
		"%s is your verification code. It expires in %d minutes. Do not share it.",
		"%s is your %s verification code. It expires in %d minutes. Do not share it.",
	},
	"fr": {
		"%s est votre code de vérification. Il expire dans %d minutes. Ne le partagez pas.",
		"%s est votre code de vérification %s. Il expire dans %d minutes. Ne le partagez pas.",
	},
	"de": {
		"%s ist Ihr Bestätigungscode. Er läuft in %d Minuten ab. Geben Sie ihn nicht weiter.",
		"%s ist Ihr Bestätigungscode für %s. Er läuft in %d Minuten ab. Geben Sie ihn nicht weiter.",
	},
	"es": {
		"%s es tu codigo de verificacion. Caduca en %d minutos. No lo compartas.",       //nolint:misspell // Spanish, without the accents GSM lacks
		"%s es tu codigo de verificacion de %s. Caduca en %d minutos. No lo compartas.", //nolint:misspell // Spanish, without the accents GSM lacks
	},
	"ar": {
		"%s هو رمز التحقق. ينتهي خلال %d دقيقة. لا تشاركه.",
		"%s رمز %s. ينتهي خلال %d دقيقة. لا تشاركه.",
	},
}

// Text is the SMS carrying code, in locale's language, naming appName when it is not empty
// (the policy's, validated: GSM 03.38 basic characters, at most MaxAppName).
func Text(locale, appName string, code otp.Code, ttl time.Duration) string {
	lang, _, _ := strings.Cut(strings.ToLower(locale), "-")
	lang, _, _ = strings.Cut(lang, "_")
	t, ok := texts[lang]
	if !ok {
		t = texts["en"]
	}
	minutes := max(1, int(ttl/time.Minute))
	if appName == "" {
		return fmt.Sprintf(t.plain, code.Digits(), minutes)
	}
	return fmt.Sprintf(t.named, code.Digits(), appName, minutes)
}
