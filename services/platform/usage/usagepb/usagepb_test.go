package usagepb

import (
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/usage"
)

func TestToProto(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	r := usage.Range{From: from, To: from.AddDate(0, 0, 2)}
	rep := usage.Build(r, []string{"kind"}, []usage.Row{
		{Day: from, Values: []string{"TOP_UP"}, Count: 1, Credited: 5},
		{Day: from.AddDate(0, 0, 2), Values: []string{"VERIFICATION"}, Count: 2, Charged: 2},
	})
	p := ToProto(rep)
	if p.From != "2026-03-01" || p.To != "2026-03-03" || len(p.Days) != 3 || p.Days[2].Day != "2026-03-03" ||
		p.Totals.Count != 3 || p.Totals.Charged != 2 || p.Totals.Credited != 5 || len(p.Days[1].Breakdowns) != 1 ||
		len(p.Days[1].Breakdowns[0].Buckets) != 0 || p.Days[2].Breakdowns[0].Buckets[0].Value != "VERIFICATION" {
		t.Fatalf("ToProto = %v", p)
	}
}
