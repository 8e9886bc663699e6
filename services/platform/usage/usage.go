// Package usage is the one shape of the usage routes (docs/api-decisions.md#usage): a range of
// UTC days, checked the same way by every service, and the report each answers, every day of
// the range with its figures split by each of the route's dimensions, and the range's totals.
// A service's store reads rows grouped by day and by its dimensions; Build turns them into the
// report, so a dimension added later (issue 35: channel, country) is one more value per row.
package usage

import (
	"cmp"
	"slices"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// MaxDays is the longest range a route answers, both ends included.
const MaxDays = 366

// DefaultDays is the range's length when one end or both are left out.
const DefaultDays = 30

const layout = time.DateOnly

// Range is a range of UTC days, both included: each a time at 00:00 UTC.
type Range struct{ From, To time.Time }

// Days is how many days r holds.
func (r Range) Days() int { return int(r.To.Sub(r.From)/(24*time.Hour)) + 1 }

// End is the instant after r's last day: the range is [From, End).
func (r Range) End() time.Time { return r.To.AddDate(0, 0, 1) }

// ParseRange reads a route's from and to (YYYY-MM-DD, nil when absent): neither is the last
// DefaultDays days up to now's day; one alone is the DefaultDays days from it or up to it. to
// before from, or more than MaxDays days, is 400 on the field named.
func ParseRange(from, to *string, now time.Time) (Range, error) {
	var r Range
	var err error
	if from != nil {
		if r.From, err = parseDay("from", *from); err != nil {
			return r, err
		}
	}
	if to != nil {
		if r.To, err = parseDay("to", *to); err != nil {
			return r, err
		}
	}
	switch {
	case from == nil && to == nil:
		r.To = Day(now)
		r.From = r.To.AddDate(0, 0, 1-DefaultDays)
	case to == nil:
		r.To = r.From.AddDate(0, 0, DefaultDays-1)
	case from == nil:
		r.From = r.To.AddDate(0, 0, 1-DefaultDays)
	}
	if r.To.Before(r.From) {
		return r, fault.Invalid("to", "must be on or after from (%s)", r.From.Format(layout))
	}
	if r.Days() > MaxDays {
		return r, fault.Invalid("to", "at most %d days from from (%s), both included", MaxDays, r.From.Format(layout))
	}
	return r, nil
}

// Answer is a route's report: the range of from and to (ParseRange at now), the rows read reads
// over it, added up by Build split by dims. Every service's usage route is this with its store.
func Answer(from, to *string, now time.Time, dims []string, read func(Range) ([]Row, error)) (Report, error) {
	r, err := ParseRange(from, to, now)
	if err != nil {
		return Report{}, err
	}
	rows, err := read(r)
	if err != nil {
		return Report{}, err
	}
	return Build(r, dims, rows), nil
}

func parseDay(field, s string) (time.Time, error) {
	d, err := time.Parse(layout, s)
	if err != nil {
		return d, fault.Invalid(field, "must be a date, YYYY-MM-DD")
	}
	return d, nil
}

// Day is t's UTC day, at 00:00 UTC.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Row is a store's figures for one day and one value of each dimension, in the report's order
// of dimensions. Several rows may name the same day and values: they add up.
type Row struct {
	Day      time.Time
	Values   []string
	Count    int64
	Charged  int64
	Credited int64
}

// Figures are a count with the credits taken and given.
type Figures struct{ Count, Charged, Credited int64 }

func (f *Figures) add(r Row) {
	f.Count += r.Count
	f.Charged += r.Charged
	f.Credited += r.Credited
}

// Bucket is the figures of one value of a dimension.
type Bucket struct {
	Value string
	Figures
}

// Breakdown is figures split by one dimension, a bucket per value seen, sorted by value.
type Breakdown struct {
	Dimension string
	Buckets   []Bucket
}

// Period is a day's figures, or the range's, and their breakdowns in the report's order.
type Period struct {
	Day time.Time // zero for the totals
	Figures
	Breakdowns []Breakdown
}

// Report is a route's answer: every day of the range, oldest first, and the totals.
type Report struct {
	Range  Range
	Totals Period
	Days   []Period
}

// Build adds rows up into r's report split by dims (each row's Values in that order). Rows
// outside the range are left out.
func Build(r Range, dims []string, rows []Row) Report {
	n := r.Days()
	type acc struct {
		Figures
		by []map[string]*Figures
	}
	newAcc := func() *acc {
		a := &acc{by: make([]map[string]*Figures, len(dims))}
		for i := range a.by {
			a.by[i] = map[string]*Figures{}
		}
		return a
	}
	days := make([]*acc, n)
	for i := range days {
		days[i] = newAcc()
	}
	total := newAcc()
	for _, row := range rows {
		i := int(Day(row.Day).Sub(r.From) / (24 * time.Hour))
		if i < 0 || i >= n {
			continue
		}
		for _, a := range []*acc{days[i], total} {
			a.add(row)
			for d := range dims {
				f := a.by[d][row.Values[d]]
				if f == nil {
					f = &Figures{}
					a.by[d][row.Values[d]] = f
				}
				f.add(row)
			}
		}
	}
	period := func(day time.Time, a *acc) Period {
		p := Period{Day: day, Figures: a.Figures, Breakdowns: make([]Breakdown, len(dims))}
		for d, name := range dims {
			b := Breakdown{Dimension: name, Buckets: make([]Bucket, 0, len(a.by[d]))}
			for v, f := range a.by[d] {
				b.Buckets = append(b.Buckets, Bucket{Value: v, Figures: *f})
			}
			slices.SortFunc(b.Buckets, func(x, y Bucket) int { return cmp.Compare(x.Value, y.Value) })
			p.Breakdowns[d] = b
		}
		return p
	}
	rep := Report{Range: r, Totals: period(time.Time{}, total), Days: make([]Period, n)}
	for i, a := range days {
		rep.Days[i] = period(r.From.AddDate(0, 0, i), a)
	}
	return rep
}
