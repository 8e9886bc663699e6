// Package usagepb writes a usage report (platform/usage) as the routes answer it
// (mnv.usage.v1), apart from the report so that the domain packages building one import no
// protos.
package usagepb

import (
	"time"

	usagev1 "github.com/mnvhq/mnv/proto/gen/mnv/usage/v1"
	"github.com/mnvhq/mnv/services/platform/usage"
)

const layout = time.DateOnly

// ToProto is rep as the routes answer it.
func ToProto(rep usage.Report) *usagev1.Usage {
	out := &usagev1.Usage{
		From: rep.Range.From.Format(layout), To: rep.Range.To.Format(layout),
		Totals: &usagev1.UsageTotals{
			Count: rep.Totals.Count, Charged: rep.Totals.Charged, Credited: rep.Totals.Credited,
			Breakdowns: breakdownsToProto(rep.Totals.Breakdowns),
		},
		Days: make([]*usagev1.UsageDay, 0, len(rep.Days)),
	}
	for _, d := range rep.Days {
		out.Days = append(out.Days, &usagev1.UsageDay{
			Day: d.Day.Format(layout), Count: d.Count, Charged: d.Charged, Credited: d.Credited,
			Breakdowns: breakdownsToProto(d.Breakdowns),
		})
	}
	return out
}

func breakdownsToProto(bs []usage.Breakdown) []*usagev1.UsageBreakdown {
	out := make([]*usagev1.UsageBreakdown, 0, len(bs))
	for _, b := range bs {
		pb := &usagev1.UsageBreakdown{Dimension: b.Dimension, Buckets: make([]*usagev1.UsageBucket, 0, len(b.Buckets))}
		for _, k := range b.Buckets {
			pb.Buckets = append(pb.Buckets, &usagev1.UsageBucket{Value: k.Value, Count: k.Count, Charged: k.Charged, Credited: k.Credited})
		}
		out = append(out, pb)
	}
	return out
}
