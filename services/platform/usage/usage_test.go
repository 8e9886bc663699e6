package usage

import (
	"errors"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
)

func ptr(s string) *string { return &s }

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestParseRange(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 59, 0, 0, time.FixedZone("X", 3*3600)) // 20:59 UTC
	tests := []struct {
		name     string
		from, to *string
		want     Range
		field    string
	}{
		{"neither: the last 30 days", nil, nil, Range{day("2026-10-31"), day("2026-11-29")}, ""},
		{"from alone: 30 days from it", ptr("2026-01-01"), nil, Range{day("2026-01-01"), day("2026-01-30")}, ""},
		{"to alone: 30 days up to it", nil, ptr("2026-01-30"), Range{day("2026-01-01"), day("2026-01-30")}, ""},
		{"one day", ptr("2026-03-01"), ptr("2026-03-01"), Range{day("2026-03-01"), day("2026-03-01")}, ""},
		{"366 days", ptr("2024-01-01"), ptr("2024-12-31"), Range{day("2024-01-01"), day("2024-12-31")}, ""},
		{"367 days", ptr("2024-01-01"), ptr("2025-01-01"), Range{}, "to"},
		{"to before from", ptr("2026-03-02"), ptr("2026-03-01"), Range{}, "to"},
		{"not a date", ptr("2026-02-30"), nil, Range{}, "from"},
		{"not a date to", nil, ptr("tomorrow"), Range{}, "to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRange(tt.from, tt.to, now)
			if tt.field != "" {
				var f *fault.Error
				if !errors.As(err, &f) || f.Reason != fault.InvalidArgument || f.Field != tt.field {
					t.Fatalf("err = %v, want INVALID_ARGUMENT on %s", err, tt.field)
				}
				return
			}
			if err != nil || !r.From.Equal(tt.want.From) || !r.To.Equal(tt.want.To) {
				t.Fatalf("ParseRange = %v, %v; want %v", r, err, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	r := Range{day("2026-03-01"), day("2026-03-03")}
	rows := []Row{
		{Day: day("2026-03-01"), Values: []string{"VERIFIED", "op1"}, Count: 2, Charged: 2},
		{Day: day("2026-03-01"), Values: []string{"VERIFIED", "op2"}, Count: 1, Charged: 1},
		{Day: day("2026-03-01"), Values: []string{"VERIFIED", "op1"}, Count: 1, Charged: 1}, // adds up
		{Day: day("2026-03-03"), Values: []string{"EXPIRED", "op1"}, Count: 4},
		{Day: day("2026-03-04"), Values: []string{"EXPIRED", "op1"}, Count: 9}, // outside
	}
	rep := Build(r, []string{"status", "operator"}, rows)
	if len(rep.Days) != 3 || rep.Days[1].Count != 0 || len(rep.Days[1].Breakdowns) != 2 || len(rep.Days[1].Breakdowns[0].Buckets) != 0 {
		t.Fatalf("days = %+v", rep.Days)
	}
	d0 := rep.Days[0]
	if d0.Count != 4 || d0.Charged != 4 || d0.Breakdowns[1].Buckets[0] != (Bucket{"op1", Figures{3, 3, 0}}) || d0.Breakdowns[1].Buckets[1] != (Bucket{"op2", Figures{1, 1, 0}}) {
		t.Fatalf("day 0 = %+v", d0)
	}
	tot := rep.Totals
	if tot.Count != 8 || tot.Charged != 4 || len(tot.Breakdowns[0].Buckets) != 2 || tot.Breakdowns[0].Buckets[0] != (Bucket{"EXPIRED", Figures{4, 0, 0}}) {
		t.Fatalf("totals = %+v", tot)
	}
}
