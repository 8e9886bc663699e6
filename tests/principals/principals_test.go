// Package principals_test holds verification's principal cache to its bound, over real gRPC and
// PostgreSQL: a credential or client change committed on one accounts replica stops every call
// to verification, which watches another replica, within a second; and with the change stream
// down the cache is no way in.
package principals_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	gateway "github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/verification/app"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// bound is the promise: a change stops every call within this of its commit.
const bound = time.Second

type stack struct {
	watched, other *apptest.Server // verification and the gateway watch the first; changes go through the other
	ver            *verificationtest.Server
	client         verificationv1.VerificationServiceClient
	public         accountsv1.AccountsServiceClient // on the other replica
	db             *pgxpool.Pool
	// gateway is the URL of a gateway in front of verification and the watched replica, which
	// resolves credentials itself and asserts them; gatewayMetrics is its registry.
	gateway        string
	gatewayMetrics *prometheus.Registry
}

func start(t *testing.T) *stack {
	t.Helper()
	watched := apptest.Start(t)
	other := apptest.StartReplica(t, watched)
	ver := verificationtest.Start(t, watched.Addr, authtest.VerificationToken, func(c *app.Config) {
		c.ClientRate = 0 // the load here is the test's, not a client's to limit
	})
	db, err := pgxpool.New(context.Background(), watched.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	gcfg := gateway.DefaultConfig()
	// No connect here: its routes are not called.
	gcfg.AccountsAddr, gcfg.VerificationAddr, gcfg.ConnectAddr = watched.Addr, ver.Addr, "127.0.0.1:1"
	gcfg.InternalToken = authtest.GatewayToken
	// The load here is the test's: no budget per address, for failures either.
	gcfg.IPRate, gcfg.AuthFailureRate = 0, 0
	greg := prometheus.NewRegistry()
	g, err := gateway.New(context.Background(), gcfg, apptest.Logger(t), greg, greg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &stack{
		watched: watched, other: other, ver: ver, db: db,
		client:  verificationv1.NewVerificationServiceClient(apptest.Dial(t, ver.Addr, authtest.GatewayToken)),
		public:  accountsv1.NewAccountsServiceClient(apptest.Dial(t, other.Addr, "")),
		gateway: srv.URL, gatewayMetrics: greg,
	}
}

// rest calls GET path through the gateway with key and client id, and returns the gRPC code
// its status stands for.
func (s *stack) rest(path, key, clientID string) error {
	req, err := http.NewRequest(http.MethodGet, s.gateway+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("X-CLIENT-ID", clientID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusUnauthorized:
		return status.Error(codes.Unauthenticated, "401")
	case http.StatusForbidden:
		return status.Error(codes.PermissionDenied, "403")
	}
	return status.Errorf(codes.Unknown, "HTTP %d", resp.StatusCode)
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

// newKey creates a key of the client with role, through the other replica.
func (s *stack) newKey(t *testing.T, admin string, role accountsv1.Role) (id, key string) {
	t.Helper()
	resp, err := s.public.CreateApiKey(withKey(admin), &accountsv1.CreateApiKeyRequest{Name: fmt.Sprintf("k-%d", time.Now().UnixNano()), Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetId(), resp.GetApiKey()
}

func (s *stack) hits(t *testing.T) float64 {
	return metricstest.Sum(metricstest.Gather(t, s.ver.Metrics), "mnv_principal_cache_lookups_total", "result=hit")
}

// lookups counts every credential verification's guard resolved (through its cache or not).
func (s *stack) lookups(t *testing.T) float64 {
	return metricstest.Sum(metricstest.Gather(t, s.ver.Metrics), "mnv_principal_cache_lookups_total")
}

func (s *stack) gatewayHits(t *testing.T) float64 {
	return metricstest.Sum(metricstest.Gather(t, s.gatewayMetrics), "mnv_principal_cache_lookups_total", "result=hit")
}

func (s *stack) streamUp(t *testing.T) bool {
	return metricstest.Sum(metricstest.Gather(t, s.ver.Metrics), "mnv_principal_stream_up") == 1 &&
		metricstest.Sum(metricstest.Gather(t, s.gatewayMetrics), "mnv_principal_stream_up") == 1
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type result struct {
	start time.Time
	code  codes.Code
}

// load calls call from workers goroutines until stop, recording when each call started and
// its code.
func load(workers int, call func() error) (stop func() []result) {
	var (
		mu   sync.Mutex
		out  []result
		done atomic.Bool
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for !done.Load() {
				began := time.Now()
				code := status.Code(call())
				mu.Lock()
				out = append(out, result{began, code})
				mu.Unlock()
			}
		})
	}
	return func() []result {
		done.Store(true)
		wg.Wait()
		return out
	}
}

// TestChangesStopEveryCallWithinOneSecond: under concurrent calls that a cache serves, each
// change, committed through another accounts replica, refuses every call that starts later than
// a second after its commit, and the calls before it succeeded: calls to verification (its own
// cache) and REST requests through the gateway (the gateway's cache, whose principal the
// service believes).
func TestChangesStopEveryCallWithinOneSecond(t *testing.T) {
	s := start(t)
	waitFor(t, "the principal streams", func() bool { return s.streamUp(t) })
	// use is what a case calls: the operators (any key), or the reveals (an ADMIN key's).
	type use struct {
		key     string
		reveals bool
	}
	tests := []struct {
		name string
		// setup returns what to call under load and the change; want is the refusal's code.
		setup func(t *testing.T, c apptest.Client) (use, func(t *testing.T))
		want  codes.Code
	}{
		{"revoked key", func(t *testing.T, c apptest.Client) (use, func(*testing.T)) {
			id, key := s.newKey(t, c.APIKey, accountsv1.Role_ROLE_MEMBER)
			return use{key: key}, func(t *testing.T) {
				if _, err := s.public.RevokeApiKey(withKey(c.APIKey), &accountsv1.RevokeApiKeyRequest{KeyId: id}); err != nil {
					t.Fatal(err)
				}
			}
		}, codes.Unauthenticated},
		{"key rotated without grace", func(t *testing.T, c apptest.Client) (use, func(*testing.T)) {
			_, key := s.newKey(t, c.APIKey, accountsv1.Role_ROLE_MEMBER)
			return use{key: key}, func(t *testing.T) {
				if _, err := s.public.RotateApiKey(withKey(key), &accountsv1.RotateApiKeyRequest{SecretKey: c.Secret}); err != nil {
					t.Fatal(err)
				}
			}
		}, codes.Unauthenticated},
		{"suspended client", func(t *testing.T, c apptest.Client) (use, func(*testing.T)) {
			return use{key: c.APIKey}, func(t *testing.T) {
				if _, err := s.other.Admin.SetClientStatus(context.Background(), &accountsv1.SetClientStatusRequest{
					ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED,
				}); err != nil {
					t.Fatal(err)
				}
			}
		}, codes.PermissionDenied},
		{"role changed from ADMIN to MEMBER", func(t *testing.T, c apptest.Client) (use, func(*testing.T)) {
			id, key := s.newKey(t, c.APIKey, accountsv1.Role_ROLE_ADMIN)
			return use{key: key, reveals: true}, func(t *testing.T) {
				// No RPC changes a key's role today; an operator's SQL is where one would, and it
				// sends the notice the store's changes send, in the same transaction (a batch is
				// one), like any other change.
				b := &pgx.Batch{}
				b.Queue(`UPDATE accounts.api_keys SET role = 'MEMBER' WHERE client_id = $1 AND id = $2`, c.ID, id)
				b.Queue(`SELECT pg_notify('mnv_accounts_principals', 'api_key:' || $1 || ':' || $2)`, c.ID, id)
				if err := s.db.SendBatch(context.Background(), b).Close(); err != nil {
					t.Fatal(err)
				}
			}
		}, codes.PermissionDenied},
	}
	paths := []struct {
		name string
		call func(u use, clientID string) func() error
		hits func(t *testing.T) float64
		// asserted: verification resolves none of the calls' credentials itself.
		asserted bool
	}{
		{"gRPC to verification", func(u use, _ string) func() error {
			return func() error {
				if u.reveals {
					_, err := s.client.ListStuckPlusReveals(withKey(u.key), &verificationv1.ListStuckPlusRevealsRequest{})
					return err
				}
				_, err := s.client.ListOperators(withKey(u.key), &verificationv1.ListOperatorsRequest{})
				return err
			}
		}, s.hits, false},
		{"REST through the gateway", func(u use, clientID string) func() error {
			path := "/v1/api/operators"
			if u.reveals {
				path = "/v1/api/me/stuck-plus/reveals"
			}
			return func() error { return s.rest(path, u.key, clientID) }
		}, s.gatewayHits, true},
	}
	for _, path := range paths {
		for _, tt := range tests {
			t.Run(path.name+"/"+tt.name, func(t *testing.T) {
				c := s.watched.CreateClient(t, 1000, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_STUCK_PLUS)
				u, change := tt.setup(t, c)
				call := path.call(u, c.ID)
				if err := call(); err != nil {
					t.Fatalf("before the change: %v", err)
				}
				hits, lookups := path.hits(t), s.lookups(t)
				stop := load(16, call)
				waitFor(t, "calls served by the cache", func() bool { return path.hits(t) > hits+100 })
				change(t)
				committed := time.Now() // the change's answer comes after its commit
				time.Sleep(bound + 300*time.Millisecond)
				results := stop()
				var before, after, lastOK time.Time
				var refused, n int
				for _, r := range results {
					switch {
					case r.code == codes.OK:
						if r.start.After(lastOK) {
							lastOK = r.start
						}
						if r.start.After(committed.Add(bound)) {
							t.Errorf("a call that started %v after the commit succeeded", r.start.Sub(committed))
						}
					case r.code == tt.want:
						refused++
					default:
						t.Errorf("a call failed with %v, want OK or %v", r.code, tt.want)
					}
					if r.start.After(committed.Add(bound)) {
						n++
					}
					before, after = minT(before, r.start), maxT(after, r.start)
				}
				if n < 100 || refused < n {
					t.Fatalf("%d calls after the bound, %d refused: the load did not run", n, refused)
				}
				if l := s.lookups(t) - lookups; path.asserted && l != 0 {
					t.Errorf("verification resolved %v credentials itself: it must believe the gateway's principal", l)
				}
				t.Logf("%d calls in %v; the last success started %v after the commit",
					len(results), after.Sub(before).Round(time.Millisecond), lastOK.Sub(committed).Round(time.Millisecond))
			})
		}
	}
}

func minT(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxT(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestStreamDownAsksAccounts: while the watched replica cannot LISTEN (its connection is
// terminated as soon as it comes back), its streams end, verification stops serving from the
// cache and asks accounts on every call, and a key revoked meanwhile is refused at once; when
// the LISTEN is back, a stream starts again and the cache serves.
func TestStreamDownAsksAccounts(t *testing.T) {
	s := start(t)
	waitFor(t, "the principal stream", func() bool { return s.streamUp(t) })
	c := s.watched.CreateClient(t, 1000, accountsv1.Feature_FEATURE_VERIFY)
	id, key := s.newKey(t, c.APIKey, accountsv1.Role_ROLE_MEMBER)
	call := func() error {
		_, err := s.client.ListOperators(withKey(key), &verificationv1.ListOperatorsRequest{})
		return err
	}
	for range 5 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	if s.hits(t) == 0 {
		t.Fatal("the cache served nothing with its stream up")
	}

	// The outage: every listen connection of the watched replica's database is terminated
	// as soon as it shows.
	ctx, cancel := context.WithCancel(context.Background())
	var killer sync.WaitGroup
	killer.Go(func() {
		for ctx.Err() == nil {
			_, _ = s.db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = 'mnv-accounts-listen'`)
			time.Sleep(5 * time.Millisecond)
		}
	})
	defer func() { cancel(); killer.Wait() }()
	waitFor(t, "the stream to go down", func() bool { return !s.streamUp(t) })
	// Between two terminations the listener may reconnect and a stream start again, with an
	// empty cache that may then rightly serve: a round of 20 calls counts only when it begins
	// with no stream up and none started during it (a busy machine gets a few more rounds).
	rounds := func(what string, reg prometheus.Gatherer, call func() error) {
		t.Helper()
		sum := func(name string, labels ...string) float64 {
			return metricstest.Sum(metricstest.Gather(t, reg), name, labels...)
		}
		for round := 1; ; round++ {
			if round == 50 {
				t.Fatalf("%s: no round of 50 found the stream down throughout: the outage does not hold", what)
			}
			// A stream the listener's short return let start is rightly served from: a round
			// counts only when it begins with the stream down and none starts during it.
			if sum("mnv_principal_stream_up") == 1 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			starts := sum("mnv_principal_stream_starts_total")
			hits, asked := sum("mnv_principal_cache_lookups_total", "result=hit"), sum("mnv_principal_cache_lookups_total", "result=bypass")
			for range 20 {
				if err := call(); err != nil {
					t.Fatalf("%s: with the stream down, a call was refused (%v): it must ask accounts", what, err)
				}
			}
			if sum("mnv_principal_stream_starts_total") != starts {
				t.Logf("%s: round %d: a stream started during it, again", what, round)
				continue
			}
			if served, bypassed := sum("mnv_principal_cache_lookups_total", "result=hit")-hits, sum("mnv_principal_cache_lookups_total", "result=bypass")-asked; served != 0 || bypassed < 20 {
				t.Fatalf("%s: with the stream down the cache served %v calls, asked accounts for %v of 20", what, served, bypassed)
			}
			return
		}
	}
	rounds("verification", s.ver.Metrics, call)
	rest := func() error { return s.rest("/v1/api/operators", key, c.ID) }
	rounds("gateway", s.gatewayMetrics, rest)
	if _, err := s.public.RevokeApiKey(withKey(c.APIKey), &accountsv1.RevokeApiKeyRequest{KeyId: id}); err != nil {
		t.Fatal(err)
	}
	if err := call(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a key revoked during the outage: %v, want Unauthenticated at once", err)
	}
	if err := rest(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a key revoked during the outage, through the gateway: %v, want 401 at once", err)
	}

	cancel()
	killer.Wait()
	waitFor(t, "the stream to come back", func() bool { return s.streamUp(t) })
	hits, gwHits := s.hits(t), s.gatewayHits(t)
	for range 5 {
		if err := call(); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("the revoked key after the outage: %v", err)
		}
		if err := rest(); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("the revoked key after the outage, through the gateway: %v", err)
		}
		if err := s.rest("/v1/api/operators", c.APIKey, c.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.client.ListOperators(withKey(c.APIKey), &verificationv1.ListOperatorsRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if s.hits(t) <= hits || s.gatewayHits(t) <= gwHits {
		t.Fatal("a cache does not serve again after the stream came back")
	}
}
