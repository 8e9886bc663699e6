package purge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/purge"
)

// backlog is a rule over n rows that removes up to limit per call, failing when fail is set.
type backlog struct {
	n, calls int
	fail     error
}

func (b *backlog) purge(_ context.Context, limit int) (int64, error) {
	b.calls++
	if b.fail != nil {
		return 0, b.fail
	}
	k := min(b.n, limit)
	b.n -= k
	return int64(k), nil
}

func TestOnceRunsEachRuleToTheEnd(t *testing.T) {
	big, none, broken, after := &backlog{n: 1200}, &backlog{}, &backlog{n: 5, fail: errors.New("boom")}, &backlog{n: 7}
	r := &purge.Runner{Batch: 500, Log: zaptest.NewLogger(t), Rules: []purge.Rule{
		{Name: "big", Purge: big.purge}, {Name: "none", Purge: none.purge},
		{Name: "broken", Purge: broken.purge}, {Name: "after", Purge: after.purge},
	}}
	removed, err := r.Once(context.Background())
	if err == nil || !errors.Is(err, broken.fail) {
		t.Fatalf("err = %v, want the broken rule's", err)
	}
	tests := []struct {
		name         string
		b            *backlog
		removed      int64
		calls, after int
	}{
		{"big", big, 1200, 3, 0}, // 500, 500, then 200: short, done
		{"none", none, 0, 1, 0},
		{"broken", broken, 0, 1, 5},
		{"after", after, 7, 1, 0}, // a failing rule does not stop the next
	}
	for _, tt := range tests {
		if removed[tt.name] != tt.removed || tt.b.calls != tt.calls || tt.b.n != tt.after {
			t.Errorf("%s: removed %d in %d calls, %d left; want %d in %d, %d left",
				tt.name, removed[tt.name], tt.b.calls, tt.b.n, tt.removed, tt.calls, tt.after)
		}
	}
}

func TestRulesLeaveOutWhatIsKeptForGood(t *testing.T) {
	// Each purge reports the age it was given, so a rule bound to the wrong Aged shows.
	byAge := func(ctx context.Context, age time.Duration, limit int) (int64, error) {
		return int64(age/time.Hour) + int64(limit), nil
	}
	rules := purge.Rules(
		purge.Aged{Name: "hours", Age: 3 * time.Hour, Purge: byAge},
		purge.Aged{Name: "for good", Age: 0, Purge: byAge},
		purge.Aged{Name: "negative", Age: -time.Hour, Purge: byAge},
		purge.Aged{Name: "day", Age: 24 * time.Hour, Purge: byAge},
	)
	want := []struct {
		name string
		n    int64
	}{{"hours", 3 + 10}, {"day", 24 + 10}}
	if len(rules) != len(want) {
		t.Fatalf("got %d rules, want %d", len(rules), len(want))
	}
	for i, w := range want {
		n, err := rules[i].Purge(context.Background(), 10)
		if rules[i].Name != w.name || n != w.n || err != nil {
			t.Errorf("rule %d = %s removing %d (%v), want %s removing %d", i, rules[i].Name, n, err, w.name, w.n)
		}
	}
}
