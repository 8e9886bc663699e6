package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
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
// code with the attempt's reference, and records the provider's ids with the step SENT,
// clearing the sealed code. A step that is no longer the one to send (a resend replaced it, the
// workflow ended) is superseded and sends nothing. A step in doubt (an earlier submit's outcome
// lost) is held for its receipt first: *HeldError, which the worker turns into a snooze
// (docs/architecture.md#sms-over-smpp). Another error retries the job.
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
	m, err := s.markSending(ctx, w, step.ID)
	if err != nil || !m.send {
		if err == nil && m.wait > 0 {
			return &HeldError{Wait: m.wait}
		}
		return err
	}
	if m.inDoubt {
		s.metrics.sent(smsInDoubt)
		s.log.Warn("sms in doubt: an earlier attempt's submit has no recorded outcome and no receipt matched it within the hold; sending again, which may double it",
			zap.String("workflow", w.ID), zap.String("step", step.ID))
	}
	ids, err := s.ports.SMS.Send(ctx, Message{ID: step.ID, To: e164, Text: Text(w.Locale, w.Policy.AppName, code, w.Policy.CodeTTL), Locale: w.Locale,
		Reference: MessageReference(step.ID, m.attempt)})
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

// sendDecision is what markSending decided.
type sendDecision struct {
	send    bool
	attempt int // the attempt counted, from 1
	inDoubt bool
	wait    time.Duration // > 0: held, not sent; the job comes back after it
}

// markSending counts a submit of the step's message and commits it before the submit. It
// answers whether the step is still to be sent, the attempt's number, and whether an earlier
// attempt's submit has no recorded outcome (in doubt: it may have reached the SMS centre).
//
// A step in doubt is held before it is sent again: the first attempt that finds it so records
// when (in_doubt_since), and none sends until the hold has passed from then, so that the
// delivery receipt of a message the SMS centre took settles the step first
// (ReceiptInDoubt) and nothing is sent twice. The hold never takes more than half of what was
// left of the code's life when the doubt was seen: a resend must still leave the user time to
// type the code.
func (s *Service) markSending(ctx context.Context, w Workflow, stepID string) (m sendDecision, err error) {
	_, err = s.locked(ctx, w.ClientID, w.ID, func(_ context.Context, _ Store, lw *Workflow, _ string, now time.Time) error {
		step := lw.Step(stepID)
		if step == nil || step.Status != StepQueued || lw.Final() || lw.Code.StepID != stepID || lw.Code.Sealed == nil {
			return nil // superseded or decided while it was charged: the sweep or the books end it
		}
		if step.SendAttempts > 0 && s.hold > 0 {
			if step.InDoubtSince.IsZero() {
				step.InDoubtSince = now
			}
			until := step.InDoubtSince.Add(s.hold)
			if exp := lw.Code.ExpiresAt; !exp.IsZero() && exp.After(step.InDoubtSince) {
				until = minTime(until, step.InDoubtSince.Add(exp.Sub(step.InDoubtSince)/2))
			}
			if now.Before(until) {
				m.wait = until.Sub(now)
				return nil // in_doubt_since is committed: the hold runs from the first look
			}
		}
		m.send, m.inDoubt = true, step.SendAttempts > 0
		// This attempt's outcome may be lost in its turn: its doubt gets a hold of its own.
		step.InDoubtSince = time.Time{}
		step.SendAttempts++
		m.attempt = step.SendAttempts
		return nil
	})
	if errors.Is(err, fault.ErrNotFound) {
		return sendDecision{}, nil
	}
	return m, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// HeldError is SendSMS's answer for a step in doubt whose hold has not passed: nothing was
// sent, and the job is to come back after Wait (the worker snoozes it).
type HeldError struct{ Wait time.Duration }

func (e *HeldError) Error() string {
	return fmt.Sprintf("sms in doubt: held %s for a delivery receipt before sending again", e.Wait)
}

// MessageReference is the two-octet reference of a step's message at an attempt (from 1): the
// first two octets of SHA-256 of both. It goes out as SMPP's user_message_reference and comes
// back in the receipt, so a receipt whose message id was never recorded (the process died
// before it, or the submit's answer was lost) is matched to the attempt that sent it. Two
// octets collide one time in 65,536, and a receipt is matched only among the steps in doubt of
// its own number, so a wrong match takes two steps of one number in doubt at once and a
// collision.
func MessageReference(stepID string, attempt int) uint16 {
	sum := sha256.Sum256([]byte(stepID + "/" + strconv.Itoa(attempt)))
	return binary.BigEndian.Uint16(sum[:2])
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

// ReceiptInDoubt matches a delivery receipt whose message id no step recorded to the step it
// is about, among the SMS steps in doubt (QUEUED with a submit counted) of the receipt's number:
// by the attempt's reference when the SMS centre echoed it, else by the start of the text,
// which for a step in doubt is still the code sealed on its workflow. A match records the
// receipt's message id for the step, clears the sealed code (the SMS centre has it) and
// applies the receipt as Receipt does, so the held job finds the step no longer QUEUED and
// sends nothing. No match is fault.ErrNotFound (another system's message, a purged
// workflow, or a step already settled).
//
// It is idempotent with the submit's own record: a receipt that overtakes its submit's
// answer may settle the step here first; the answer then adds the same message id (kept
// once) and finds the step no longer QUEUED.
func (s *Service) ReceiptInDoubt(ctx context.Context, r DeliveryReceipt) error {
	if r.Status != ReceiptDelivered && r.Status != ReceiptUndeliverable {
		return fault.Invalid("status", "must be %s or %s", ReceiptDelivered, ReceiptUndeliverable)
	}
	if r.ProviderID == "" || (!r.HasReference && r.Text == "") {
		return fault.ErrNotFound // nothing to match by
	}
	// Recorded meanwhile (the submit's answer came after all): the normal path.
	if err := s.Receipt(ctx, r.ProviderID, r.Status); !errors.Is(err, fault.ErrNotFound) {
		return err
	}
	digits := strings.TrimPrefix(r.To, "+")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return fault.ErrNotFound // not a number: no step of ours
	}
	e164 := "+" + digits
	refs, err := s.st.StepsInDoubt(ctx, s.vault.Hash(e164))
	if err != nil {
		return err
	}
	for _, ref := range refs {
		matched, by, err := s.settleInDoubt(ctx, ref, r, e164)
		if err != nil {
			return err
		}
		if matched {
			s.metrics.sent(smsInDoubtResolved)
			s.log.Info("sms in doubt settled by a delivery receipt: not sent again",
				zap.String("workflow", ref.WorkflowID), zap.String("step", ref.StepID), zap.String("matched_by", by), zap.String("status", r.Status))
			return nil
		}
	}
	return fault.ErrNotFound
}

// settleInDoubt locks ref's workflow and, when the receipt is its step's, records it.
func (s *Service) settleInDoubt(ctx context.Context, ref StepRef, r DeliveryReceipt, e164 string) (matched bool, by string, err error) {
	_, err = s.locked(ctx, ref.ClientID, ref.WorkflowID, func(ctx context.Context, st Store, w *Workflow, num string, _ time.Time) error {
		step := w.Step(ref.StepID)
		if step == nil || step.Channel != SMSOTP || step.Status != StepQueued || step.SendAttempts == 0 || num != e164 {
			return nil // settled or superseded since it was listed, or a hash's coincidence
		}
		switch {
		case r.HasReference:
			for a := 1; a <= step.SendAttempts && !matched; a++ {
				matched = MessageReference(step.ID, a) == r.Reference
			}
			by = "reference"
		case w.Code.StepID == step.ID && w.Code.Sealed != nil:
			digits, err := s.keyring.Open(w.Code.Sealed, codeAD(w.ClientID, w.ID, step.ID, num))
			if err != nil {
				return fmt.Errorf("sms step %s: open the code: %w", step.ID, err)
			}
			code := otp.Parse(string(digits))
			matched = TextMatches(r.Text, Text(w.Locale, w.Policy.AppName, code, w.Policy.CodeTTL), code.Digits())
			by = "text"
		}
		if !matched {
			return nil
		}
		if err := st.AddMessages(ctx, w.ClientID, step.ID, []string{r.ProviderID}); err != nil {
			return err
		}
		if w.Code.StepID == step.ID {
			w.Code.Sealed = nil // the SMSC has it: only the hash stays
		}
		if r.Status == ReceiptDelivered {
			step.Status = StepDelivered
		} else {
			step.Status, step.Reason = StepUndeliverable, ReasonUndeliverable
		}
		return nil
	})
	if errors.Is(err, fault.ErrNotFound) {
		return false, "", nil // purged since it was listed
	}
	return matched, by, err
}

// TextMatches reports whether a receipt's text field (the message's first characters, 20 by
// custom, as the SMS centre renders them) is the start of text, whose code is digits. SMS
// centres render it in their own encoding of the receipt (GSM 03.38's or Latin-1's octets,
// sometimes UCS-2's): digits, spaces and ASCII letters read the same in all but UCS-2, so the
// two are compared byte by byte up to the first byte outside ASCII of either, and the code,
// which every text starts with, must be there whole. A centre that echoes UCS-2 octets never
// matches here: its receipts are matched by reference, or not at all (then the hold resends).
func TextMatches(got, text, digits string) bool {
	if digits == "" || !strings.HasPrefix(got, digits) {
		return false
	}
	for i := 0; i < len(got); i++ {
		if i >= len(text) {
			return false
		}
		a, b := got[i], text[i]
		if a >= 0x80 || b >= 0x80 {
			return true
		}
		if a != b {
			return false
		}
	}
	return true
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
