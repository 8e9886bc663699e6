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

// SpentToday is a client's SMS spend of the current UTC day, in credits (pumping.Spend): the
// settled charges of its SMS steps started today. Each is the ledger's VERIFICATION_STEP debit
// of reference workflow-step:<step>, settled before the SMS is sent and voided (refunded) when
// the SMSC refuses it, so the sum is what the ledger holds for those references, read from
// this service's own rows with no call to accounts on the send's path
// (docs/architecture.md, "Pumping controls"). The index on (client_id, started_at) finds them.
func (st *Store) SpentToday(ctx context.Context, clientID string) (int64, error) {
	var spent int64
	err := st.db.QueryRow(ctx, `
		SELECT COALESCE(sum(charged), 0)::bigint FROM verification.workflow_steps
		WHERE client_id = $1 AND channel = 'SMS_OTP' AND charge_status = 'SETTLED'
			AND started_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`, clientID).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("store: sms spend today: %w", err)
	}
	return spent, nil
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
