package imports_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/phone"
)

const file = "mobileNumber,externalId\n+971501234567,A\nnot-a-number,B\n+971552345678,C\n"

// setup returns an import service on a fresh, migrated database, and the pool and numbers
// it uses.
func setup(t *testing.T) (*imports.Service, *pgxpool.Pool, profiles.Numbers) {
	t.Helper()
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	if err := app.Migrate(ctx, cfg.DatabaseURL, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("t1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	numbers := profiles.Numbers{Keyring: keyring, Hasher: hasher}
	return imports.New(pool, numbers, imports.Config{Poll: 10 * time.Millisecond, Lease: time.Minute}, zaptest.NewLogger(t)), pool, numbers
}

func upload(t *testing.T, svc *imports.Service, client string) domain.ImportJob {
	t.Helper()
	job, err := svc.Upload(context.Background(), client, "f.csv", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func TestRunOnceImports(t *testing.T) {
	svc, pool, numbers := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportCompleted || got.TotalRows != 3 || got.ImportedRows != 2 || got.FailedRows != 1 ||
		len(got.Errors) != 1 || got.Errors[0].Row != 3 || got.Errors[0].Column != "mobileNumber" {
		t.Fatalf("job %+v", got)
	}
	page, err := store.ListProfiles(ctx, pool, client, store.ProfileFilter{}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "+971501234567", "C": "+971552345678"}
	for _, p := range page.Items {
		n, err := numbers.Open(p)
		if err != nil || p.ExternalID == nil || want[*p.ExternalID] != n || p.NumberMasked != phone.Mask(n) {
			t.Errorf("profile %v: number %q (%v), masked %q", p.ExternalID, phone.Mask(n), err, p.NumberMasked)
		}
	}
	if len(page.Items) != 2 {
		t.Fatalf("%d profiles, want 2", len(page.Items))
	}
	if ran, err := svc.RunOnce(ctx); ran || err != nil {
		t.Fatalf("RunOnce with nothing queued: %v %v", ran, err)
	}
}

// TestLeaseFencing: a worker whose lease ran out, and whose job another worker has claimed
// since, can neither commit a batch nor finish the job.
func TestLeaseFencing(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)

	stale, err := store.ClaimJob(ctx, pool, time.Millisecond)
	if err != nil || stale.ID != job.ID {
		t.Fatalf("first claim: %+v %v", stale, err)
	}
	time.Sleep(20 * time.Millisecond)
	fresh, err := store.ClaimJob(ctx, pool, time.Minute)
	if err != nil || fresh.ID != job.ID {
		t.Fatalf("second claim: %+v %v", fresh, err)
	}
	if fresh.LeaseToken != stale.LeaseToken+1 || fresh.Interruptions != 1 {
		t.Fatalf("tokens %d then %d, interruptions %d", stale.LeaseToken, fresh.LeaseToken, fresh.Interruptions)
	}
	if _, err := store.ClaimJob(ctx, pool, time.Minute); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a job under a live lease was claimed again: %v", err)
	}

	row := store.StageRow{ID: uuid.New(), NumberSealed: []byte{1}, NumberHash: []byte("h"), NumberMasked: "+97150*****67",
		CountryCode: "AE", Attributes: []byte("{}")}
	p := store.Progress{Records: 1, MaxKept: 100, Lease: time.Minute, Token: stale.LeaseToken}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return store.UpsertBatch(ctx, tx, client, job.ID, []store.StageRow{row}, &p)
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale batch: %v, want ErrLeaseLost", err)
	}
	if page, _ := store.ListProfiles(ctx, pool, client, store.ProfileFilter{}, 10, 0); page.Total != 0 {
		t.Fatalf("the stale batch left %d profiles", page.Total)
	}
	if _, err := store.FinishJob(ctx, pool, job.ID, stale.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale finish: %v, want ErrLeaseLost", err)
	}
	if err := store.ReleaseJob(ctx, pool, job.ID, stale.LeaseToken); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.Get(ctx, client, job.ID); got.Status != domain.ImportRunning || got.ProcessedRecords != 0 {
		t.Fatalf("after the stale worker's writes: %+v", got)
	}
	// The holder of the live token can.
	p.Token = fresh.LeaseToken
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return store.UpsertBatch(ctx, tx, client, job.ID, []store.StageRow{row}, &p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishJob(ctx, pool, job.ID, fresh.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGivesUpAfterInterruptions: a job whose workers keep dying is FAILED with a reason,
// rather than resumed forever.
func TestGivesUpAfterInterruptions(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)
	for range imports.MaxInterruptions + 1 { // the first claim, then one per crash
		if _, err := store.ClaimJob(ctx, pool, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportFailed || got.Failure == nil || !strings.Contains(*got.Failure, "stopped unexpectedly 4 times") {
		t.Fatalf("job %+v", got)
	}
}
