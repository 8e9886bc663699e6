package imports_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
)

func TestPercentAndEstimate(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := start.Add(d); return &t }
	tests := []struct {
		name    string
		job     domain.ImportJob
		percent float64
		eta     *time.Time
	}{
		{name: "queued", job: domain.ImportJob{Status: domain.ImportQueued, SizeBytes: 1000}, percent: 0},
		{name: "running, no batch yet", job: domain.ImportJob{Status: domain.ImportRunning, SizeBytes: 1000, StartedAt: at(0)}, percent: 0},
		{name: "a quarter in 10 s: 30 s to go",
			job:     domain.ImportJob{Status: domain.ImportRunning, SizeBytes: 1000, BytesProcessed: 250, StartedAt: at(0), ProgressedAt: at(10 * time.Second)},
			percent: 25, eta: at(40 * time.Second)},
		{name: "rounded down to a tenth",
			job:     domain.ImportJob{Status: domain.ImportRunning, SizeBytes: 3, BytesProcessed: 2, StartedAt: at(0), ProgressedAt: at(2 * time.Second)},
			percent: 66.6, eta: at(3 * time.Second)},
		{name: "whole file read, not yet marked done: under 100",
			job:     domain.ImportJob{Status: domain.ImportRunning, SizeBytes: 1000, BytesProcessed: 1000, StartedAt: at(0), ProgressedAt: at(5 * time.Second)},
			percent: 99.9, eta: at(5 * time.Second)},
		{name: "released back to the queue: no estimate",
			job:     domain.ImportJob{Status: domain.ImportQueued, SizeBytes: 1000, BytesProcessed: 500, StartedAt: at(0), ProgressedAt: at(5 * time.Second)},
			percent: 50},
		{name: "completed", job: domain.ImportJob{Status: domain.ImportCompleted, SizeBytes: 1000, BytesProcessed: 1000, StartedAt: at(0), ProgressedAt: at(time.Second)},
			percent: 100},
		{name: "failed halfway: where it stopped",
			job:     domain.ImportJob{Status: domain.ImportFailed, SizeBytes: 1000, BytesProcessed: 500, StartedAt: at(0), ProgressedAt: at(time.Second)},
			percent: 50},
		{name: "failed empty file", job: domain.ImportJob{Status: domain.ImportFailed}, percent: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := imports.PercentComplete(tt.job); got != tt.percent {
				t.Errorf("PercentComplete = %v, want %v", got, tt.percent)
			}
			got := imports.EstimatedCompletion(tt.job)
			if (got == nil) != (tt.eta == nil) || got != nil && !got.Equal(*tt.eta) {
				t.Errorf("EstimatedCompletion = %v, want %v", got, tt.eta)
			}
		})
	}
}

// TestProgressPerBatch runs a file of three batches: each commit moves the job's bytes, rows
// and percentage forward with the batch (never per row), and the end is the whole file.
func TestProgressPerBatch(t *testing.T) {
	f := newFakeJobs()
	svc := newJobService(t, f)
	ctx := context.Background()
	client := uuid.NewString()
	var body strings.Builder
	body.WriteString("mobileNumber\n")
	const rows = 12_000 // batches of 5000, 5000 and 2000
	for i := range rows {
		fmt.Fprintf(&body, "+97150%07d\n", i)
	}
	job, err := svc.Upload(ctx, client, "big.csv", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	if imports.PercentComplete(job) != 0 || job.BytesProcessed != 0 || imports.EstimatedCompletion(job) != nil {
		t.Fatalf("queued job at %v%% (%d bytes), estimate %v", imports.PercentComplete(job), job.BytesProcessed, imports.EstimatedCompletion(job))
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce = %v, %v", ran, err)
	}
	wantRows := []int64{5000, 10_000, 12_000}
	if len(f.batches) != len(wantRows) {
		t.Fatalf("%d batches committed, want %d", len(f.batches), len(wantRows))
	}
	size := int64(body.Len())
	var last int64
	for i, b := range f.batches {
		// 13 bytes of header, 14 per row: a batch ends within the reader's buffers of its rows.
		end := 13 + 14*wantRows[i]
		if b.TotalRows != wantRows[i] || b.BytesProcessed <= last || b.BytesProcessed < end || b.BytesProcessed > min(end+16<<10, size) {
			t.Errorf("batch %d: %d rows, %d bytes (after %d); want %d rows, %d to %d bytes", i, b.TotalRows, b.BytesProcessed, last, wantRows[i], end, end+16<<10)
		}
		last = b.BytesProcessed
		p := imports.PercentComplete(b)
		if p <= 0 || p >= 100 {
			t.Errorf("batch %d at %v%%, want between 0 and 100", i, p)
		}
		if i < len(wantRows)-1 && imports.EstimatedCompletion(b) == nil {
			t.Errorf("batch %d: no estimate while running", i)
		}
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportCompleted || got.BytesProcessed != size || imports.PercentComplete(got) != 100 || imports.EstimatedCompletion(got) != nil {
		t.Fatalf("finished job %s: %d of %d bytes, %v%%, estimate %v", got.Status, got.BytesProcessed, size,
			imports.PercentComplete(got), imports.EstimatedCompletion(got))
	}
}
