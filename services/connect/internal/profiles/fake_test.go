package profiles_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// fakeStore is an in-memory profiles.Store and profiles.Tx. A transaction (and a savepoint)
// works on the same maps and puts back a copy of them when its function fails, as a rollback
// would; the methods that need a transaction fail outside one.
type fakeStore struct {
	profiles map[string]domain.Profile
	records  map[string]domain.EnrichmentRecord
	keys     map[string]string // request key → record id
	verified map[string]time.Time
	queued   []queued
	forgot   []string // client/subject pairs whose answers were forgotten
	inTx     bool
	// onLockEnrichment, when set, runs as a record is locked: what another request does
	// between an enrichment's two transactions.
	onLockEnrichment func()
}

type queued struct {
	clientID, trigger string
	ids               []string
}

func newFakeStore() *fakeStore {
	return &fakeStore{profiles: map[string]domain.Profile{}, records: map[string]domain.EnrichmentRecord{},
		keys: map[string]string{}, verified: map[string]time.Time{}}
}

func (f *fakeStore) snapshot() fakeStore {
	c := *f
	c.profiles, c.records, c.keys, c.verified = maps.Clone(f.profiles), maps.Clone(f.records), maps.Clone(f.keys), maps.Clone(f.verified)
	c.queued, c.forgot = slices.Clone(f.queued), slices.Clone(f.forgot)
	return c
}

func (f *fakeStore) atomically(ctx context.Context, fn func(ctx context.Context) error) error {
	snap, outer := f.snapshot(), f.inTx
	f.inTx = true
	err := fn(ctx)
	f.inTx = outer
	if err != nil {
		*f = snap
	}
	return err
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st profiles.Store) error) error {
	return f.atomically(ctx, func(ctx context.Context) error { return fn(ctx, f) })
}

func (f *fakeStore) Savepoint(ctx context.Context, fn func(ctx context.Context) error) error {
	if !f.inTx {
		return errors.New("savepoint outside a transaction")
	}
	return f.atomically(ctx, fn)
}

func (f *fakeStore) needTx(what string) error {
	if !f.inTx {
		return fmt.Errorf("%s outside a transaction", what)
	}
	return nil
}

func (f *fakeStore) InsertProfile(_ context.Context, p domain.Profile) (domain.Profile, error) {
	if err := f.needTx("insert profile"); err != nil {
		return p, err
	}
	for _, q := range f.profiles {
		if q.ClientID == p.ClientID && string(q.NumberHash) == string(p.NumberHash) {
			return domain.Profile{}, domain.ErrProfileExists
		}
	}
	if at, ok := f.verified[p.ClientID+string(p.NumberHash)]; ok {
		p.MatchedAt = &at
	}
	p.CreatedAt, p.UpdatedAt = time.Now(), time.Now()
	f.profiles[p.ID] = p
	return p, nil
}

func (f *fakeStore) GetProfile(_ context.Context, clientID, id string) (domain.Profile, error) {
	p, ok := f.profiles[id]
	if !ok || p.ClientID != clientID {
		return domain.Profile{}, fault.ErrNotFound
	}
	return p, nil
}

func (f *fakeStore) ListProfiles(_ context.Context, clientID string, _ domain.ProfileFilter, _, _ int64) (domain.Page[domain.Profile], error) {
	var page domain.Page[domain.Profile]
	for _, p := range f.profiles {
		if p.ClientID == clientID {
			page.Items = append(page.Items, p)
		}
	}
	page.Total = int64(len(page.Items))
	return page, nil
}

func (f *fakeStore) DeleteProfile(ctx context.Context, clientID, id string) (time.Time, error) {
	if _, err := f.GetProfile(ctx, clientID, id); err != nil {
		return time.Time{}, err
	}
	delete(f.profiles, id)
	return time.Now(), nil
}

func (f *fakeStore) ForgetAnswers(_ context.Context, clientID, subject string) error {
	f.forgot = append(f.forgot, clientID+"/"+subject)
	return nil
}

func (f *fakeStore) RecordVerified(_ context.Context, items []domain.VerifiedNumber) ([]domain.MatchedProfile, error) {
	if err := f.needTx("record verified"); err != nil {
		return nil, err
	}
	var out []domain.MatchedProfile
	for _, it := range items {
		f.verified[it.ClientID+string(it.NumberHash)] = it.VerifiedAt
		for id, p := range f.profiles {
			if p.ClientID == it.ClientID && string(p.NumberHash) == string(it.NumberHash) && p.MatchedAt == nil {
				at := it.VerifiedAt
				p.MatchedAt = &at
				f.profiles[id] = p
				out = append(out, domain.MatchedProfile{ProfileID: id, ClientID: p.ClientID})
			}
		}
	}
	return out, nil
}

func (f *fakeStore) LastVerified(_ context.Context, clientID string, hash []byte) (*time.Time, error) {
	if at, ok := f.verified[clientID+string(hash)]; ok {
		return &at, nil
	}
	return nil, nil
}

func (f *fakeStore) EnqueueForTrigger(_ context.Context, clientID, trigger string, ids []string) (int64, error) {
	f.queued = append(f.queued, queued{clientID, trigger, slices.Clone(ids)})
	return int64(len(ids)), nil
}

func (f *fakeStore) OverviewCounts(context.Context, string) (domain.Overview, error) {
	return domain.Overview{}, nil
}

func (f *fakeStore) LockProfile(ctx context.Context, clientID, id string) (domain.Profile, error) {
	if err := f.needTx("lock profile"); err != nil {
		return domain.Profile{}, err
	}
	return f.GetProfile(ctx, clientID, id)
}

func (f *fakeStore) InsertEnrichment(_ context.Context, r domain.EnrichmentRecord, key []byte) (domain.EnrichmentRecord, error) {
	if key != nil {
		if _, taken := f.keys[string(key)]; taken {
			return domain.EnrichmentRecord{}, domain.ErrEnrichmentInFlight
		}
		f.keys[string(key)] = r.ID
	}
	r.Status, r.CreatedAt = domain.EnrichmentPending, time.Now()
	f.records[r.ID] = r
	return r, nil
}

func (f *fakeStore) EnrichmentByRequestKey(_ context.Context, clientID string, key []byte) (domain.EnrichmentRecord, error) {
	r, ok := f.records[f.keys[string(key)]]
	if !ok || r.ClientID != clientID {
		return domain.EnrichmentRecord{}, fault.ErrNotFound
	}
	return r, nil
}

func (f *fakeStore) ReleaseRequestKey(_ context.Context, clientID, id string) error {
	if r, ok := f.records[id]; !ok || r.ClientID != clientID {
		return nil
	}
	maps.DeleteFunc(f.keys, func(_, rec string) bool { return rec == id })
	return nil
}

func (f *fakeStore) LockEnrichment(_ context.Context, clientID, id string) (domain.EnrichmentRecord, error) {
	if err := f.needTx("lock enrichment"); err != nil {
		return domain.EnrichmentRecord{}, err
	}
	if f.onLockEnrichment != nil {
		f.onLockEnrichment()
	}
	r, ok := f.records[id]
	if !ok || r.ClientID != clientID {
		return domain.EnrichmentRecord{}, fault.ErrNotFound
	}
	return r, nil
}

func (f *fakeStore) FinishEnrichment(ctx context.Context, clientID, id string, status domain.EnrichmentStatus, charged int64, keepKey bool) error {
	r, ok := f.records[id]
	if !ok || r.ClientID != clientID || r.Status != domain.EnrichmentPending {
		return fmt.Errorf("finish enrichment %s: not PENDING", id)
	}
	r.Status, r.Charged = status, charged
	f.records[id] = r
	if !keepKey {
		return f.ReleaseRequestKey(ctx, clientID, id)
	}
	return nil
}

func (f *fakeStore) SetEnrichment(ctx context.Context, clientID, id string, e domain.Enrichment) (domain.Profile, error) {
	p, err := f.GetProfile(ctx, clientID, id)
	if err != nil {
		return p, err
	}
	p.Enrichment = &e
	f.profiles[id] = p
	return p, nil
}

func (f *fakeStore) StaleEnrichments(_ context.Context, before time.Time, limit int) ([]domain.EnrichmentRecord, error) {
	if err := f.needTx("stale enrichments"); err != nil {
		return nil, err
	}
	var out []domain.EnrichmentRecord
	for _, r := range f.records {
		if r.Status == domain.EnrichmentPending && r.CreatedAt.Before(before) && len(out) < limit {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b domain.EnrichmentRecord) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// recordsOf returns the client's enrichment records.
func (f *fakeStore) recordsOf(clientID string) []domain.EnrichmentRecord {
	var out []domain.EnrichmentRecord
	for _, r := range f.records {
		if r.ClientID == clientID {
			out = append(out, r)
		}
	}
	return out
}

// triggered returns the profile ids queued for trigger.
func (f *fakeStore) triggered(trigger string) []string {
	var out []string
	for _, q := range f.queued {
		if q.trigger == trigger {
			out = append(out, q.ids...)
		}
	}
	return out
}

// fakeLedger charges each reference once, as accounts does; debitErr and refundErr, when set,
// are the answers of the next calls instead.
type fakeLedger struct {
	price     int64
	debitErr  error
	refundErr error
	charged   map[string]int64 // reference → amount
	debits    []money.Charge
	refunds   []money.Refund
}

func newFakeLedger() *fakeLedger { return &fakeLedger{price: 25, charged: map[string]int64{}} }

func (l *fakeLedger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.debits = append(l.debits, c)
	if l.debitErr != nil {
		return money.Charged{}, l.debitErr
	}
	if amount, ok := l.charged[c.Reference]; ok {
		return money.Charged{Amount: amount, Replayed: true}, nil
	}
	l.charged[c.Reference] = l.price
	return money.Charged{Amount: l.price}, nil
}

func (l *fakeLedger) Refund(_ context.Context, r money.Refund) (money.Refunded, error) {
	l.refunds = append(l.refunds, r)
	if l.refundErr != nil {
		return money.Refunded{}, l.refundErr
	}
	amount, ok := l.charged[r.Reference]
	if !ok {
		return money.Refunded{}, money.ErrNothingToRefund
	}
	delete(l.charged, r.Reference)
	return money.Refunded{Amount: amount}, nil
}

func (l *fakeLedger) Balance(context.Context, string) (int64, error) { return 1000, nil }

// requests reads the Idempotency-Key a test put in the context with withKey.
type requests struct{}

type keyInContext struct{}

func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyInContext{}, key)
}

func (requests) Key(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyInContext{}).(string)
	return k, ok
}

func (requests) Retention() time.Duration { return 24 * time.Hour }

// fixture is a profiles.Service over the fakes.
type fixture struct {
	svc    *profiles.Service
	st     *fakeStore
	ledger *fakeLedger
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	vault, _ := connecttest.Keys(t)
	st, ledger := newFakeStore(), newFakeLedger()
	return fixture{svc: profiles.New(st, st, vault, ledger, requests{}), st: st, ledger: ledger}
}
