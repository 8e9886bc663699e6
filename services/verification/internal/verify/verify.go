// Package verify decides a verification: it opens the sealed blob, checks that it belongs to
// the client, is unused and unexpired, compares the numbers, and charges a definitive outcome.
//
// A charge never exists without its verification: the verification is recorded (PENDING, its
// session consumed) before accounts is asked to debit it, with the verification id as the
// debit's reference; the charge is then settled on the row. If the debit is refused the row is
// marked REJECTED and the session released; if its outcome is unknown (accounts down, a crash),
// the row stays PENDING and Reconcile settles it later with the same reference, which accounts
// charges at most once.
//
// Every final outcome writes one verification.completed event in the transaction that makes it
// final: the record of an outcome nobody pays for, the settle of a charged one, the reject of a
// refused one. A step that finds the row final already (a retry, the reconciler) writes
// nothing, so a verification has exactly one event.
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/charge"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/groupcommit"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/rowid"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// Config sets the limits.
type Config struct {
	// NumberAttemptsPerHour bounds a client's verifications of one number; 0 disables. It is
	// counted per client, never across clients: free verifies (UNDETERMINED, EXPIRED) of a
	// stranger's number would otherwise lock that number out for everyone.
	NumberAttemptsPerHour int
	// SettleAfter is how old a PENDING verification must be before Reconcile settles it.
	SettleAfter time.Duration
	// Traced makes each batch of records and settles a span linked to its verifies' requests
	// (the app sets it from tracing.Enabled); off, batches pay nothing for it.
	Traced bool
}

// Store is what verify needs of the service's storage.
type Store interface {
	// RecordVerifications consumes the client's unused session of each verification and records
	// it, in one statement; recorded[i].OK is false when vs[i]'s session is missing, another
	// client's, or used, and recorded[i].Limited when counted[i] and its client verified its
	// number limit.Max times since limit.Since (counting the earlier counted ones of vs), which
	// records nothing. No two of vs name one session.
	RecordVerifications(ctx context.Context, vs []domain.Verification, limit domain.NumberLimit, counted []bool) (recorded []domain.Recorded, err error)
	// SessionVerification is the verification that used a client's session: fault.ErrNotFound
	// for no such session of the client, nil when the session is unused.
	SessionVerification(ctx context.Context, clientID, sessionID string) (*domain.Verification, error)
	// SettleVerifications records the charge of each PENDING verification and writes its
	// completed event (and, for a VERIFIED one, Connect's record of the number), atomically
	// (in the transaction the store is in, if any); settled[i] is false, and nothing written
	// for it, when it was settled already.
	SettleVerifications(ctx context.Context, ss []domain.Settlement) (settled []bool, err error)
	// RejectVerification marks a client's PENDING verification REJECTED and releases its
	// session; rejected is false when it was no longer PENDING.
	RejectVerification(ctx context.Context, clientID, id string) (rejected bool, err error)
	GetVerification(ctx context.Context, clientID, id string) (domain.Verification, error)
	ListVerifications(ctx context.Context, clientID string, f domain.VerificationFilter, limit, offset int64) (domain.Page[domain.Verification], error)
	NumberAttempts(ctx context.Context, clientID string, hash []byte, since time.Time) (n int, oldest *time.Time, err error)
	// StalePending reads PENDING verifications older than before that no other replica holds,
	// and holds them until the transaction ends.
	StalePending(ctx context.Context, before time.Time, limit int) ([]domain.Verification, error)
	// Emit writes events in the transaction the store is in (refused outside one).
	Emit(ctx context.Context, evs ...events.Event) error
}

// SessionStore reads a session (NETWORK_API: its method, status and sealed token).
type SessionStore interface {
	GetSession(ctx context.Context, clientID, id string) (domain.Session, error)
	// RefusedAnswer is the outcome and reason the operator gave a verification of the session
	// and number (by hash) whose charge was refused; fault.ErrNotFound when none was.
	RefusedAnswer(ctx context.Context, clientID, sessionID string, numberHash []byte) (outcome domain.Status, reason string, err error)
}

// NetworkAPI calls an operator's CAMARA Number Verification API; operatorapi.Clients is one.
type NetworkAPI interface {
	Has(operatorID string) bool
	VerifyNumber(ctx context.Context, operatorID, accessToken, e164, correlator string) (operatorapi.Answer, error)
	// TakesHash and Shares tell whether the operator's /verify accepts hashedPhoneNumber, and
	// whether its phoneNumberShare is used, which VerifyHash and ShareNumber need.
	TakesHash(operatorID string) bool
	Shares(operatorID string) bool
	VerifyHash(ctx context.Context, operatorID, accessToken, sha256Hex, correlator string) (operatorapi.Answer, error)
	ShareNumber(ctx context.Context, operatorID, accessToken, correlator string) (operatorapi.Answer, error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Service verifies numbers.
type Service struct {
	st     Store
	tx     Tx
	ops    *operators.Registry
	sealer *seal.Sealer
	vault  *phone.Vault
	ledger money.Ledger
	cfg    Config
	log    *zap.Logger
	now    func() time.Time

	// Metrics, when set, count settled verifications.
	Metrics *Metrics

	// records and settles group-commit the request path's writes (see New) through batchSt
	// and batchTx (WithBatchStore).
	records *groupcommit.Batcher[recordItem, domain.Recorded]
	settles *groupcommit.Batcher[domain.Settlement, bool]
	batchSt Store
	batchTx Tx

	// sessions and network serve NETWORK_API (WithNetworkAPI); networkTimeout bounds its call.
	sessions       SessionStore
	network        NetworkAPI
	networkTimeout time.Duration
}

// WithNetworkAPI returns a copy of s that also verifies NETWORK_API sessions: sessions reads
// them, network calls the operators, each call bounded by timeout. The copy has batches of its
// own, so what is set on it later (WithBatchStore, Metrics) is its own, as sessions'
// WithNetworkAPI leaves its receiver as it was.
func (s *Service) WithNetworkAPI(sessions SessionStore, network NetworkAPI, timeout time.Duration) *Service {
	c := *s
	c.sessions, c.network, c.networkTimeout = sessions, network, timeout
	c.batch()
	return &c
}

// WithBatchStore makes s write its request path's batches (records, settles) through st and
// tx instead of New's: a pool of their own (pg.PoolConfig.Batches), where PostgreSQL plans
// their statements once and no read waits for a connection ahead of a batch.
func (s *Service) WithBatchStore(st Store, tx Tx) *Service {
	s.batchSt, s.batchTx = st, tx
	return s
}

// writeShards is how many batches of each kind (records, settles) may be in flight at once in
// one process. One: a batch costs mostly per batch (a round trip, a commit), so the fewer in
// flight, the more each carries. With four, make bench's verifies settled 1.8 a batch; with
// one, 4.8, at 1.5 times the verifies a second (issue 15).
const writeShards = 1

// BatchConns is how many connections the request path's batches hold at most: one for each
// shard of records and of settles (WithBatchStore's pool needs no more).
const BatchConns = 2 * writeShards

// New returns a Service.
//
// Its request path group-commits its writes (platform/groupcommit, as accounts does its
// debits): the records of concurrent verifies share one statement, and their settles another,
// which also inserts their jobs. Each verification keeps its own row,
// charge and event. A session always lands on the same shard of records and a verification on
// the same shard of settles (with more than one shard), so two batches of a process never wait
// on each other's rows.
func New(cfg Config, d Deps) *Service {
	s := &Service{
		st: d.Store, tx: d.Tx, batchSt: d.Store, batchTx: d.Tx, ops: d.Operators, sealer: d.Sealer, vault: d.Vault,
		ledger: d.Ledger, cfg: cfg, log: d.Log, now: time.Now, Metrics: d.Metrics,
	}
	s.batch()
	return s
}

// Deps are what a Service works with.
type Deps struct {
	// Store and Tx reach the verifications, outside and inside a transaction.
	Store Store
	Tx    Tx
	// Operators is the registry a session's operator is looked up in.
	Operators *operators.Registry
	// Sealer opens the sessions' blobs; Vault seals the numbers for the rows.
	Sealer *seal.Sealer
	Vault  *phone.Vault
	// Ledger is debited through platform/charge.
	Ledger money.Ledger
	Log    *zap.Logger
	// Metrics, when set, count settled verifications.
	Metrics *Metrics
}

// batch makes s's group commits of records and settles, bound to s.
func (s *Service) batch() {
	config := func(kind string) groupcommit.Config {
		c := groupcommit.Config{Shards: writeShards, Observe: func(n int) { s.Metrics.batch(kind, n) }}
		if s.cfg.Traced {
			c.Span = kind + " batch"
		}
		return c
	}
	s.records = groupcommit.New(config("record"), s.recordBatch)
	s.settles = groupcommit.New(config("settle"), s.settleBatch)
}

// recordItem is a verification to record, with its event when its outcome is final already;
// counted when its number's limit is the record's to enforce (NumberAttemptsPerHour).
type recordItem struct {
	v       domain.Verification
	ev      *events.Event
	counted bool
}

// recordBatch records a batch of verifications in one statement, and writes the events of the
// final ones recorded in its transaction; a batch without any (every charged outcome: their
// events come with the settle) needs none.
func (s *Service) recordBatch(ctx context.Context, items []recordItem) ([]domain.Recorded, error) {
	out := make([]domain.Recorded, len(items))
	// A second verify of one session in the batch (a double submit) is not recorded, as it would
	// not be once the first committed.
	idx := make([]int, 0, len(items))
	vs := make([]domain.Verification, 0, len(items))
	counted := make([]bool, 0, len(items))
	seen := make(map[string]bool, len(items))
	final := false
	for i, it := range items {
		if seen[it.v.SessionID] {
			continue
		}
		seen[it.v.SessionID] = true
		idx, vs, counted = append(idx, i), append(vs, it.v), append(counted, it.counted)
		final = final || it.ev != nil
	}
	limit := domain.NumberLimit{Max: s.cfg.NumberAttemptsPerHour, Since: s.now().Add(-numberWindow)}
	write := func(ctx context.Context, st Store) error {
		rec, err := st.RecordVerifications(ctx, vs, limit, counted)
		if err != nil {
			return err
		}
		var evs []events.Event
		for j, r := range rec {
			out[idx[j]] = r
			if ev := items[idx[j]].ev; r.OK && ev != nil {
				evs = append(evs, *ev)
			}
		}
		if len(evs) == 0 {
			return nil
		}
		return st.Emit(ctx, evs...)
	}
	if !final {
		return out, write(ctx, s.batchSt)
	}
	return out, s.batchTx.InTx(ctx, write)
}

// settleBatch settles a batch of charged verifications, their jobs with them (one statement).
func (s *Service) settleBatch(ctx context.Context, items []domain.Settlement) ([]bool, error) {
	return s.batchSt.SettleVerifications(ctx, items)
}

// Request is a verify request (POST /v1/api/verify).
type Request struct {
	MobileNumber string
	Blob         string
	OperatorID   string
	ServiceType  string
}

// Result is a decided verification, with the number as the caller gave it, normalised.
type Result struct {
	Verification domain.Verification
	MobileNumber string
}

// Verify decides req for the client of p.
func (s *Service) Verify(ctx context.Context, p principal.Principal, req Request) (Result, error) {
	num, err := s.validate(p, req)
	if err != nil {
		return Result{}, err
	}
	hash := s.vault.Hash(num.E164)
	claims, err := s.sealer.Open(req.Blob)
	if err != nil || claims.ClientID != p.ClientID {
		// Another client's blob is as unknown as a forged one: never say it exists.
		return Result{}, fault.Invalid("encryptedMobileNumber", "is not a sealed session of this account")
	}
	// A session without an operator (no network identified the phone) can only be UNDETERMINED,
	// whatever operator the caller names.
	if claims.OperatorID != "" && claims.OperatorID != req.OperatorID {
		return Result{}, fault.Invalid("operatorId", "does not match the operator of the sealed session")
	}

	var (
		outcome domain.Status
		reason  string
	)
	switch {
	case req.ServiceType == string(operators.MethodNetworkAPI):
		sess, err := s.networkSession(ctx, p.ClientID, claims.SessionID, req)
		if err != nil {
			return Result{}, err
		}
		// The operator's call spends the session's single-use token: the number's limit is
		// asked before it. Header enrichment leaves it to the record (run).
		if err := s.checkNumberLimit(ctx, p.ClientID, hash); err != nil {
			return Result{}, err
		}
		ask := func(ctx context.Context, token, correlator string) (operatorapi.Answer, error) {
			return s.network.VerifyNumber(ctx, req.OperatorID, token, num.E164, correlator)
		}
		if _, outcome, reason, err = s.askOperator(ctx, sess, claims, hash, requestid.From(ctx), ask); err != nil {
			return Result{}, err
		}
	case claims.Number == "" && claims.OperatorID != "":
		// No number: maybe a NETWORK_API session, which header enrichment cannot verify.
		if err := s.checkMethod(ctx, p.ClientID, claims.SessionID, operators.MethodHeaderEnrichment); err != nil {
			return Result{}, err
		}
		fallthrough
	default:
		outcome, reason = decide(claims, num.E164, s.now())
	}
	v := domain.Verification{
		ID: rowid.New(), ClientID: p.ClientID, SessionID: claims.SessionID, Outcome: outcome, Reason: reason,
		OperatorID: req.OperatorID, ServiceType: req.ServiceType, NumberHash: hash,
	}
	v.NumberSealed = s.vault.Seal(num.E164, "verifications", v.ID)
	v.Status = outcome
	if domain.Charged(outcome) {
		v.Status = domain.StatusPending
	}
	// A NETWORK_API verify asked for the number's limit before the operator's call.
	v, err = s.run(ctx, p, v, num.Masked(), req.ServiceType != string(operators.MethodNetworkAPI))
	if err != nil {
		return Result{}, err
	}
	return Result{Verification: v, MobileNumber: num.E164}, nil
}

// run records v (its session consumed), then charges it when its outcome is charged; a retry of
// a verification whose charge did not settle resumes it. With countNumber, the record enforces
// the number's limit (NumberAttemptsPerHour), in its own statement: a verification over it is
// RATE_LIMITED, nothing recorded, its session unused.
func (s *Service) run(ctx context.Context, p principal.Principal, v domain.Verification, masked string, countNumber bool) (domain.Verification, error) {
	item := recordItem{v: v, counted: countNumber}
	if v.Status != domain.StatusPending {
		// Nobody pays for this outcome: it is final at once, and its event comes with its record.
		ev, err := s.completed(v, masked, v.Status, v.Reason, nil)
		if err != nil {
			return v, err
		}
		item.ev = &ev
	}
	rec, err := s.records.Do(ctx, v.SessionID, item)
	if err != nil {
		return v, err
	}
	if rec.Limited {
		return v, s.numberLimited(rec.Oldest)
	}
	recorded, created := rec.OK, rec.CreatedAt
	if recorded {
		v.CreatedAt = created
		if v.Status != domain.StatusPending {
			s.Metrics.settle(v.Status) // an outcome nobody pays for is final at once
		}
	} else {
		// The session is used, unknown, or this is a retry of a verification whose charge did
		// not settle: resume that one.
		prev, err := s.st.SessionVerification(ctx, p.ClientID, v.SessionID)
		switch {
		case errors.Is(err, fault.ErrNotFound):
			return v, fault.Invalid("encryptedMobileNumber", "is not a sealed session of this account")
		case err != nil:
			return v, err
		case prev == nil:
			return v, domain.ErrAlreadyUsed
		case prev.Status != domain.StatusPending || string(prev.NumberHash) != string(v.NumberHash) ||
			prev.OperatorID != v.OperatorID || prev.ServiceType != v.ServiceType || productOf(*prev) != productOf(v):
			// The blob is this client's (checked above), so is the verification it names.
			return v, domain.UsedBy(prev.ID)
		}
		v = *prev
	}
	if v.Status == domain.StatusPending {
		// The charge completes even if the caller goes away: the row is already consumed.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if v, err = s.settle(cctx, s.requestBooks(), v, masked); err != nil {
			return v, err
		}
	}
	return v, nil
}

// productOf is v's product, VERIFY when unset.
func productOf(v domain.Verification) string {
	if v.Product == "" {
		return domain.ProductVerify
	}
	return v.Product
}

// variantOf is the price variant of v's charge: its service type, or NUMBER_SHARE for a share.
func variantOf(v domain.Verification) string {
	if v.Product == domain.ProductNumberShare {
		return domain.ProductNumberShare
	}
	return v.ServiceType
}

// validate checks the request fields and what the client may use.
func (s *Service) validate(p principal.Principal, req Request) (phone.Number, error) {
	num, err := phone.Parse(req.MobileNumber)
	if err != nil {
		return num, fault.Invalid("mobileNumber", "must be a valid mobile number in E.164 form, like +971501234567")
	}
	if req.Blob == "" {
		return num, fault.Invalid("encryptedMobileNumber", "is required")
	}
	if req.OperatorID == "" {
		return num, fault.Invalid("operatorId", "is required")
	}
	if req.ServiceType == "" {
		return num, fault.Invalid("serviceType", "is required")
	}
	if !p.Has(domain.FeatureVerify) {
		return num, fault.NotEnabled("", "verification is not enabled for this account")
	}
	client := operators.ClientOf(p)
	op, ok := s.ops.Get(req.OperatorID)
	if !ok || !op.EnabledFor(client) {
		return num, fault.NotEnabled("operatorId", "operator %q is not available to this account", req.OperatorID)
	}
	// A method the operator supports and the client enabled, and that mnv can use with it:
	// header enrichment, or the operator's network API when its CAMARA settings are loaded.
	m := operators.Method(req.ServiceType)
	usable := m == operators.MethodHeaderEnrichment ||
		m == operators.MethodNetworkAPI && s.network != nil && s.network.Has(req.OperatorID)
	if !usable || !op.Allows(client, m) {
		return num, fault.NotEnabled("serviceType", "service type %q is not available with operator %q", req.ServiceType, req.OperatorID)
	}
	return num, nil
}

// errBadBlob is the answer to a blob that is not a sealed session of the client.
var errBadBlob = fault.Invalid("encryptedMobileNumber", "is not a sealed session of this account")

// checkMethod refuses a session captured by another method than m.
func (s *Service) checkMethod(ctx context.Context, clientID, sessionID string, m operators.Method) error {
	if s.sessions == nil {
		return nil
	}
	sess, err := s.sessions.GetSession(ctx, clientID, sessionID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		return errBadBlob
	case err != nil:
		return err
	case sess.Method != string(m):
		return fault.Invalid("serviceType", "does not match the method of the sealed session (%s)", sess.Method)
	}
	return nil
}

// networkSession reads the NETWORK_API session a verify of req names.
func (s *Service) networkSession(ctx context.Context, clientID, sessionID string, req Request) (domain.Session, error) {
	if s.sessions == nil || s.network == nil {
		return domain.Session{}, fault.NotEnabled("serviceType", "service type %q is not available with operator %q", req.ServiceType, req.OperatorID)
	}
	sess, err := s.sessions.GetSession(ctx, clientID, sessionID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		return sess, errBadBlob
	case err != nil:
		return sess, err
	case sess.Method != string(operators.MethodNetworkAPI):
		return sess, fault.Invalid("serviceType", "does not match the method of the sealed session (%s)", sess.Method)
	}
	return sess, nil
}

// askFunc is one call of an operator's network API with a session's access token.
type askFunc func(ctx context.Context, accessToken, correlator string) (operatorapi.Answer, error)

// askOperator decides a NETWORK_API verification of sess: ask calls the operator's API
// (/verify, or /device-phone-number) with the session's single-use access token, and its answer
// is mapped by NetworkOutcome; correlator travels as its x-correlator. An expired session is
// EXPIRED without a call; a used one is left to the record (ALREADY_USED, or the resumption of
// its unsettled charge) without a call either, so a retry never spends anything at the
// operator. The operator's silence (5xx, timeout) is 503 with nothing recorded: the session
// stays unused and the verify can be retried.
//
// An answer whose charge was refused (402) spent the single-use token: the retry of the same
// number (numberHash, nil when the number is not known before the call) within the session's
// life, after a top-up, gets that answer again without a call, so it is charged once for what
// the operator said instead of EXPIRED.
func (s *Service) askOperator(ctx context.Context, sess domain.Session, c seal.Claims, numberHash []byte, correlator string, ask askFunc) (ans operatorapi.Answer, outcome domain.Status, reason string, err error) {
	switch {
	case !s.now().Before(c.ExpiresAt):
		return ans, domain.StatusExpired, domain.ReasonSessionExpired, nil
	case sess.UsedAt != nil:
		// The record finds it used: ALREADY_USED, or this verification's unsettled charge.
		return ans, domain.StatusUndetermined, domain.ReasonNoNetworkIdentity, nil
	case sess.Status != domain.Captured || sess.OAuthSealed == nil:
		return ans, domain.StatusUndetermined, domain.ReasonNoNetworkIdentity, nil
	}
	if numberHash != nil {
		switch outcome, reason, err := s.sessions.RefusedAnswer(ctx, sess.ClientID, sess.ID, numberHash); {
		case err == nil:
			s.log.Info("operator network API call: the answer kept from a refused charge", zap.String("operator", c.OperatorID),
				zap.String("outcome", string(outcome)), logging.Request(ctx))
			return ans, outcome, reason, nil
		case !errors.Is(err, fault.ErrNotFound):
			return ans, "", "", err
		}
	}
	token, err := s.sealer.OpenSecret(seal.SecretAccessToken, sess.ID, sess.OAuthSealed)
	if err != nil {
		return ans, "", "", fmt.Errorf("open the access token: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.networkTimeout)
	defer cancel()
	start := s.now()
	ans, err = ask(cctx, string(token), correlator)
	outcome, reason, err = NetworkOutcome(ans, err)
	s.log.Info("operator network API call", zap.String("operator", c.OperatorID), zap.String("x_correlator", correlator),
		zap.Int("status", ans.Status), zap.String("code", ans.Code), zap.String("outcome", string(outcome)),
		zap.Duration("duration", s.now().Sub(start)), zap.NamedError("error", err), logging.Request(ctx))
	return ans, outcome, reason, err
}

// NetworkOutcome maps what an operator's /verify answered to mnv's outcome and reason (the
// CAMARA Number Verification v2 responses): devicePhoneNumberVerified true or false is VERIFIED
// or NOT_VERIFIED (both charged); 403 NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK
// is UNDETERMINED; 401 (the single-use token expired or used up) is EXPIRED; any other refusal
// (403 PERMISSION_DENIED, a 4xx) is UNDETERMINED, OPERATOR_REFUSED. No answer (a 5xx, 429, a
// timeout, an unreadable body: operatorapi.ErrUnavailable) is fault.ErrUnavailable: nothing recorded,
// nothing charged, retryable.
func NetworkOutcome(a operatorapi.Answer, err error) (outcome domain.Status, reason string, _ error) {
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%w: the operator's network API did not answer: %w", fault.ErrUnavailable, err)
	case a.Status == 200 && a.Verified:
		return domain.StatusVerified, domain.ReasonMatch, nil
	case a.Status == 200:
		return domain.StatusNotVerified, domain.ReasonMismatch, nil
	case a.Status == 401:
		return domain.StatusExpired, domain.ReasonTokenExpired, nil
	case a.Status == 403 && a.Code == "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK":
		return domain.StatusUndetermined, domain.ReasonNotAuthenticatedByMobileNetwork, nil
	}
	return domain.StatusUndetermined, domain.ReasonOperatorRefused, nil
}

func (s *Service) checkNumberLimit(ctx context.Context, clientID string, hash []byte) error {
	if s.cfg.NumberAttemptsPerHour <= 0 {
		return nil
	}
	n, oldest, err := s.st.NumberAttempts(ctx, clientID, hash, s.now().Add(-numberWindow))
	if err != nil {
		return err
	}
	if n >= s.cfg.NumberAttemptsPerHour && oldest != nil {
		return s.numberLimited(*oldest)
	}
	return nil
}

// numberWindow is the span over which NumberAttemptsPerHour counts a number's attempts.
const numberWindow = time.Hour

// numberLimited is the answer to a verification over its number's limit, whose oldest counted
// attempt was at oldest: it may be tried again when that one leaves the window.
func (s *Service) numberLimited(oldest time.Time) error {
	return fault.Limited("too many verification attempts for this number", oldest.Add(numberWindow).Sub(s.now()))
}

// decide compares the sealed network number with the number given.
func decide(c seal.Claims, given string, now time.Time) (outcome domain.Status, reason string) {
	switch {
	case !now.Before(c.ExpiresAt):
		return domain.StatusExpired, domain.ReasonSessionExpired
	case c.Number == "":
		return domain.StatusUndetermined, domain.ReasonNoNetworkIdentity
	case c.Number == given:
		return domain.StatusVerified, domain.ReasonMatch
	}
	return domain.StatusNotVerified, domain.ReasonMismatch
}

// within runs fn with a store inside a transaction: a new one (Tx.InTx), or the reconciler's.
type within func(ctx context.Context, fn func(ctx context.Context, st Store) error) error

// pending is a recorded PENDING verification, with its number masked for its event.
type pending struct {
	v      domain.Verification
	masked string
}

// intent is v's charge: its price for the client, once under the verification's own reference.
func intent(v domain.Verification, masked string) charge.Intent[pending] {
	return charge.Intent[pending]{
		Record: pending{v: v, masked: masked},
		Charge: money.Charge{ClientID: v.ClientID, Kind: money.KindVerification, Variant: variantOf(v), Reference: "verification:" + v.ID},
	}
}

// books writes a charge's outcome onto its verification (charge.Books): the request path's
// (settles shared with concurrent requests, a transaction of its own for a refusal) or the
// reconciler's transaction, which holds the rows' locks.
type books struct {
	s      *Service
	inTx   within
	settle func(ctx context.Context, st domain.Settlement) (bool, error)
}

func (s *Service) requestBooks() books {
	return books{s: s, inTx: s.tx.InTx, settle: func(ctx context.Context, st domain.Settlement) (bool, error) {
		return s.settles.Do(ctx, st.ID, st)
	}}
}

// txBooks writes in the transaction st is in.
func (s *Service) txBooks(st Store) books {
	return books{
		s:    s,
		inTx: func(ctx context.Context, fn func(ctx context.Context, st Store) error) error { return fn(ctx, st) },
		settle: func(ctx context.Context, one domain.Settlement) (bool, error) {
			settled, err := st.SettleVerifications(ctx, []domain.Settlement{one})
			if err != nil {
				return false, err
			}
			return settled[0], nil
		},
	}
}

// Settle records the charge on the verification with its completed event (group-committed on
// the request path); a verification settled already writes nothing.
func (b books) Settle(ctx context.Context, p pending, c money.Charged) error {
	ev, err := b.s.completed(p.v, p.masked, p.v.Outcome, p.v.Reason, &c)
	if err != nil {
		return err
	}
	settled, err := b.settle(ctx, domain.Settlement{ID: p.v.ID, ClientID: p.v.ClientID, Charged: c.Amount, BalanceAfter: c.BalanceAfter, Completed: ev})
	if err != nil {
		return err
	}
	if settled {
		b.s.Metrics.settle(p.v.Outcome)
	}
	return nil
}

// Reject marks the verification REJECTED (its session released) with its completed event
// naming the refusal's reason, in one transaction.
func (b books) Reject(ctx context.Context, p pending, refusal error) error {
	ev, err := b.s.completed(p.v, p.masked, domain.StatusRejected, charge.Refusal(refusal), nil)
	if err != nil {
		return err
	}
	var rejected bool
	if err := b.inTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if rejected, err = st.RejectVerification(ctx, p.v.ClientID, p.v.ID); err != nil || !rejected {
			return err
		}
		return st.Emit(ctx, ev)
	}); err != nil {
		return err
	}
	if rejected {
		b.s.Metrics.settle(domain.StatusRejected)
	}
	return nil
}

// settle charges a PENDING verification through the charge saga and writes its outcome through
// b. The debit runs outside any transaction: no connection waits on accounts.
func (s *Service) settle(ctx context.Context, b books, v domain.Verification, masked string) (domain.Verification, error) {
	out, c, err := charge.Saga[pending]{Ledger: s.ledger}.Complete(ctx, b, intent(v, masked))
	switch {
	case out == charge.Settled:
		v.Status, v.Charged, v.BalanceAfter = v.Outcome, c.Amount, &c.BalanceAfter
		return v, nil
	case errors.Is(err, fault.ErrUnavailable):
		s.log.Warn("verification charge not settled; the reconciler will retry", zap.String("verification", v.ID), zap.Error(err), logging.Request(ctx))
		s.Metrics.deferCharge()
	}
	return v, err // a refusal, or money.Away tells whether accounts was away
}

// completed is the verification.completed event of v reaching status, with its number masked
// (never whole in an event) and charge, nil when nothing was charged.
func (s *Service) completed(v domain.Verification, masked string, status domain.Status, reason string, charge *money.Charged) (events.Event, error) {
	d := events.VerificationCompletedData{
		VerificationID: v.ID, Status: string(status), MobileNumber: masked, ServiceType: v.ServiceType, SessionID: v.SessionID,
	}
	if reason != "" {
		d.Reason = &reason
	}
	if charge != nil {
		d.Charged, d.BalanceAfter = charge.Amount, &charge.BalanceAfter
	}
	return events.New(v.ClientID, events.VerificationCompleted, d, s.now())
}

// claims is the reconciler's port (charge.Claims): stale PENDING verifications no other replica
// holds, held in one transaction whose books write in it.
type claims struct{ s *Service }

func (c claims) Claim(ctx context.Context, before time.Time, limit int,
	fn func(ctx context.Context, stale []charge.Intent[pending], b charge.Books[pending]) error) error {
	s := c.s
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		vs, err := st.StalePending(ctx, before, limit)
		if err != nil {
			return err
		}
		in := make([]charge.Intent[pending], len(vs))
		for i, v := range vs {
			in[i] = intent(v, s.Masked(v))
		}
		return fn(ctx, in, s.txBooks(st))
	})
}

// Reconciler settles verifications left PENDING (accounts was unreachable, or a process died
// between recording and settling) with the same reference. Replicas share the work (SKIP LOCKED).
func (s *Service) reconciler() *charge.Reconciler[pending] {
	return &charge.Reconciler[pending]{What: "verifications", Ledger: s.ledger, Claims: claims{s}, After: s.cfg.SettleAfter, Log: s.log, Now: s.now}
}

// Reconcile runs the reconciler every every until ctx ends.
func (s *Service) Reconcile(ctx context.Context, every time.Duration) { s.reconciler().Run(ctx, every) }

// ReconcileOnce settles one batch of stale PENDING verifications and returns how many it
// settled or rejected.
func (s *Service) ReconcileOnce(ctx context.Context) (int, error) { return s.reconciler().Once(ctx) }

// Get reads a verification of the client.
func (s *Service) Get(ctx context.Context, clientID, id string) (domain.Verification, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Verification{}, fault.ErrNotFound
	}
	return s.st.GetVerification(ctx, clientID, id)
}

// List reads a page of the client's verifications.
func (s *Service) List(ctx context.Context, clientID string, f domain.VerificationFilter, limit, offset int64) (domain.Page[domain.Verification], error) {
	if f.Status != nil && !domain.IsOutcome(*f.Status) {
		return domain.Page[domain.Verification]{}, fault.Invalid("status", "must be VERIFIED, NOT_VERIFIED, UNDETERMINED or EXPIRED")
	}
	if f.From != nil && f.To != nil && !f.From.Before(*f.To) {
		return domain.Page[domain.Verification]{}, fault.Invalid("from", "must be before to")
	}
	if f.Reason != nil && !slices.Contains(domain.Reasons, *f.Reason) {
		return domain.Page[domain.Verification]{}, fault.Invalid("reason", "must be one of %s", strings.Join(domain.Reasons, ", "))
	}
	// An id of the right shape that no operator has finds nothing, as a status nothing has: the
	// registry changes, and the history keeps the operators it had.
	if f.OperatorID != nil && !operators.ValidID(*f.OperatorID) {
		return domain.Page[domain.Verification]{}, fault.Invalid("operatorId", "must be an operator id: lower-case letters, digits and '-', at most 63 characters")
	}
	if f.Method != nil && !operators.KnownMethod(operators.Method(*f.Method)) {
		return domain.Page[domain.Verification]{}, fault.Invalid("serviceType", "must be %s", strings.Join(operators.MethodNames(), " or "))
	}
	return s.st.ListVerifications(ctx, clientID, f, limit, offset)
}

// Masked is the display form of a kept verification's number.
func (s *Service) Masked(v domain.Verification) string {
	n, err := s.vault.Open(v.NumberSealed, "verifications", v.ID)
	if err != nil {
		s.log.Error("a kept number does not open", zap.String("verification", v.ID), zap.Error(err))
		return ""
	}
	return phone.Mask(n)
}
