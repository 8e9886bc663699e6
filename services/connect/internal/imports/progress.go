package imports

import (
	"math"
	"time"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
)

// PercentComplete is how far a job is through its file, by bytes, rounded down to a tenth: 0
// until its first batch commits, 100 once COMPLETED and never before (the last batch may reach
// the file's end a moment before the job is marked done).
func PercentComplete(j domain.ImportJob) float64 {
	switch {
	case j.Status == domain.ImportCompleted:
		return 100
	case j.SizeBytes <= 0 || j.BytesProcessed <= 0:
		return 0
	}
	tenths := math.Floor(float64(min(j.BytesProcessed, j.SizeBytes)) * 1000 / float64(j.SizeBytes))
	return min(tenths, 999) / 10
}

// EstimatedCompletion is when a RUNNING job should finish at the rate its committed batches
// have gone since it started (interruptions included), or nil: before any progress, and once it
// is not running. The estimate is taken at the last commit, so reading the job again between two
// batches gives the same answer.
func EstimatedCompletion(j domain.ImportJob) *time.Time {
	if j.Status != domain.ImportRunning || j.StartedAt == nil || j.ProgressedAt == nil ||
		j.BytesProcessed <= 0 || j.SizeBytes <= 0 {
		return nil
	}
	spent := j.ProgressedAt.Sub(*j.StartedAt)
	if spent <= 0 {
		return nil
	}
	left := max(j.SizeBytes-j.BytesProcessed, 0)
	eta := j.ProgressedAt.Add(time.Duration(float64(spent) * float64(left) / float64(j.BytesProcessed)))
	return &eta
}
