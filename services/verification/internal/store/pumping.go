package store

import (
	"context"
	"fmt"

	"github.com/mnvhq/mnv/services/verification/internal/pumping"
)

// The blocked prefixes (migration 020) are global, a Reference table: a prefix blocked for one
// client's traffic is blocked for all of them, so these statements name no client.

// PrefixBlocked reports whether any of prefixes is blocked (pumping.Blocks).
func (st *Store) PrefixBlocked(ctx context.Context, prefixes []string) (bool, error) {
	var blocked bool
	if err := st.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM verification.blocked_prefixes WHERE prefix = ANY($1))`,
		prefixes).Scan(&blocked); err != nil {
		return false, fmt.Errorf("store: blocked prefixes: %w", err)
	}
	return blocked, nil
}

// BlockPrefix records b unless its prefix is blocked already; created says whether this call
// wrote the row, so of replicas that see the same collapse together, one raises the alert
// (pumping.Blocks).
func (st *Store) BlockPrefix(ctx context.Context, b pumping.Block) (bool, error) {
	tag, err := st.db.Exec(ctx, `INSERT INTO verification.blocked_prefixes (prefix, reason, starts, verified, blocked_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prefix) DO NOTHING`, b.Prefix, b.Reason, b.Starts, b.Verified, b.At)
	if err != nil {
		return false, fmt.Errorf("store: block prefix: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SpentToday is a client's SMS spend of the current UTC day, in credits (pumping.Spend), read
// outside any lock: smsSpend's sum. The workflows read it under the client's lock instead
// (LockSMSSpend), which is what makes the cap exact.
func (st *Store) SpentToday(ctx context.Context, clientID string) (int64, error) {
	return st.smsSpend(ctx, clientID, nil)
}

// LockSMSSpend takes the client's SMS-cap lock, a transaction-level advisory lock on a key of
// the client's (pg_advisory_xact_lock: released by the commit or the rollback, never held by a
// dead session), and reads the spend under it (workflows.Store). Two sends of one capped
// client then check and reserve one after the other: the second sees the first's step, queued
// and committed, as reserved. Other clients, and clients without a cap (never asked), do not
// wait. A key shared by two clients by a hash collision only serialises them.
func (st *Store) LockSMSSpend(ctx context.Context, clientID, workflowID string) (int64, error) {
	if _, err := st.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('verification.sms-cap:' || $1, 0))`, clientID); err != nil {
		return 0, fmt.Errorf("store: sms cap lock: %w", err)
	}
	return st.smsSpend(ctx, clientID, &workflowID)
}

// smsSpend is a client's SMS spend of the current UTC day, in credits: the settled charges of
// its SMS steps started today, and for each step still queued and unpaid (charge NONE or
// PENDING: its job will debit it) an estimate of its price, so a send in flight counts before
// its debit lands. The settled charges are the ledger's VERIFICATION_STEP debits of
// workflow-step:<step>, settled before the SMS goes and voided (refunded) when the SMSC refuses
// it, so that part equals what the ledger holds for those references, with no call to
// accounts on the send's path (docs/architecture.md, "Pumping controls"). The estimate is the
// client's latest settled SMS charge, or 1 credit before its first: the price is accounts',
// and an estimate above it would refuse sends the cap allows. The steps in play of
// exceptWorkflow are left out. The index on (client_id, started_at) finds the rows.
func (st *Store) smsSpend(ctx context.Context, clientID string, exceptWorkflow *string) (int64, error) {
	var settled, reserved int64
	var last *int64
	err := st.db.QueryRow(ctx, `
		SELECT coalesce(sum(charged) FILTER (WHERE charge_status = 'SETTLED'), 0)::bigint,
			count(*) FILTER (WHERE status = 'QUEUED' AND charge_status IN ('NONE', 'PENDING')
				AND ($2::uuid IS NULL OR workflow_id <> $2::uuid)),
			(SELECT charged FROM verification.workflow_steps
				WHERE client_id = $1 AND channel = 'SMS_OTP' AND charge_status = 'SETTLED' AND charged > 0
				ORDER BY started_at DESC LIMIT 1)
		FROM verification.workflow_steps
		WHERE client_id = $1 AND channel = 'SMS_OTP'
			AND started_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`, clientID, exceptWorkflow).Scan(&settled, &reserved, &last)
	if err != nil {
		return 0, fmt.Errorf("store: sms spend today: %w", err)
	}
	price := int64(1)
	if last != nil {
		price = *last
	}
	return settled + reserved*price, nil
}

// PumpingClient is what the pumping rules need of a client, from its workflow policy (the one
// owner of its workflow settings, pumping.Clients): its SMS allow-list and its own daily cap.
// Whether it is a sandbox client is its principal's, which the workflow keeps from its start.
func (st *Store) PumpingClient(ctx context.Context, clientID string) (pumping.Client, error) {
	p, _, err := st.GetPolicy(ctx, clientID)
	if err != nil {
		return pumping.Client{}, err
	}
	c := pumping.Client{ID: clientID, Countries: p.SMSCountries}
	if p.DailySMSCap != nil {
		c.DailyCap = *p.DailySMSCap
	}
	return c, nil
}
