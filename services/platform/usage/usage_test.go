package usage

import (
	"context"
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

// TestAnswer: a bad range is refused before the store is read; the store reads the parsed range
// and its error is answered as it is; its rows are built into the report.
func TestAnswer(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	storeErr := errors.New("store down")
	tests := []struct {
		name     string
		from, to *string
		rows     []Row
		readErr  error
		wantRead bool
		wantErr  error
		field    string
		count    int64
	}{
		{"rows built", ptr("2026-11-01"), ptr("2026-11-02"), []Row{{Day: day("2026-11-02"), Values: []string{"A"}, Count: 3}}, nil, true, nil, "", 3},
		{"a bad range: no read", ptr("2026-11-02"), ptr("2026-11-01"), nil, nil, false, nil, "to", 0},
		{"the store's error", nil, nil, nil, storeErr, true, storeErr, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := false
			rep, err := Answer(tt.from, tt.to, now, []string{"status"}, func(r Range) ([]Row, error) {
				read = true
				if tt.from != nil && !r.From.Equal(day(*tt.from)) {
					t.Errorf("read from %v", r.From)
				}
				return tt.rows, tt.readErr
			})
			if read != tt.wantRead {
				t.Errorf("read %v, want %v", read, tt.wantRead)
			}
			var f *fault.Error
			switch {
			case tt.field != "":
				if !errors.As(err, &f) || f.Field != tt.field {
					t.Fatalf("err %v, want invalid %s", err, tt.field)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case rep.Totals.Count != tt.count || len(rep.Days) != 2 || rep.Days[1].Count != tt.count:
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestRollUpStep: the write runs inside the transaction with the roll-up's grace and step, and
// its days (or error) are answered.
func TestRollUpStep(t *testing.T) {
	type store struct{ inTx bool }
	failed := errors.New("write failed")
	for _, tt := range []struct {
		name string
		days int
		err  error
	}{{"days written", 4, nil}, {"an error", 0, failed}} {
		t.Run(tt.name, func(t *testing.T) {
			inTx := func(ctx context.Context, fn func(context.Context, *store) error) error {
				return fn(ctx, &store{inTx: true})
			}
			write := func(st *store, _ context.Context, grace time.Duration, maxDays int) (time.Time, int, error) {
				if !st.inTx || grace != Grace || maxDays != StepDays {
					t.Errorf("write in tx %v, grace %s, max %d", st.inTx, grace, maxDays)
				}
				return time.Time{}, tt.days, tt.err
			}
			days, err := RollUpStep(context.Background(), inTx, write)
			if days != tt.days || !errors.Is(err, tt.err) {
				t.Errorf("got %d, %v; want %d, %v", days, err, tt.days, tt.err)
			}
		})
	}
}
