package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/tests/harness"
)

const (
	spreadClients  = 1000
	initialBalance = 1_000_000_000
	setupWorkers   = 16
)

// DebitReport is benchmark B with its correctness checks.
type DebitReport struct {
	Spread, Hot Measured
	Checks      []Check
}

// Check is one correctness verdict.
type Check struct {
	Name string
	OK   bool
	Text string
}

// benchDebits is benchmark B: AccountsInternalService.Debit spread over many clients (no two
// debits fight over a balance row) against every debit on one client (all of them need the
// same row lock). Afterwards the balances must match the debits that were answered OK.
func benchDebits(ctx context.Context, s *harness.Suite, cfg Config, grpcConns int, progress io.Writer) (DebitReport, error) {
	var rep DebitReport
	admin, err := dialAdmin(s)
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	internal, err := dialInternal(s, grpcConns)
	if err != nil {
		return rep, err
	}
	defer internal.Close()
	cl := accountsv1.NewAccountsInternalServiceClient(internal)

	t0 := time.Now()
	clients, err := createClients(ctx, accountsv1.NewAccountsAdminServiceClient(admin), spreadClients+1, false)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "  created %d clients with balance %d in %s\n", len(clients), initialBalance, time.Since(t0).Round(time.Millisecond))
	ids := make([]string, len(clients))
	for i, c := range clients {
		ids[i] = c.ID
	}
	hotID, spreadIDs := ids[0], ids[1:] // the hot client is not among the spread ones

	prefix := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	spread := &debiter{cl: cl, prefix: prefix + "s-"}
	hot := &debiter{cl: cl, prefix: prefix + "h-"}
	ms, err := Compare(ctx, cfg, progress,
		Variant{Name: fmt.Sprintf("B Debit spread (%d clients)", len(spreadIDs)), Op: spread.op(func() string { return spreadIDs[rand.IntN(len(spreadIDs))] })},
		Variant{Name: "B Debit hot (1 client)", Op: hot.op(func() string { return hotID })},
	)
	if err != nil {
		return rep, err
	}
	rep.Spread, rep.Hot = ms[0], ms[1]

	// Every debit answered OK, warm-ups and first calls included, must be in the balances.
	hotSum, err := sumBalances(ctx, cl, []string{hotID})
	if err != nil {
		return rep, err
	}
	rep.Checks = append(rep.Checks, balanceCheck("hot client balance", hotSum, initialBalance, hot))
	spreadSum, err := sumBalances(ctx, cl, spreadIDs)
	if err != nil {
		return rep, err
	}
	rep.Checks = append(rep.Checks, balanceCheck(fmt.Sprintf("sum of %d spread balances", len(spreadIDs)), spreadSum, int64(len(spreadIDs))*initialBalance, spread))
	return rep, nil
}

// debiter issues debits of kind VERIFICATION, each with a new reference, and counts what was
// answered OK, so the balances can be checked afterwards.
type debiter struct {
	cl     accountsv1.AccountsInternalServiceClient
	prefix string
	seq    atomic.Uint64

	ok, charged, failed atomic.Int64
}

func (d *debiter) op(clientID func() string) Op {
	return func(ctx context.Context) error {
		ref := d.prefix + strconv.FormatUint(d.seq.Add(1), 10)
		resp, err := d.cl.Debit(ctx, &accountsv1.DebitRequest{
			ClientId: clientID(), Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: ref,
		})
		if err != nil {
			d.failed.Add(1)
			return err
		}
		if resp.GetReplayed() {
			// Money moved by an earlier debit, not by this one: an error, and not counted.
			return fmt.Errorf("debit %s replayed although its reference is new", ref)
		}
		d.ok.Add(1)
		d.charged.Add(resp.GetCharged())
		return nil
	}
}

func balanceCheck(name string, got, initial int64, d *debiter) Check {
	n, charged, failed := d.ok.Load(), d.charged.Load(), d.failed.Load()
	want := initial - charged
	c := Check{Name: name, OK: got == want}
	c.Text = fmt.Sprintf("%d = %d - %d charged by %d OK debits", got, initial, charged, n)
	if !c.OK {
		c.Text = fmt.Sprintf("%d, want %d - %d charged by %d OK debits = %d (off by %d; %d debits failed and may have committed)",
			got, initial, charged, n, want, want-got, failed)
	}
	return c
}

// createClients creates n clients with a large balance and the given features through the
// admin API, a few at a time; with withKey each gets an ADMIN API key too.
func createClients(ctx context.Context, admin accountsv1.AccountsAdminServiceClient, n int, withKey bool, features ...accountsv1.Feature) ([]harness.Client, error) {
	clients := make([]harness.Client, n)
	err := parallel(ctx, n, func(ctx context.Context, i int) error {
		resp, err := admin.CreateClient(ctx, &accountsv1.CreateClientRequest{
			ClientName:         fmt.Sprintf("Bench Client %04d", i),
			ContactPersonName:  "Bea Bench",
			ContactPersonEmail: "bench@example.com",
			ContactPhoneNumber: "0099887766",
			InitialBalance:     initialBalance,
			Features:           features,
			WithoutApiKey:      !withKey,
		})
		if err != nil {
			return fmt.Errorf("create client %d: %w", i, err)
		}
		clients[i] = harness.Client{ID: resp.GetClient().GetId(), Secret: resp.GetClientSecret(), APIKey: resp.GetApiKey()}
		return nil
	})
	return clients, err
}

// sumBalances reads the balances of ids and adds them up.
func sumBalances(ctx context.Context, cl accountsv1.AccountsInternalServiceClient, ids []string) (int64, error) {
	var sum atomic.Int64
	err := parallel(ctx, len(ids), func(ctx context.Context, i int) error {
		resp, err := cl.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: ids[i]})
		if err != nil {
			return fmt.Errorf("balance of %s: %w", ids[i], err)
		}
		sum.Add(resp.GetBalance())
		return nil
	})
	return sum.Load(), err
}

// parallel calls f for 0..n-1 on setupWorkers goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	return parallelN(ctx, setupWorkers, n, f)
}

// parallelN calls f for 0..n-1 on the given number of goroutines and returns the first error.
func parallelN(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
