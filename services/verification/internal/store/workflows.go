package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// The workflows' tables (migrations 019, 020; docs/architecture.md#verification-workflows).

const lookupSMSMessage = "sms_message"

// smsMessageLookupFor is how long a provider's message id maps to its client: receipts come
// within an SMS's validity period (48 hours at most by default on SMSCs), with margin.
const smsMessageLookupFor = 7 * 24 * time.Hour

// GetPolicy reads a client's workflow policy; false when it never set one.
func (st *Store) GetPolicy(ctx context.Context, clientID string) (workflows.Policy, bool, error) {
	var raw []byte
	err := st.db.QueryRow(ctx, `SELECT policy FROM verification.workflow_policies WHERE client_id = $1`, clientID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return workflows.Policy{}, false, nil
	}
	if err != nil {
		return workflows.Policy{}, false, fmt.Errorf("get workflow policy: %w", err)
	}
	p, err := workflows.ParsePolicy(raw)
	if err != nil {
		return workflows.Policy{}, false, fmt.Errorf("stored workflow policy of %s: %w", clientID, err)
	}
	return p, true, nil
}

// PutPolicy writes a client's workflow policy.
func (st *Store) PutPolicy(ctx context.Context, clientID string, p workflows.Policy, by string) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = st.db.Exec(ctx, `
		INSERT INTO verification.workflow_policies (client_id, policy, updated_by, updated_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (client_id) DO UPDATE SET policy = EXCLUDED.policy, updated_by = EXCLUDED.updated_by, updated_at = now()`,
		clientID, raw, by)
	if err != nil {
		return fmt.Errorf("put workflow policy: %w", err)
	}
	return nil
}

// InsertWorkflow writes a new workflow and its steps, in one batch.
func (st *Store) InsertWorkflow(ctx context.Context, w workflows.Workflow) error {
	pol, err := json.Marshal(w.Policy)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO verification.workflows (client_id, id, number_sealed, number_hash, masked_number, country, locale, policy,
			status, decided_by, reason, sim_swap, sim_checked_at, step_seq, code_step_id, code_key_id, code_hash, code_sealed,
			code_issued_at, code_expires_at, attempts, resends, created_at, updated_at, ended_at, transaction_id, sandbox, end_user_address,
			device_swap, device_checked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26,
			$27, $28::inet, $29, $30)`,
		w.ClientID, w.ID, w.NumberSealed, w.NumberHash, w.Masked, w.Country, w.Locale, pol,
		w.Status, nullString(string(w.DecidedBy)), nullString(w.Reason), w.SIMSwap, nullTime(w.SIMCheckedAt), w.StepSeq,
		nullString(w.Code.StepID), nullString(w.Code.KeyID), w.Code.Hash, w.Code.Sealed,
		nullTime(w.Code.IssuedAt), nullTime(w.Code.ExpiresAt), w.Code.Attempts, w.Code.Resends, w.Created, w.Updated, nullTime(w.Ended),
		nullString(w.TransactionID), w.Sandbox, nullAddr(w.Address), w.DeviceSwap, nullTime(w.DeviceCheckedAt))
	for _, s := range w.Steps {
		queueStep(b, w, s)
	}
	if err := st.db.SendBatch(ctx, b).Close(); err != nil {
		// The one unique key a new workflow can meet is its transaction's (its ids and its
		// steps' are fresh UUIDv7s); the constraint is not named, since a partitioned or
		// distributed table names its copies otherwise.
		if pg.IsUniqueViolation(err, "") {
			return workflows.ErrTransactionTaken
		}
		return fmt.Errorf("insert workflow: %w", err)
	}
	return nil
}

// queueStep inserts a step, or updates what may change of it.
func queueStep(b *pgx.Batch, w workflows.Workflow, s workflows.Step) {
	b.Queue(`
		INSERT INTO verification.workflow_steps (client_id, workflow_id, seq, id, channel, status, reason, verification_id,
			charge_status, charged, balance_after, started_at, deadline, ended_at, country, send_attempts, in_doubt_since)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (client_id, workflow_id, seq) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason,
			verification_id = EXCLUDED.verification_id, charge_status = EXCLUDED.charge_status, charged = EXCLUDED.charged,
			balance_after = EXCLUDED.balance_after, ended_at = EXCLUDED.ended_at, send_attempts = EXCLUDED.send_attempts,
			in_doubt_since = EXCLUDED.in_doubt_since`,
		w.ClientID, w.ID, s.Seq, s.ID, s.Channel, s.Status, nullString(s.Reason), nullString(s.VerificationID),
		s.ChargeStatus, s.Charged, s.BalanceAfter, s.Started, s.Deadline, nullTime(s.Ended), w.Country, s.SendAttempts, nullTime(s.InDoubtSince))
}

// LockWorkflow reads a client's workflow and its steps, holding the workflow's row until the
// transaction ends.
func (st *Store) LockWorkflow(ctx context.Context, clientID, id string) (workflows.Workflow, error) {
	if _, err := uuidKey(id); err != nil {
		return workflows.Workflow{}, err
	}
	var (
		w                                       workflows.Workflow
		pol                                     []byte
		decidedBy, reason, stepID, keyID, txID  *string
		addr                                    *string
		simAt, deviceAt, issued, expires, ended *time.Time
	)
	err := st.db.QueryRow(ctx, `
		SELECT client_id::text, id::text, number_sealed, number_hash, masked_number, country, locale, policy, status, decided_by,
			reason, sim_swap, sim_checked_at, step_seq, code_step_id::text, code_key_id, code_hash, code_sealed, code_issued_at,
			code_expires_at, attempts, resends, created_at, updated_at, ended_at, transaction_id::text, sandbox, host(end_user_address),
			device_swap, device_checked_at
		FROM verification.workflows WHERE client_id = $1 AND id = $2 FOR UPDATE`, clientID, id).Scan(
		&w.ClientID, &w.ID, &w.NumberSealed, &w.NumberHash, &w.Masked, &w.Country, &w.Locale, &pol, &w.Status, &decidedBy,
		&reason, &w.SIMSwap, &simAt, &w.StepSeq, &stepID, &keyID, &w.Code.Hash, &w.Code.Sealed, &issued,
		&expires, &w.Code.Attempts, &w.Code.Resends, &w.Created, &w.Updated, &ended, &txID, &w.Sandbox, &addr,
		&w.DeviceSwap, &deviceAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return workflows.Workflow{}, fault.ErrNotFound
	}
	if err != nil {
		return workflows.Workflow{}, fmt.Errorf("lock workflow: %w", err)
	}
	if err := json.Unmarshal(pol, &w.Policy); err != nil {
		return workflows.Workflow{}, fmt.Errorf("workflow %s: policy: %w", id, err)
	}
	w.DecidedBy, w.Reason = workflows.Channel(deref(decidedBy)), deref(reason)
	w.Code.StepID, w.Code.KeyID, w.TransactionID = deref(stepID), deref(keyID), deref(txID)
	w.SIMCheckedAt, w.Code.IssuedAt, w.Code.ExpiresAt, w.Ended = derefTime(simAt), derefTime(issued), derefTime(expires), derefTime(ended)
	w.DeviceCheckedAt = derefTime(deviceAt)
	if addr != nil {
		if w.Address, err = netip.ParseAddr(*addr); err != nil {
			return workflows.Workflow{}, fmt.Errorf("workflow %s: end user address: %w", id, err)
		}
	}
	rows, err := st.db.Query(ctx, `
		SELECT id::text, seq, channel, status, reason, verification_id::text, charge_status, charged, balance_after, started_at, deadline, ended_at,
			send_attempts, in_doubt_since
		FROM verification.workflow_steps WHERE client_id = $1 AND workflow_id = $2 ORDER BY seq`, clientID, id)
	if err != nil {
		return workflows.Workflow{}, fmt.Errorf("workflow steps: %w", err)
	}
	w.Steps, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (workflows.Step, error) {
		var (
			s             workflows.Step
			reason, verID *string
			end, doubt    *time.Time
		)
		err := r.Scan(&s.ID, &s.Seq, &s.Channel, &s.Status, &reason, &verID, &s.ChargeStatus, &s.Charged, &s.BalanceAfter, &s.Started, &s.Deadline, &end,
			&s.SendAttempts, &doubt)
		s.Reason, s.VerificationID, s.Ended, s.InDoubtSince = deref(reason), deref(verID), derefTime(end), derefTime(doubt)
		return s, err
	})
	if err != nil {
		return workflows.Workflow{}, fmt.Errorf("workflow steps: %w", err)
	}
	return w, nil
}

// WorkflowOfTransaction is the id of a client's workflow of a browser transaction.
func (st *Store) WorkflowOfTransaction(ctx context.Context, clientID, transactionID string) (string, error) {
	var id string
	err := st.db.QueryRow(ctx, `SELECT id::text FROM verification.workflows WHERE client_id = $1 AND transaction_id = $2`,
		clientID, transactionID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("workflow of transaction: %w", err)
	}
	return id, nil
}

// SaveWorkflow writes what changed of a locked workflow: its columns and its steps. The end
// user's address is written only where the start gave none (the page's, workflows.lockedFrom).
func (st *Store) SaveWorkflow(ctx context.Context, w workflows.Workflow) error {
	pol, err := json.Marshal(w.Policy)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	// Steps first: the workflow's code_step_id may name a step inserted here.
	for _, s := range w.Steps {
		queueStep(b, w, s)
	}
	b.Queue(`
		UPDATE verification.workflows SET policy = $3, status = $4, decided_by = $5, reason = $6, step_seq = $7,
			code_step_id = $8, code_key_id = $9, code_hash = $10, code_sealed = $11, code_issued_at = $12, code_expires_at = $13,
			attempts = $14, resends = $15, updated_at = $16, ended_at = $17,
			end_user_address = coalesce(end_user_address, $18::inet)
		WHERE client_id = $1 AND id = $2`,
		w.ClientID, w.ID, pol, w.Status, nullString(string(w.DecidedBy)), nullString(w.Reason), w.StepSeq,
		nullString(w.Code.StepID), nullString(w.Code.KeyID), w.Code.Hash, w.Code.Sealed, nullTime(w.Code.IssuedAt), nullTime(w.Code.ExpiresAt),
		w.Code.Attempts, w.Code.Resends, w.Updated, nullTime(w.Ended), nullAddr(w.Address))
	if err := st.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save workflow: %w", err)
	}
	return nil
}

// AddMessages maps the provider's message ids of an SMS step to it, and to its client for the
// receipts that bring an id alone. A retried job's ids are kept once.
func (st *Store) AddMessages(ctx context.Context, clientID, stepID string, providerIDs []string) error {
	b := &pgx.Batch{}
	expires := time.Now().Add(smsMessageLookupFor)
	for _, id := range providerIDs {
		b.Queue(insertLookupSQL+` ON CONFLICT (kind, key) DO NOTHING`, lookupSMSMessage, []byte(id), clientID, expires)
		b.Queue(`INSERT INTO verification.workflow_messages (client_id, provider_id, step_id) VALUES ($1, $2, $3)
			ON CONFLICT (client_id, provider_id) DO NOTHING`, clientID, id, stepID)
	}
	if err := st.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("add sms messages: %w", err)
	}
	return nil
}

// FindMessage finds the client, workflow and step of a provider's message id.
func (st *Store) FindMessage(ctx context.Context, providerID string) (clientID, workflowID, stepID string, err error) {
	err = st.db.QueryRow(ctx, `SELECT client_id::text FROM verification.client_lookups WHERE kind = $1 AND key = $2`,
		lookupSMSMessage, []byte(providerID)).Scan(&clientID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", "", fault.ErrNotFound
	}
	if err != nil {
		return "", "", "", fmt.Errorf("find sms message: %w", err)
	}
	err = st.db.QueryRow(ctx, `
		SELECT s.workflow_id::text, s.id::text FROM verification.workflow_messages m
		JOIN verification.workflow_steps s ON s.client_id = m.client_id AND s.id = m.step_id
		WHERE m.client_id = $1 AND m.provider_id = $2`, clientID, providerID).Scan(&workflowID, &stepID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", "", fault.ErrNotFound
	}
	if err != nil {
		return "", "", "", fmt.Errorf("find sms message: %w", err)
	}
	return clientID, workflowID, stepID, nil
}

// stepsInDoubtLimit bounds the steps a receipt is matched against: one number has few SMS in
// flight at once, and more is someone's loop, not a message to settle.
const stepsInDoubtLimit = 20

// StepsInDoubt lists the SMS steps, of any client, still QUEUED with a submit counted whose
// workflow's number hashes to numberHash, newest first, along the small partial index of the
// steps being sent (migration 023). It crosses clients, as the receipt it serves names none,
// so it reads without a lock: each step is then locked by its client and checked again.
func (st *Store) StepsInDoubt(ctx context.Context, numberHash []byte) ([]workflows.StepRef, error) {
	rows, err := st.db.Query(ctx, `
		SELECT s.client_id::text, s.workflow_id::text, s.id::text FROM verification.workflow_steps s
		JOIN verification.workflows w ON w.client_id = s.client_id AND w.id = s.workflow_id
		WHERE s.status = 'QUEUED' AND s.send_attempts > 0 AND s.channel = 'SMS_OTP' AND w.number_hash = $1
		ORDER BY s.started_at DESC LIMIT $2`, numberHash, stepsInDoubtLimit)
	if err != nil {
		return nil, fmt.Errorf("steps in doubt: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (workflows.StepRef, error) {
		var s workflows.StepRef
		return s, r.Scan(&s.ClientID, &s.WorkflowID, &s.StepID)
	})
	if err != nil {
		return nil, fmt.Errorf("steps in doubt: %w", err)
	}
	return out, nil
}

// DueWorkflows lists workflows of any client in progress with an open step past its deadline.
// It crosses clients, so it reads without a lock: each workflow is then locked by its client.
func (st *Store) DueWorkflows(ctx context.Context, before time.Time, limit int) ([]workflows.WorkflowRef, error) {
	rows, err := st.db.Query(ctx, `
		SELECT s.client_id::text, s.workflow_id::text FROM verification.workflow_steps s
		JOIN verification.workflows w ON w.client_id = s.client_id AND w.id = s.workflow_id AND w.step_seq = s.seq
		WHERE s.ended_at IS NULL AND s.deadline < $1 AND w.status = 'IN_PROGRESS'
		ORDER BY s.deadline LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("due workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (workflows.WorkflowRef, error) {
		var w workflows.WorkflowRef
		return w, r.Scan(&w.ClientID, &w.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("due workflows: %w", err)
	}
	return out, nil
}

// EnqueueSMS queues a step's SMS job in the Store's transaction.
func (st *Store) EnqueueSMS(ctx context.Context, job workflows.SMSJob) error {
	return st.enqueue(ctx, []river.InsertManyParams{{Args: workflows.SMSArgs{SMSJob: job}}})
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullAddr(a netip.Addr) *string {
	if !a.IsValid() {
		return nil
	}
	s := a.String()
	return &s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// ListWorkflows reads a page of a client's workflows, newest first, with their steps (the
// console's list and its timeline), along the client's index by time. A channel filter keeps
// the workflows that took a step of that channel.
func (st *Store) ListWorkflows(ctx context.Context, clientID string, f workflows.ListFilter, limit, offset int64) ([]workflows.Workflow, int64, error) {
	items, total, err := pg.Page(ctx, st.db, pg.PageQuery{
		Columns: `client_id::text, id::text, masked_number, country, status, decided_by, reason, sim_swap, attempts, resends,
			policy, created_at, ended_at, transaction_id::text, code_step_id::text, code_issued_at, code_expires_at, step_seq, device_swap`,
		From: `FROM verification.workflows w WHERE client_id = $1
			AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR country = $3)
			AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM verification.workflow_steps s
				WHERE s.client_id = w.client_id AND s.workflow_id = w.id AND s.channel = $4))`,
		Order: "created_at DESC, w.id",
		Args:  []any{clientID, f.Status, f.Country, f.Channel},
	}, limit, offset, func(r pgx.Row) (workflows.Workflow, error) {
		var (
			w                               workflows.Workflow
			pol                             []byte
			decidedBy, reason, txID, stepID *string
			ended, issued, expires          *time.Time
		)
		if err := r.Scan(&w.ClientID, &w.ID, &w.Masked, &w.Country, &w.Status, &decidedBy, &reason, &w.SIMSwap, &w.Code.Attempts,
			&w.Code.Resends, &pol, &w.Created, &ended, &txID, &stepID, &issued, &expires, &w.StepSeq, &w.DeviceSwap); err != nil {
			return w, err
		}
		w.DecidedBy, w.Reason, w.TransactionID, w.Ended = workflows.Channel(deref(decidedBy)), deref(reason), deref(txID), derefTime(ended)
		w.Code.StepID, w.Code.IssuedAt, w.Code.ExpiresAt = deref(stepID), derefTime(issued), derefTime(expires)
		return w, json.Unmarshal(pol, &w.Policy)
	})
	if err != nil || len(items) == 0 {
		if err != nil {
			err = fmt.Errorf("list workflows: %w", err)
		}
		return items, total, err
	}
	ids := make([]string, len(items))
	at := make(map[string]int, len(items))
	for i, w := range items {
		ids[i], at[w.ID] = w.ID, i
	}
	rows, err := st.db.Query(ctx, `
		SELECT workflow_id::text, id::text, seq, channel, status, reason, verification_id::text, charge_status, charged, started_at, ended_at
		FROM verification.workflow_steps WHERE client_id = $1 AND workflow_id = ANY($2::uuid[]) ORDER BY workflow_id, seq`, clientID, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("list workflows' steps: %w", err)
	}
	var (
		wid, id, channel, status, chargeStatus string
		seq                                    int
		reason, verID                          *string
		charged                                int64
		started                                time.Time
		end                                    *time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&wid, &id, &seq, &channel, &status, &reason, &verID, &chargeStatus, &charged, &started, &end}, func() error {
		w := &items[at[wid]]
		w.Steps = append(w.Steps, workflows.Step{ID: id, Seq: seq, Channel: workflows.Channel(channel), Status: workflows.StepStatus(status),
			Reason: deref(reason), VerificationID: deref(verID), ChargeStatus: workflows.ChargeStatus(chargeStatus), Charged: charged,
			Started: started, Ended: derefTime(end)})
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("list workflows' steps: %w", err)
	}
	return items, total, nil
}

// ClientMessages finds which of the provider's message ids are a client's, with their
// workflow, step and masked number (the sandbox SMS centre's page).
func (st *Store) ClientMessages(ctx context.Context, clientID string, providerIDs []string) (map[string]workflows.MessageRef, error) {
	rows, err := st.db.Query(ctx, `
		SELECT m.provider_id, s.workflow_id::text, s.id::text, w.masked_number FROM verification.workflow_messages m
		JOIN verification.workflow_steps s ON s.client_id = m.client_id AND s.id = m.step_id
		JOIN verification.workflows w ON w.client_id = s.client_id AND w.id = s.workflow_id
		WHERE m.client_id = $1 AND m.provider_id = ANY($2)`, clientID, providerIDs)
	if err != nil {
		return nil, fmt.Errorf("client sms messages: %w", err)
	}
	out := map[string]workflows.MessageRef{}
	var id string
	var ref workflows.MessageRef
	_, err = pgx.ForEachRow(rows, []any{&id, &ref.WorkflowID, &ref.StepID, &ref.Masked}, func() error {
		out[id] = ref
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("client sms messages: %w", err)
	}
	return out, nil
}
