package workflows

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// UsageDimensions are the usage route's, in the order of the store's rows.
var UsageDimensions = []string{"channel", "country", "status"}

// UsageFilter narrows the usage to one channel's steps, one country's, or both (nil: all). The
// answer's breakdowns are per dimension, so a channel's conversion in a country (its VERIFIED
// steps over its steps, day by day) is the status breakdown of the usage filtered by both
// (docs/api-decisions.md#usage).
type UsageFilter struct{ Channel, Country *string }

// check is 400 naming the field for a channel that is none, or a country that is not an ISO
// 3166-1 alpha-2 code.
func (f UsageFilter) check() error {
	if f.Channel != nil && Channel(*f.Channel) != Silent && Channel(*f.Channel) != SMSOTP {
		return fault.Invalid("channel", "must be %s or %s", Silent, SMSOTP)
	}
	if f.Country != nil && !isCountry(*f.Country) {
		return fault.Invalid("country", "must be an ISO 3166-1 alpha-2 code, upper case")
	}
	return nil
}

func isCountry(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// Usage is a client's workflow steps per day over the range of from and to (usage.ParseRange),
// by channel, country and status (docs/api-decisions.md#usage), only those f keeps. The closed
// days come from the roll-up (RollUp), the others from the steps, in one snapshot: the answer is
// what the steps say now (docs/architecture.md#usage).
func (s *Service) Usage(ctx context.Context, clientID string, from, to *string, f UsageFilter) (usage.Report, error) {
	return usage.Answer(from, to, s.Now(), UsageDimensions, func(r usage.Range) ([]usage.Row, error) {
		if err := f.check(); err != nil {
			return nil, err
		}
		return s.st.StepUsage(ctx, clientID, r, f)
	})
}

// RollUp writes the next closed days of the steps (up to usage.StepDays) into the roll-up in
// one transaction and answers how many (a usage.Roller's RollUp).
func (s *Service) RollUp(ctx context.Context) (days int, err error) {
	return usage.RollUpStep(ctx, s.tx.InTx, Store.RollUpWorkflowUsage)
}

// UsageMove is one step's move in the usage: Count -1 and the credits its settled charge had
// taken under what it was, Count +1 and what its settled charge took under what it is now.
type UsageMove struct {
	Day     time.Time
	Channel Channel
	Country string
	Status  StepStatus
	Count   int64
	Charged int64
}

// usageMoves are the moves of the steps of w, since before, in the usage of days before now's
// day: those a roll-up may already hold. A step of now's day is left out, with no read of the
// roll-up: its day cannot be rolled up while the transaction that moves it is open (the
// roll-up waits for every transaction begun before a day's end), so the pass that rolls it up
// sees the move. That is every move but a late one (a receipt, a charge settled on a retry,
// a step timed out after midnight), so the path of the codes checked within minutes never
// reads the watermark.
func usageMoves(before, w Workflow, now time.Time) []UsageMove {
	today := usage.Day(now)
	var moves []UsageMove
	for _, st := range w.Steps {
		day := usage.Day(st.Started)
		if !day.Before(today) {
			continue
		}
		old := before.Step(st.ID)
		if old != nil && old.Status == st.Status && usageCharged(*old) == usageCharged(st) {
			continue
		}
		if old != nil {
			moves = append(moves, UsageMove{Day: day, Channel: old.Channel, Country: w.Country, Status: old.Status, Count: -1, Charged: -usageCharged(*old)})
		}
		moves = append(moves, UsageMove{Day: day, Channel: st.Channel, Country: w.Country, Status: st.Status, Count: 1, Charged: usageCharged(st)})
	}
	return moves
}

// usageCharged is what a step adds to the usage's charges: its settled charge, but for a silent
// step, whose charge is its verification's and counted by the verifications' usage.
func usageCharged(s Step) int64 {
	if s.Channel == Silent {
		return 0
	}
	return settled(s)
}
