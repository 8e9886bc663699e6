package workflows

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/usage"
	"github.com/mnvhq/mnv/services/verification/internal/otp"
)

// Store is what workflows need of the service's storage.
type Store interface {
	// GetPolicy reads a client's policy; false when it never set one.
	GetPolicy(ctx context.Context, clientID string) (Policy, bool, error)
	// PutPolicy writes a client's policy (validated), by a credential (Principal.Credential()).
	PutPolicy(ctx context.Context, clientID string, p Policy, by string) error
	// TransactionClient is the client of a browser transaction; fault.ErrNotFound for none.
	TransactionClient(ctx context.Context, transactionID string) (string, error)
	// WorkflowOfTransaction is the id of a client's workflow of a browser transaction;
	// fault.ErrNotFound for none.
	WorkflowOfTransaction(ctx context.Context, clientID, transactionID string) (string, error)
	// InsertWorkflow writes a new workflow and its steps; ErrTransactionTaken when its browser
	// transaction has one already.
	InsertWorkflow(ctx context.Context, w Workflow) error
	// LockWorkflow reads a client's workflow with its steps and holds its row until the
	// transaction ends; fault.ErrNotFound for none (another client's included).
	LockWorkflow(ctx context.Context, clientID, id string) (Workflow, error)
	// SaveWorkflow writes what a transaction changed of a locked workflow: its own columns,
	// and each step (inserted when new, updated otherwise).
	SaveWorkflow(ctx context.Context, w Workflow) error
	// AddMessages maps the provider's message ids of an SMS step to it (and to its client, for
	// the receipts that name them alone).
	AddMessages(ctx context.Context, clientID, stepID string, providerIDs []string) error
	// FindMessage finds the client, workflow and step of a provider's message id;
	// fault.ErrNotFound for none.
	FindMessage(ctx context.Context, providerID string) (clientID, workflowID, stepID string, err error)
	// StepsInDoubt lists the SMS steps, of any client, still QUEUED with a submit counted (one
	// may have reached the SMS centre) whose workflow's number has the keyed hash numberHash;
	// read without a lock (each is then locked by its client and checked again).
	StepsInDoubt(ctx context.Context, numberHash []byte) ([]StepRef, error)
	// ClientMessages finds which of the provider's message ids are the client's.
	ClientMessages(ctx context.Context, clientID string, providerIDs []string) (map[string]MessageRef, error)
	// DueWorkflows lists up to limit workflows, of any client, in progress with a step not
	// ended whose deadline is before before; read without a lock (each is then locked by its
	// client and checked again).
	DueWorkflows(ctx context.Context, before time.Time, limit int) ([]WorkflowRef, error)
	// StepUsage reads a client's steps per day of r and UsageDimensions, only those f keeps:
	// the days before the roll-up's watermark from the roll-up, the others from the steps.
	StepUsage(ctx context.Context, clientID string, r usage.Range, f UsageFilter) ([]usage.Row, error)
	// CorrectStepUsage moves the roll-up's counts of the days already rolled up by moves (a
	// step of such a day changed), in the transaction (refused outside one).
	CorrectStepUsage(ctx context.Context, clientID string, moves []UsageMove) error
	// RollUpWorkflowUsage writes the next closed days, at most maxDays, each grace after its
	// end, into the roll-up, in the transaction (refused outside one); it answers the
	// watermark and how many days it wrote.
	RollUpWorkflowUsage(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error)
	// ListWorkflows reads a page of a client's workflows with their steps, newest first, and
	// the count of all that f keeps.
	ListWorkflows(ctx context.Context, clientID string, f ListFilter, limit, offset int64) ([]Workflow, int64, error)
	// EnqueueSMS queues the SMS job of a step in the transaction.
	EnqueueSMS(ctx context.Context, job SMSJob) error
	// LockSMSSpend takes the client's SMS-cap lock until the transaction ends and answers its
	// SMS spend of the UTC day: the settled charges, and an estimate for each SMS step queued
	// and not yet paid (reserved), the steps in play of workflowID left out (its row is held
	// by this transaction, which replaces them). Meaningful inside a transaction only.
	LockSMSSpend(ctx context.Context, clientID, workflowID string) (int64, error)
	// Emit writes events in the transaction (refused outside one).
	Emit(ctx context.Context, evs ...events.Event) error
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// WorkflowRef names a workflow.
type WorkflowRef struct{ ClientID, ID string }

// StepRef names a workflow's step.
type StepRef struct{ ClientID, WorkflowID, StepID string }

// SMSJob is the SMS job's arguments: a step to send, nothing else (the number and the code are
// read from the workflow's row, so no job argument ever holds either).
type SMSJob struct {
	ClientID   string `json:"clientId"`
	WorkflowID string `json:"workflowId"`
	StepID     string `json:"stepId"`
}

// Ports are the channels' adapters; nil SIMSwap and DeviceSwap mean not configured (no
// operator offers the check), a nil Guard allows all.
type Ports struct {
	SMS        SMSProvider
	SIMSwap    SwapChecker
	DeviceSwap SwapChecker
	Guard      PumpingGuard
}

// Service runs workflows.
type Service struct {
	st      Store
	tx      Tx
	vault   *phone.Vault
	keyring *crypto.Keyring
	hasher  *otp.Hasher
	ports   Ports
	ledger  money.Ledger
	metrics *Metrics
	sandbox SandboxInbox
	// hold is how long a step in doubt waits for a receipt before it is sent again.
	hold time.Duration
	log  *zap.Logger
	// Now is the clock (tests move it).
	Now func() time.Time
}

// New returns a Service. keyring is the service's data keyring: it seals a code for its
// sender and derives the key of the codes' hashes.
func New(st Store, tx Tx, vault *phone.Vault, keyring *crypto.Keyring, ledger money.Ledger, ports Ports, log *zap.Logger) *Service {
	return &Service{st: st, tx: tx, vault: vault, keyring: keyring, hasher: otp.NewHasher(keyring), ports: ports, ledger: ledger,
		hold: DefaultInDoubtHold, log: log, Now: time.Now}
}

// DefaultInDoubtHold is how long a step in doubt waits for a delivery receipt before its
// message is sent again (MNV_SMS_IN_DOUBT_HOLD): an SMSC's receipt of a delivered SMS usually
// comes within seconds, and the receipts' recorder asks for an unknown message id for about
// five seconds before it matches the receipt against the steps in doubt.
const DefaultInDoubtHold = 30 * time.Second

// WithInDoubtHold returns s holding a step in doubt for d before it sends it again (0: at
// once, as at-least-once alone would).
func (s *Service) WithInDoubtHold(d time.Duration) *Service {
	c := *s
	c.hold = max(0, d)
	return &c
}

// WithMetrics returns s counting into m.
func (s *Service) WithMetrics(m *Metrics) *Service {
	c := *s
	c.metrics = m
	return &c
}

const table = "workflows"

// now is the clock at PostgreSQL's precision, so a time kept in memory and the same time read
// back agree.
func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// Policy is the client's policy as written, or the defaults' empty policy.
func (s *Service) Policy(ctx context.Context, clientID string) (Policy, error) {
	p, _, err := s.st.GetPolicy(ctx, clientID)
	return p, err
}

// SetPolicy validates and stores a client's policy; by names the credential that wrote it.
func (s *Service) SetPolicy(ctx context.Context, clientID string, p Policy, by string) (Policy, error) {
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	if err := s.st.PutPolicy(ctx, clientID, p, by); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// StartRequest starts a workflow.
type StartRequest struct {
	ClientID     string
	MobileNumber string
	Locale       string
	// TransactionID, when set, is a browser transaction of the client whose page may check
	// the code (CheckCodeOfTransaction).
	TransactionID *string
	// Sandbox: the client asking is a sandbox client (the SANDBOX feature of its principal):
	// its codes go to the sandbox SMSC, so the pumping guard does not ask its allow-list.
	Sandbox bool
	// EndUserAddress is the address of the end user the workflow verifies, when the start
	// gives it: the pumping guard's budget per client and address. Invalid: none.
	EndUserAddress netip.Addr
}

// ErrTransactionTaken is a start naming a browser transaction that has a workflow already.
var ErrTransactionTaken = fault.New(fault.Conflict, "this browser transaction has a workflow already")

// errNotATransaction is a start naming a transaction that is not one of the client's.
var errNotATransaction = fault.Invalid("transactionId", "is not a browser transaction of this account")

// Start starts a workflow for a number: its policy resolved for the number's country, the
// SIM and device swap checked when the policy asks, and its first channel begun.
func (s *Service) Start(ctx context.Context, req StartRequest) (Workflow, error) {
	num, err := phone.Parse(req.MobileNumber)
	if err != nil {
		return Workflow{}, fault.Invalid("mobileNumber", "must be a valid number in E.164 form")
	}
	if len(req.Locale) > 35 {
		return Workflow{}, fault.Invalid("locale", "at most 35 characters (a BCP 47 tag)")
	}
	var transactionID string
	if req.TransactionID != nil {
		if _, err := uuid.Parse(*req.TransactionID); err != nil {
			return Workflow{}, errNotATransaction
		}
		// Another client's transaction is as unknown as one that does not exist.
		owner, err := s.st.TransactionClient(ctx, *req.TransactionID)
		if errors.Is(err, fault.ErrNotFound) || (err == nil && owner != req.ClientID) {
			return Workflow{}, errNotATransaction
		}
		if err != nil {
			return Workflow{}, err
		}
		transactionID = *req.TransactionID
	}
	pol, _, err := s.st.GetPolicy(ctx, req.ClientID)
	if err != nil {
		return Workflow{}, err
	}
	country := num.Region
	if country == "001" {
		country = ""
	}
	now := s.now()
	id := uuid.Must(uuid.NewV7()).String()
	w := Workflow{
		ClientID: req.ClientID, ID: id,
		NumberSealed: s.vault.Seal(num.E164, table, id), NumberHash: s.vault.Hash(num.E164),
		Masked: num.Masked(), Country: country, Locale: req.Locale, TransactionID: transactionID,
		Policy: pol.Resolve(country), Status: InProgress, SIMSwap: SwapNotChecked, DeviceSwap: SwapNotChecked,
		Sandbox: req.Sandbox, Address: budgetAddress(req.EndUserAddress),
		Created: now, Updated: now,
	}
	channels := s.swapGates(ctx, &w, num.E164)
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if w.Status == InProgress {
			if err := s.begin(ctx, st, &w, channels, num.E164, now); err != nil {
				return err
			}
		}
		if err := st.InsertWorkflow(ctx, w); err != nil {
			return err
		}
		return s.emitChanges(ctx, st, w, nil)
	})
	if err != nil {
		return Workflow{}, err
	}
	s.metrics.changed(nil, w)
	return w, nil
}

// budgetAddress is the part of an address the per-address budget keys: an IPv4 address itself,
// an IPv6 address its /64 (one subscriber's usual allocation). Only that is kept.
func budgetAddress(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// swapGate is one swap check of a workflow's start: its policy mode, the port asked, and the
// reasons a BLOCK fails the workflow with.
type swapGate struct {
	name            string // for the log
	mode            SwapMode
	maxAge          time.Duration
	port            SwapChecker
	swapped, failed string // ReasonSIMSwapped, ReasonSIMSwapUnknown; the device's
	result          *SwapResult
	checkedAt       *time.Time
}

// swapGates checks the SIM swap and the device swap when the policy asks, both at once (a
// start waits for the slower, not for the two one after the other), and answers the channels
// the workflow may use. Each check's mode decides alike: a recent swap fails the workflow
// (BLOCK, SIM_SWAPPED or DEVICE_SWAPPED) or skips the silent step (FALLBACK: a swapped SIM's,
// or a moved line's, network identity says nothing of who holds it); REPORT goes on. A check
// that cannot be made is told apart in the answer (UNAVAILABLE: the operator did not answer;
// NOT_OFFERED: no operator offers the API for the number, or none is configured; no checked-at
// time either way) and decided by the mode: BLOCK fails closed (SIM_SWAP_UNKNOWN,
// DEVICE_SWAP_UNKNOWN: a code must not go to a line that may have changed hands when the client
// asked for the swap to block), FALLBACK skips the silent step as for a swap, REPORT goes on.
// With both checks blocking, the SIM's reason is the workflow's.
func (s *Service) swapGates(ctx context.Context, w *Workflow, e164 string) []Channel {
	gates := []swapGate{
		{"sim swap", w.Policy.SIMSwapMode, w.Policy.SIMSwapMaxAge, s.ports.SIMSwap, ReasonSIMSwapped, ReasonSIMSwapUnknown, &w.SIMSwap, &w.SIMCheckedAt},
		{"device swap", w.Policy.DeviceSwapMode, w.Policy.DeviceSwapMaxAge, s.ports.DeviceSwap, ReasonDeviceSwapped, ReasonDeviceSwapUnknown, &w.DeviceSwap, &w.DeviceCheckedAt},
	}
	var wg sync.WaitGroup
	for i := range gates {
		if g := &gates[i]; g.mode != SwapOff && g.mode != "" {
			wg.Go(func() { s.checkSwap(ctx, w.ID, e164, g) })
		}
	}
	wg.Wait()
	channels := slices.Clone(w.Policy.Channels)
	for _, g := range gates {
		if g.mode == SwapOff || g.mode == "" || g.mode == SwapReport || *g.result == SwapNotSwapped {
			continue
		}
		if g.mode == SwapBlock {
			w.Status, w.Reason, w.Ended = Failed, g.swapped, w.Created
			if *g.result != SwapSwapped {
				w.Reason = g.failed
			}
			return nil
		}
		channels = slices.DeleteFunc(channels, func(c Channel) bool { return c == Silent })
	}
	return channels
}

// checkSwap asks g's port and records what it found in the workflow (each gate its own fields,
// so two checks at once write nothing in common).
func (s *Service) checkSwap(ctx context.Context, workflowID, e164 string, g *swapGate) {
	if g.port == nil {
		*g.result = SwapNotOffered
		return
	}
	swapped, at, err := g.port.Check(ctx, e164, g.maxAge)
	var offered interface{ NotOffered() bool }
	switch {
	case errors.As(err, &offered) && offered.NotOffered():
		*g.result = SwapNotOffered
	case err != nil:
		s.log.Warn(g.name+" check failed", zap.String("workflow", workflowID), zap.Error(err))
		*g.result = SwapUnavailable
	case swapped:
		*g.result, *g.checkedAt = SwapSwapped, at.UTC().Truncate(time.Microsecond)
	default:
		*g.result, *g.checkedAt = SwapNotSwapped, at.UTC().Truncate(time.Microsecond) // PostgreSQL's precision, as now
	}
}

// begin starts the first of channels, or fails the workflow when there is none.
func (s *Service) begin(ctx context.Context, st Store, w *Workflow, channels []Channel, e164 string, now time.Time) error {
	if len(channels) == 0 {
		s.end(w, Failed, "", ReasonNoChannelLeft, now)
		return nil
	}
	w.Policy.Channels = channels // what this workflow runs, after the swap gates
	return s.startChannel(ctx, st, w, channels[0], e164, now)
}

// startChannel adds a step of channel as the one in play.
func (s *Service) startChannel(ctx context.Context, st Store, w *Workflow, c Channel, e164 string, now time.Time) error {
	switch c {
	case Silent:
		s.addStep(w, Step{Channel: Silent, Status: StepPending, Deadline: now.Add(w.Policy.SilentTimeout)}, now)
		return nil
	case SMSOTP:
		return s.sendCode(ctx, st, w, e164, now)
	}
	return fmt.Errorf("workflow %s: unknown channel %q", w.ID, c)
}

func (s *Service) addStep(w *Workflow, step Step, now time.Time) *Step {
	step.ID = uuid.Must(uuid.NewV7()).String()
	step.Seq = len(w.Steps) + 1
	step.Started = now
	if step.ChargeStatus == "" {
		step.ChargeStatus = ChargeNone
	}
	w.Steps = append(w.Steps, step)
	w.StepSeq = step.Seq
	return &w.Steps[len(w.Steps)-1]
}

// sendCode makes a new code and queues its SMS as a new step: the code's keyed hash replaces
// the one in play (the old code stops matching), the code is sealed for the sender, and the
// job commits with them. The pumping guard is asked first; a refusal blocks the step and fails
// the workflow, free.
func (s *Service) sendCode(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error {
	if g := s.ports.Guard; g != nil {
		err := g.Allow(ctx, SMSRequest{ClientID: w.ClientID, Number: e164, Country: w.Country, Sandbox: w.Sandbox, Address: w.Address,
			SpentToday: func(ctx context.Context) (int64, error) { return st.LockSMSSpend(ctx, w.ClientID, w.ID) }})
		if err != nil {
			if errors.Is(err, fault.ErrUnavailable) {
				return err
			}
			s.log.Info("sms blocked by the pumping guard", zap.String("workflow", w.ID), zap.Error(err))
			// The step says which rule refused (COUNTRY_NOT_ALLOWED, PREMIUM_PREFIX, …); a
			// guard that could not look refuses too, as SMS_BLOCKED: it must not let money out.
			reason := ReasonBlocked
			var coded interface{ Code() string }
			if errors.As(err, &coded) && coded.Code() != "" {
				reason = coded.Code()
			}
			step := s.addStep(w, Step{Channel: SMSOTP, Status: StepBlocked, Reason: reason, Deadline: now}, now)
			step.Ended = now
			s.clearCode(w)
			s.end(w, Failed, "", ReasonBlocked, now)
			return nil
		}
	}
	code, err := otp.Generate(w.Policy.CodeLength)
	if err != nil {
		return err
	}
	step := s.addStep(w, Step{Channel: SMSOTP, Status: StepQueued, Deadline: now.Add(w.Policy.SMSTimeout)}, now)
	keyID, sum := s.hasher.Sum(code, otp.Binding{WorkflowID: w.ID, StepID: step.ID, Number: e164})
	w.Code.StepID, w.Code.KeyID, w.Code.Hash = step.ID, keyID, sum
	w.Code.Sealed = s.keyring.Seal([]byte(code.Digits()), codeAD(w.ClientID, w.ID, step.ID, e164))
	w.Code.IssuedAt, w.Code.ExpiresAt = now, now.Add(w.Policy.CodeTTL)
	return st.EnqueueSMS(ctx, SMSJob{ClientID: w.ClientID, WorkflowID: w.ID, StepID: step.ID})
}

// codeAD binds a sealed code to its client, workflow, step and number: it opens nowhere else.
func codeAD(clientID, workflowID, stepID, e164 string) []byte {
	return []byte("verification.workflows.code:" + clientID + ":" + workflowID + ":" + stepID + ":" + e164)
}

func (s *Service) clearCode(w *Workflow) {
	w.Code.StepID, w.Code.KeyID, w.Code.Hash, w.Code.Sealed = "", "", nil, nil
}

// end makes the workflow final, and ends its open steps with it (a final workflow has none, so
// the sweep never looks at it again).
func (s *Service) end(w *Workflow, st Status, by Channel, reason string, now time.Time) {
	w.Status, w.DecidedBy, w.Reason, w.Ended = st, by, reason, now
	for i := range w.Steps {
		if w.Steps[i].Ended.IsZero() {
			w.Steps[i].Ended = now
		}
	}
	w.Code.Sealed = nil
	if st != InProgress {
		w.Code.Hash, w.Code.KeyID = nil, ""
	}
}

// advance moves past the step in play to the policy's next channel, or fails the workflow
// when none is left.
func (s *Service) advance(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error {
	cur := w.Current()
	i := slices.Index(w.Policy.Channels, cur.Channel)
	if i < 0 || i+1 >= len(w.Policy.Channels) {
		s.end(w, Failed, "", ReasonNoChannelLeft, now)
		return nil
	}
	return s.startChannel(ctx, st, w, w.Policy.Channels[i+1], e164, now)
}

// Get reads a client's workflow; a step past its deadline is timed out on the way
// (fault.ErrNotFound for none, another client's included).
func (s *Service) Get(ctx context.Context, clientID, id string) (Workflow, error) {
	return s.locked(ctx, clientID, id, func(context.Context, Store, *Workflow, string, time.Time) error { return nil })
}

// locked runs fn on the client's workflow, locked, after timing out what is due, and saves
// what changed with its events.
func (s *Service) locked(ctx context.Context, clientID, id string, fn func(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error) (Workflow, error) {
	return s.lockedFrom(ctx, clientID, id, netip.Addr{}, fn)
}

// lockedFrom is locked for a request of the end user's own browser from addr (the page's
// routes, the address as the gateway resolved it behind its trusted proxies): a workflow whose
// start gave no end-user address takes this one, before anything is timed out, so an SMS this
// request or a later one begins is in that address's pumping budget. An address the start gave
// is kept (the client's backend vouched for it).
func (s *Service) lockedFrom(ctx context.Context, clientID, id string, addr netip.Addr, fn func(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error) (Workflow, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Workflow{}, fault.ErrNotFound
	}
	var out, before Workflow
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		w, err := st.LockWorkflow(ctx, clientID, id)
		if err != nil {
			return err
		}
		before = cloneWorkflow(w)
		if !w.Address.IsValid() && !w.Final() {
			w.Address = budgetAddress(addr)
		}
		var e164 string
		if w.NumberSealed != nil { // dropped by the retention only once the workflow ended
			if e164, err = s.vault.Open(w.NumberSealed, table, w.ID); err != nil {
				return err
			}
		}
		now := s.now()
		if err := s.timeouts(ctx, st, &w, e164, now); err != nil {
			return err
		}
		ferr := fn(ctx, st, &w, e164, now)
		if ferr != nil && !keepOnError(ferr) {
			return ferr
		}
		if err := s.save(ctx, st, before, w, now); err != nil {
			return err
		}
		out = w
		return ferr
	})
	if err != nil && !keepOnError(err) {
		return Workflow{}, err
	}
	s.metrics.changed(&before, out)
	return out, err
}

// kept is an error whose transaction still commits what the workflow became (a timeout
// noticed on the way to a 409).
type kept struct{ error }

func (k kept) Unwrap() error { return k.error }

func keepOnError(err error) bool {
	var k kept
	return errors.As(err, &k)
}

// timeouts ends the step in play when its deadline passed: a silent step moves on, an SMS
// step with no code matched expires the workflow.
func (s *Service) timeouts(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error {
	cur := w.Current()
	if w.Final() || cur == nil || now.Before(cur.Deadline) {
		return nil
	}
	switch cur.Channel {
	case Silent:
		if cur.Status != StepPending {
			return nil
		}
		cur.Status, cur.Reason, cur.Ended = StepTimedOut, ReasonStepTimedOut, now
		return s.advance(ctx, st, w, e164, now)
	case SMSOTP:
		if cur.Status == StepQueued || cur.Status == StepSent || cur.Status == StepDelivered || cur.Status == StepUndeliverable {
			cur.Reason, cur.Ended = ReasonStepTimedOut, now
			if cur.Status == StepQueued {
				cur.Status = StepSuperseded
			}
			s.clearCode(w)
			s.end(w, Expired, "", ReasonStepTimedOut, now)
		}
	}
	return nil
}

func (s *Service) save(ctx context.Context, st Store, before, w Workflow, now time.Time) error {
	if equalWorkflow(before, w) {
		return nil
	}
	w.Updated = now
	if err := st.SaveWorkflow(ctx, w); err != nil {
		return err
	}
	// A step of a day already rolled up that moved (a late receipt, a charge settled on a
	// retry) moves its count in the roll-up in this same transaction.
	if moves := usageMoves(before, w, now); len(moves) > 0 {
		if err := st.CorrectStepUsage(ctx, w.ClientID, moves); err != nil {
			return err
		}
	}
	return s.emitChanges(ctx, st, w, &before)
}

// emitChanges writes verification.step for each step whose status changed since before (every
// step of a new workflow), and verification.workflow.completed when the workflow became final.
func (s *Service) emitChanges(ctx context.Context, st Store, w Workflow, before *Workflow) error {
	var evs []events.Event
	for _, step := range w.Steps {
		if before != nil {
			if old := before.Step(step.ID); old != nil && old.Status == step.Status {
				continue
			}
		}
		ev, err := events.New(w.ClientID, events.VerificationStep, events.VerificationStepData{
			WorkflowID: w.ID, StepID: step.ID, Seq: step.Seq, Channel: string(step.Channel), Status: string(step.Status),
			Reason: optional(step.Reason), MobileNumber: w.Masked, Country: w.Country, Charged: settled(step),
			SIMSwap: string(w.SIMSwap), SIMCheckedAt: optionalTime(w.SIMCheckedAt),
			DeviceSwap: string(w.DeviceSwap), DeviceCheckedAt: optionalTime(w.DeviceCheckedAt),
		}, s.Now())
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	if w.Final() && (before == nil || !before.Final()) {
		ev, err := events.New(w.ClientID, events.WorkflowCompleted, events.WorkflowCompletedData{
			WorkflowID: w.ID, Status: string(w.Status), DecidedBy: optional(string(w.DecidedBy)), Reason: optional(w.Reason),
			MobileNumber: w.Masked, Country: w.Country, SIMSwap: string(w.SIMSwap), SIMCheckedAt: optionalTime(w.SIMCheckedAt),
			DeviceSwap: string(w.DeviceSwap), DeviceCheckedAt: optionalTime(w.DeviceCheckedAt),
			Charged: w.Charged(),
		}, s.Now())
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil
	}
	return st.Emit(ctx, evs...)
}

func settled(s Step) int64 {
	if s.ChargeStatus == ChargeSettled {
		return s.Charged
	}
	return 0
}

func optionalTime(t time.Time) *events.Time {
	if t.IsZero() {
		return nil
	}
	et := events.Time(t)
	return &et
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SweepEvery is how often the sweep looks for deadlines passed: a step's timeout is seconds
// to minutes, so an expiry is seen within seconds of it.
const SweepEvery = 5 * time.Second

// sweepBatch is how many due workflows one pass of the sweep takes.
const sweepBatch = 100

// SweepOnce times out the steps whose deadline passed with nobody reading their workflow (a
// silent step nobody answered moves on, an SMS step nobody checked expires its workflow, with
// its events), up to a batch, and answers how many workflows it looked at.
func (s *Service) SweepOnce(ctx context.Context) (int, error) {
	due, err := s.st.DueWorkflows(ctx, s.now(), sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, r := range due {
		if _, err := s.Get(ctx, r.ClientID, r.ID); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// Sweep runs SweepOnce every interval until ctx ends; a full batch runs the next at once.
func (s *Service) Sweep(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := s.SweepOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("workflow sweep failed", zap.Error(err))
		}
		if n == sweepBatch && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SilentOutcome is what the silent step's verification answered.
type SilentOutcome struct {
	// Status is the verify's: VERIFIED, NOT_VERIFIED, UNDETERMINED or EXPIRED.
	Status         string
	Reason         string
	VerificationID string
	// Charged is what the verification was charged (its own debit; 0 for an outcome nobody
	// pays for, such as UNDETERMINED), and BalanceAfter the balance it left: the step shows
	// them, the ledger is not asked again.
	Charged      int64
	BalanceAfter *int64
}

// ErrNoSilentStep is a silent outcome for a workflow whose step in play is not a silent one
// waiting for it.
var ErrNoSilentStep = fault.New(fault.Conflict, "the workflow has no silent step waiting for a blob")

// SilentResult records the outcome of the silent step's verification: VERIFIED or NOT_VERIFIED
// decide the workflow; anything else moves on to the next channel.
func (s *Service) SilentResult(ctx context.Context, clientID, id string, o SilentOutcome) (Workflow, error) {
	return s.locked(ctx, clientID, id, func(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error {
		cur := w.Current()
		if w.Final() || cur == nil || cur.Channel != Silent || cur.Status != StepPending {
			return kept{ErrNoSilentStep}
		}
		cur.VerificationID, cur.Reason, cur.Ended = o.VerificationID, o.Reason, now
		if o.Charged > 0 {
			// Paid by the verification's own debit: recorded here only so the workflow's answer
			// and events tell the whole cost (SpentToday counts SMS steps only).
			cur.ChargeStatus, cur.Charged, cur.BalanceAfter = ChargeSettled, o.Charged, o.BalanceAfter
		}
		switch o.Status {
		case "VERIFIED":
			cur.Status = StepVerified
			s.end(w, Verified, Silent, ReasonNetworkVerified, now)
		case "NOT_VERIFIED":
			cur.Status = StepNotVerified
			s.end(w, NotVerified, Silent, ReasonNumberMismatch, now)
		case "EXPIRED":
			cur.Status = StepExpired
			return s.advance(ctx, st, w, e164, now)
		default:
			cur.Status = StepUndetermined
			return s.advance(ctx, st, w, e164, now)
		}
		return nil
	})
}

// SubmitSilent verifies the silent step's blob with verify (a verify of the workflow's number,
// charged as one, run outside any transaction of the workflow: it has its own) and records its
// outcome. A workflow whose step in play is not a silent one waiting is ErrNoSilentStep before
// anything is verified.
func (s *Service) SubmitSilent(ctx context.Context, clientID, id string, verify func(ctx context.Context, e164 string) (SilentOutcome, error)) (Workflow, error) {
	w, err := s.Get(ctx, clientID, id)
	if err != nil {
		return Workflow{}, err
	}
	if cur := w.Current(); w.Final() || cur == nil || cur.Channel != Silent || cur.Status != StepPending {
		return Workflow{}, ErrNoSilentStep
	}
	e164, err := s.vault.Open(w.NumberSealed, table, w.ID)
	if err != nil {
		return Workflow{}, err
	}
	o, err := verify(ctx, e164)
	if err != nil {
		return Workflow{}, err
	}
	return s.SilentResult(ctx, clientID, id, o)
}

// maxTyped bounds what a user may type as a code (the API's code field).
const maxTyped = 32

// ErrNoCode is a check or a resend of a workflow with no code in play.
var ErrNoCode = fault.New(fault.Conflict, "the workflow has no code in play")

// ErrFinal is a check or a resend of a workflow that ended.
var ErrFinal = fault.New(fault.Conflict, "the workflow has ended")

// CheckCode checks a code typed by the user. The workflow's row is held for the check, so of
// two concurrent checks of the right code one matches and the other finds the workflow
// VERIFIED (ErrFinal); every wrong code is counted in the same transaction. A wrong code is
// not an error: the answer is the workflow, with one attempt fewer, or FAILED after the last.
func (s *Service) CheckCode(ctx context.Context, clientID, id, typed string) (Workflow, error) {
	if typed == "" || len(typed) > maxTyped {
		// Far longer than any code (10 digits), so the bound tells a guesser nothing.
		return Workflow{}, fault.Invalid("code", "must be 1 to %d characters", maxTyped)
	}
	code := otp.Parse(typed)
	var counted, matchedNumber string
	defer func() { s.metrics.checked(counted) }()
	w, err := s.locked(ctx, clientID, id, func(_ context.Context, _ Store, w *Workflow, e164 string, now time.Time) error {
		if w.Final() {
			return kept{ErrFinal}
		}
		if w.Code.StepID == "" || w.Code.Hash == nil {
			return kept{ErrNoCode}
		}
		rules := w.Policy.Code()
		matched := s.hasher.Matches(code, otp.Binding{WorkflowID: w.ID, StepID: w.Code.StepID, Number: e164}, w.Code.KeyID, w.Code.Hash)
		outcome, attempts := rules.Decide(w.codeState(), matched, now)
		w.Code.Attempts = attempts
		counted = checkOutcomes[outcome-1]
		step := w.Step(w.Code.StepID)
		switch outcome {
		case otp.Matched:
			step.Status, step.Reason, step.Ended = StepVerified, ReasonCodeMatched, now
			s.clearCode(w)
			s.end(w, Verified, SMSOTP, ReasonCodeMatched, now)
			matchedNumber = e164
		case otp.Mismatch:
			step.Reason = ReasonCodeMismatch
		case otp.Exhausted:
			step.Status, step.Reason, step.Ended = StepFailed, ReasonTooManyAttempts, now
			s.clearCode(w)
			s.end(w, Failed, SMSOTP, ReasonTooManyAttempts, now)
		case otp.Expired:
			step.Status, step.Reason, step.Ended = StepExpired, ReasonCodeExpired, now
			s.clearCode(w)
			s.end(w, Expired, SMSOTP, ReasonCodeExpired, now)
		}
		return nil
	})
	// A code checked OK is its prefix's conversion: without it every prefix would look like
	// an attack to the guard. Counted once the match is committed.
	if err == nil && matchedNumber != "" && s.ports.Guard != nil {
		s.ports.Guard.Verified(ctx, matchedNumber)
	}
	return w, err
}

// CheckCodeOfTransaction checks a code typed on the page of a browser transaction of the
// client (the page's origin checked by the caller): the transaction's workflow, as
// CheckCode. A transaction without a workflow is fault.ErrNotFound.
func (s *Service) CheckCodeOfTransaction(ctx context.Context, clientID, transactionID, typed string) (Workflow, error) {
	id, err := s.ofTransaction(ctx, clientID, transactionID)
	if err != nil {
		return Workflow{}, err
	}
	return s.CheckCode(ctx, clientID, id, typed)
}

// ListFilter narrows a client's list of workflows; nil is any.
type ListFilter struct {
	Status  *string
	Channel *string // a step of this channel was taken
	Country *string
}

// List reads a page of the client's workflows, newest first, as they are stored: one whose
// deadline passed unread shows IN_PROGRESS until the sweep or a read times it out (seconds).
func (s *Service) List(ctx context.Context, clientID string, f ListFilter, limit, offset int64) ([]Workflow, int64, error) {
	switch {
	case f.Status != nil && !slices.Contains([]Status{InProgress, Verified, NotVerified, Failed, Expired}, Status(*f.Status)):
		return nil, 0, fault.Invalid("status", "must be IN_PROGRESS, VERIFIED, NOT_VERIFIED, FAILED or EXPIRED")
	case f.Channel != nil && !slices.Contains([]Channel{Silent, SMSOTP}, Channel(*f.Channel)):
		return nil, 0, fault.Invalid("channel", "must be SILENT or SMS_OTP")
	case f.Country != nil && !countryCode.MatchString(*f.Country):
		return nil, 0, fault.Invalid("country", "must be an ISO 3166-1 alpha-2 code, such as GB")
	}
	return s.st.ListWorkflows(ctx, clientID, f, limit, offset)
}

var countryCode = regexp.MustCompile(`^[A-Z]{2}$`)

// GetOfTransaction reads the workflow of a browser transaction of the client (the page's
// origin checked by the caller), as Get: the page learns whether a code is in play without its
// backend relaying it. A transaction without a workflow is fault.ErrNotFound.
// The page's address (pageAddr: the end user's browser, invalid when unknown) becomes the
// workflow's end-user address when its start gave none (lockedFrom).
func (s *Service) GetOfTransaction(ctx context.Context, clientID, transactionID string, pageAddr netip.Addr) (Workflow, error) {
	id, err := s.ofTransaction(ctx, clientID, transactionID)
	if err != nil {
		return Workflow{}, err
	}
	return s.lockedFrom(ctx, clientID, id, pageAddr, func(context.Context, Store, *Workflow, string, time.Time) error { return nil })
}

// ResendOfTransaction sends a new code for the workflow of a browser transaction of the
// client, as Resend: the same cooldown and cap, counted on the workflow, whichever route asks.
// The page's address is the workflow's end-user address when its start gave none, so the
// pumping budget per address applies to the page's resends without the client passing it.
func (s *Service) ResendOfTransaction(ctx context.Context, clientID, transactionID string, pageAddr netip.Addr) (Workflow, error) {
	id, err := s.ofTransaction(ctx, clientID, transactionID)
	if err != nil {
		return Workflow{}, err
	}
	return s.resend(ctx, clientID, id, pageAddr)
}

// ofTransaction finds the workflow a browser transaction was started for.
func (s *Service) ofTransaction(ctx context.Context, clientID, transactionID string) (string, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return "", fault.ErrNotFound
	}
	return s.st.WorkflowOfTransaction(ctx, clientID, transactionID)
}

// ErrCodeSending is a resend asked while the code in play is still being sent: its SMS job
// has begun (its charge is pending or paid, or a submit was made) and the step is not SENT yet.
// Superseding it then could leave a paid message unsent, or put two codes on the handset for
// one resend; the caller asks again in a moment (429 with Retry-After, as the cooldown).
var ErrCodeSending = fault.Limited("the code is still being sent; ask for another once it has been sent", sendingRetryAfter)

// sendingRetryAfter is what a resend refused by ErrCodeSending is told to wait: an SMS job
// charges and submits within seconds when the SMS centre and accounts answer.
const sendingRetryAfter = 5 * time.Second

// sending reports whether a QUEUED SMS step's job is under way: its charge asked for (the
// job's first transaction makes it PENDING) or paid, or a submit counted. Until then a resend
// may supersede it safely: the job, under the workflow's lock, finds it superseded and stops.
// A charge that ended otherwise (voided, rejected) leaves the job nothing to do either.
func sending(s Step) bool {
	return s.Status == StepQueued && (s.ChargeStatus == ChargePending || s.ChargeStatus == ChargeSettled || s.SendAttempts > 0)
}

// Resend sends a new code: within the cooldown 429 with the time left, past the cap 409, while
// the code in play is still being sent 429 (ErrCodeSending).
func (s *Service) Resend(ctx context.Context, clientID, id string) (Workflow, error) {
	return s.resend(ctx, clientID, id, netip.Addr{})
}

func (s *Service) resend(ctx context.Context, clientID, id string, pageAddr netip.Addr) (Workflow, error) {
	return s.lockedFrom(ctx, clientID, id, pageAddr, func(ctx context.Context, st Store, w *Workflow, e164 string, now time.Time) error {
		if w.Final() {
			return kept{ErrFinal}
		}
		cur := w.Current()
		if cur == nil || cur.Channel != SMSOTP || w.Code.StepID == "" {
			return kept{ErrNoCode}
		}
		err := w.Policy.Code().MayResend(w.codeState(), now)
		var cd *otp.CooldownError
		switch {
		case errors.As(err, &cd):
			return kept{fault.Limited("a new code can be sent later", cd.RetryAfter)}
		case errors.Is(err, otp.ErrResendCap):
			return kept{fault.New(fault.Conflict, "no resends left")}
		case err != nil:
			return err
		}
		if old := w.Step(w.Code.StepID); old != nil {
			if old.Status == StepQueued {
				if sending(*old) {
					return kept{ErrCodeSending}
				}
				// Its job has not begun: it will find the step superseded and neither charge
				// nor send anything.
				old.Status, old.Reason = StepSuperseded, ReasonSuperseded
			}
			old.Ended = now // its receipt may still come and say whether it was delivered
		}
		w.Code.Resends++
		return s.sendCode(ctx, st, w, e164, now)
	})
}

func (w Workflow) codeState() otp.State {
	return otp.State{IssuedAt: w.Code.IssuedAt, ExpiresAt: w.Code.ExpiresAt, Attempts: w.Code.Attempts, Resends: w.Code.Resends}
}

func cloneWorkflow(w Workflow) Workflow {
	c := w
	c.Steps = slices.Clone(w.Steps)
	return c
}

// equalWorkflow compares what SaveWorkflow writes.
func equalWorkflow(a, b Workflow) bool {
	if a.Status != b.Status || a.DecidedBy != b.DecidedBy || a.Reason != b.Reason || a.StepSeq != b.StepSeq ||
		a.Code.StepID != b.Code.StepID || a.Code.Attempts != b.Code.Attempts || a.Code.Resends != b.Code.Resends || a.Address != b.Address ||
		(a.Code.Sealed == nil) != (b.Code.Sealed == nil) || (a.Code.Hash == nil) != (b.Code.Hash == nil) ||
		len(a.Steps) != len(b.Steps) || !slices.Equal(a.Policy.Channels, b.Policy.Channels) {
		return false
	}
	for i := range a.Steps {
		x, y := a.Steps[i], b.Steps[i]
		if x.Status != y.Status || x.Reason != y.Reason || x.ChargeStatus != y.ChargeStatus || x.Charged != y.Charged ||
			x.VerificationID != y.VerificationID || !x.Ended.Equal(y.Ended) || x.SendAttempts != y.SendAttempts ||
			!x.InDoubtSince.Equal(y.InDoubtSince) {
			return false
		}
	}
	return true
}
