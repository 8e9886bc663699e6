package principalcache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// accounts stands for accounts' answers: a table of keys, counting the questions.
type accounts struct {
	mu    sync.Mutex
	keys  map[string]principal.Principal
	asked int
	// during runs inside a question, after the answer is read (a change racing it).
	during func()
}

func (a *accounts) AuthenticateAPIKey(_ context.Context, key, clientID string) (principal.Principal, error) {
	a.mu.Lock()
	a.asked++
	p, ok := a.keys[key]
	during := a.during
	a.mu.Unlock()
	if during != nil {
		during()
	}
	if !ok || (clientID != "" && clientID != p.ClientID) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	return p, nil
}

func (a *accounts) AuthenticateSDKToken(ctx context.Context, token, clientID string) (principal.Principal, error) {
	if clientID == "" {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	return a.AuthenticateAPIKey(ctx, token, clientID)
}

// ClientPrincipal answers the principal of a key of the client, as accounts reads the client.
func (a *accounts) ClientPrincipal(_ context.Context, clientID string) (principal.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked++
	for _, p := range a.keys {
		if p.ClientID == clientID {
			return principal.Principal{ClientID: p.ClientID, Status: p.Status, Features: p.Features}, nil
		}
	}
	return principal.Principal{}, fault.ErrNotFound
}

func (a *accounts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const beat = 250 * time.Millisecond

func dur(d time.Duration) *time.Duration { return &d }

// TestCache: when the cache serves, when it asks accounts, and what it keeps.
func TestCache(t *testing.T) {
	alice := principal.Principal{ClientID: "c-alice", KeyID: "k1", Role: principal.RoleAdmin, Status: principal.StatusActive}
	graced := principal.Principal{ClientID: "c-alice", KeyID: "k2", ValidFor: dur(2 * time.Second)}
	bob := principal.Principal{ClientID: "c-bob", KeyID: "k3"}
	type step struct {
		do func(c *Cache, a *accounts, clk *clock)
		// key and client id to authenticate after do; want the asked count after it, and
		// whether it must succeed.
		key, clientID string
		asked         int
		ok            bool
	}
	started := func(c *Cache, _ *accounts, _ *clock) { c.Started(beat) }
	nothing := func(*Cache, *accounts, *clock) {}
	tests := []struct {
		name  string
		steps []step
	}{
		{"without a stream every call asks", []step{
			{nothing, "key-a", "", 1, true},
			{nothing, "key-a", "", 2, true},
		}},
		{"a started stream serves the second call", []step{
			{started, "key-a", "", 1, true},
			{nothing, "key-a", "", 1, true},
			{nothing, "key-a", "c-alice", 1, true},
		}},
		{"another client's id is refused from the cache as accounts would", []step{
			{started, "key-a", "", 1, true},
			{nothing, "key-a", "c-bob", 1, false},
		}},
		{"a failure is not kept", []step{
			{started, "key-x", "", 1, false},
			{nothing, "key-x", "", 2, false},
		}},
		{"an invalidation of the client drops its entries", []step{
			{started, "key-a", "", 1, true},
			{func(c *Cache, a *accounts, _ *clock) { delete(a.keys, "key-a"); c.Invalidate("c-alice") }, "key-a", "", 2, false},
		}},
		{"an invalidation of another client keeps them", []step{
			{started, "key-a", "", 1, true},
			{nothing, "key-b", "", 2, true},
			{func(c *Cache, _ *accounts, _ *clock) { c.Invalidate("c-bob") }, "key-a", "", 2, true},
			{nothing, "key-b", "", 3, true},
		}},
		{"forgetting a client drops its entries", []step{
			{started, "key-a", "", 1, true},
			{nothing, "key-b", "", 2, true},
			{func(c *Cache, a *accounts, _ *clock) { delete(a.keys, "key-a"); c.Forget("c-alice") }, "key-a", "", 3, false},
			{nothing, "key-b", "", 3, true},
		}},
		{"forgetting is no word from the stream", []step{
			{started, "key-a", "", 1, true},
			{func(c *Cache, _ *accounts, clk *clock) { clk.add(2 * beat); c.Forget("c-bob"); clk.add(beat) }, "key-a", "", 2, true},
			{nothing, "key-a", "", 3, true},
		}},
		{"an answer asked before a forget is not kept", []step{
			{func(c *Cache, a *accounts, _ *clock) {
				c.Started(beat)
				a.during = func() { c.Forget("c-alice") }
			}, "key-a", "", 1, true},
			{func(_ *Cache, a *accounts, _ *clock) { a.during = nil }, "key-a", "", 2, true},
			{nothing, "key-a", "", 2, true},
		}},
		{"a stopped stream asks, and a new one starts empty", []step{
			{started, "key-a", "", 1, true},
			{func(c *Cache, _ *accounts, _ *clock) { c.Stopped() }, "key-a", "", 2, true},
			{nothing, "key-a", "", 3, true},
			{started, "key-a", "", 4, true},
			{nothing, "key-a", "", 4, true},
		}},
		{"a silent stream is not trusted after three beats", []step{
			{started, "key-a", "", 1, true},
			{func(_ *Cache, _ *accounts, clk *clock) { clk.add(2 * beat) }, "key-a", "", 1, true},
			{func(_ *Cache, _ *accounts, clk *clock) { clk.add(beat) }, "key-a", "", 2, true},
			{func(c *Cache, _ *accounts, _ *clock) { c.Heard() }, "key-a", "", 3, true},
			{nothing, "key-a", "", 3, true},
		}},
		{"heartbeats keep it trusted", []step{
			{started, "key-a", "", 1, true},
			{func(c *Cache, _ *accounts, clk *clock) { clk.add(2 * beat); c.Heard(); clk.add(2 * beat) }, "key-a", "", 1, true},
		}},
		{"an entry lives no longer than MaxAge", []step{
			{started, "key-a", "", 1, true},
			{func(c *Cache, _ *accounts, clk *clock) {
				for range 5 {
					clk.add(time.Second * 59 / 5)
					c.Heard()
				}
			}, "key-a", "", 1, true},
			{func(c *Cache, _ *accounts, clk *clock) { clk.add(time.Second); c.Heard() }, "key-a", "", 2, true},
		}},
		{"nor past the credential's own end", []step{
			{started, "key-g", "", 1, true},
			{func(c *Cache, _ *accounts, clk *clock) { clk.add(beat); c.Heard() }, "key-g", "", 1, true},
			{func(c *Cache, a *accounts, clk *clock) {
				for range 7 {
					clk.add(beat)
					c.Heard()
				}
				delete(a.keys, "key-g")
			}, "key-g", "", 2, false},
		}},
		{"an answer asked before a change is not kept", []step{
			{func(c *Cache, a *accounts, _ *clock) {
				c.Started(beat)
				a.during = func() { c.Invalidate("c-alice") }
			}, "key-a", "", 1, true},
			{func(_ *Cache, a *accounts, _ *clock) { a.during = nil }, "key-a", "", 2, true},
			{nothing, "key-a", "", 2, true},
		}},
		{"an answer asked before the stream started is not kept", []step{
			{func(c *Cache, a *accounts, _ *clock) { a.during = func() { c.Started(beat) } }, "key-a", "", 1, true},
			{func(_ *Cache, a *accounts, _ *clock) { a.during = nil }, "key-a", "", 2, true},
			{nothing, "key-a", "", 2, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &accounts{keys: map[string]principal.Principal{"key-a": alice, "key-g": graced, "key-b": bob}}
			clk := &clock{t: time.Unix(1_700_000_000, 0)}
			c, err := New(a, Config{}, Options{Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				s.do(c, a, clk)
				p, err := c.AuthenticateAPIKey(context.Background(), s.key, s.clientID)
				if s.ok != (err == nil) {
					t.Fatalf("step %d: err = %v, want ok %v", i, err, s.ok)
				}
				if err != nil && !errors.Is(err, principal.ErrUnauthenticated) {
					t.Fatalf("step %d: err = %v", i, err)
				}
				if s.ok && p.ClientID != a.keys[s.key].ClientID {
					t.Fatalf("step %d: principal %+v", i, p)
				}
				if got := a.count(); got != s.asked {
					t.Fatalf("step %d: accounts asked %d times, want %d", i, got, s.asked)
				}
			}
		})
	}
}

// TestClientPrincipal: a client's principal read by its id is kept like a credential's, and a
// change pushed for the client (a suspension, a feature removed) drops it at once.
func TestClientPrincipal(t *testing.T) {
	alice := principal.Principal{ClientID: "c-alice", KeyID: "k1", Status: principal.StatusActive, Features: []string{"VERIFY"}}
	suspend := func(c *Cache, a *accounts) {
		a.mu.Lock()
		p := a.keys["key-a"]
		p.Status = principal.StatusSuspended
		a.keys["key-a"] = p
		a.mu.Unlock()
		c.Invalidate("c-alice")
	}
	started := func(c *Cache, _ *accounts) { c.Started(beat) }
	nothing := func(*Cache, *accounts) {}
	type step struct {
		do       func(c *Cache, a *accounts)
		clientID string
		asked    int
		want     principal.Status // "" for not found
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"without a stream every read asks", []step{
			{nothing, "c-alice", 1, principal.StatusActive},
			{nothing, "c-alice", 2, principal.StatusActive},
		}},
		{"a started stream serves the second read", []step{
			{started, "c-alice", 1, principal.StatusActive},
			{nothing, "c-alice", 1, principal.StatusActive},
		}},
		{"a suspension pushed applies to the next read", []step{
			{started, "c-alice", 1, principal.StatusActive},
			{suspend, "c-alice", 2, principal.StatusSuspended},
			{nothing, "c-alice", 2, principal.StatusSuspended},
		}},
		{"an unknown client is not kept", []step{
			{started, "c-nobody", 1, ""},
			{nothing, "c-nobody", 2, ""},
		}},
		{"a stopped stream asks", []step{
			{started, "c-alice", 1, principal.StatusActive},
			{func(c *Cache, _ *accounts) { c.Stopped() }, "c-alice", 2, principal.StatusActive},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &accounts{keys: map[string]principal.Principal{"key-a": alice}}
			c, err := New(a, Config{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				s.do(c, a)
				p, err := c.ClientPrincipal(context.Background(), s.clientID)
				switch {
				case s.want == "" && !errors.Is(err, fault.ErrNotFound):
					t.Fatalf("step %d: %+v %v, want not found", i, p, err)
				case s.want != "" && (err != nil || p.ClientID != s.clientID || p.Status != s.want || p.KeyID != ""):
					t.Fatalf("step %d: %+v %v, want %s", i, p, err, s.want)
				}
				if got := a.count(); got != s.asked {
					t.Fatalf("step %d: accounts asked %d times, want %d", i, got, s.asked)
				}
			}
		})
	}
	// A client id is not an API key: the same text authenticates nothing.
	a := &accounts{keys: map[string]principal.Principal{"key-a": alice}}
	c, _ := New(a, Config{}, Options{})
	c.Started(beat)
	if _, err := c.ClientPrincipal(context.Background(), "c-alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthenticateAPIKey(context.Background(), "c-alice", ""); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("a client id as an API key: %v", err)
	}
}

// TestBounds: the entries stay within Size, a negative Size turns the cache off, and API keys
// and SDK tokens with the same text are different entries.
func TestBounds(t *testing.T) {
	a := &accounts{keys: map[string]principal.Principal{}}
	for i := range 50 {
		a.keys[string(rune('A'+i))] = principal.Principal{ClientID: "c"}
	}
	c, err := New(a, Config{Size: 10}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Started(time.Hour)
	for k := range a.keys {
		if _, err := c.AuthenticateAPIKey(context.Background(), k, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.entries.Len(); n != 10 {
		t.Fatalf("%d entries, want 10", n)
	}
	c.Invalidate("c")
	if n, idx := c.entries.Len(), len(c.byClient); n != 0 || idx != 0 {
		t.Fatalf("after invalidation %d entries, %d clients indexed", n, idx)
	}
	before := a.count()
	for range 2 {
		if _, err := c.AuthenticateSDKToken(context.Background(), "A", "c"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AuthenticateAPIKey(context.Background(), "A", ""); err != nil {
		t.Fatal(err)
	}
	if got := a.count() - before; got != 2 {
		t.Fatalf("token then key asked %d times, want 2 (one each)", got)
	}

	off, err := New(a, Config{Size: -1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	off.Started(time.Hour)
	before = a.count()
	for range 3 {
		if _, err := off.AuthenticateAPIKey(context.Background(), "A", ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.count() - before; got != 3 || off.Enabled() {
		t.Fatalf("a cache turned off asked %d times of 3 (enabled %v)", got, off.Enabled())
	}
}

// BenchmarkHit is the cost of a call the cache serves: every REST request through the gateway
// and most calls to verification and connect pay it.
func BenchmarkHit(b *testing.B) {
	a := &accounts{keys: map[string]principal.Principal{"key-a": {ClientID: "c-alice", KeyID: "k1", Status: principal.StatusActive}}}
	c, err := New(a, Config{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	c.Started(time.Hour)
	ctx := context.Background()
	if _, err := c.AuthenticateAPIKey(ctx, "key-a", ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.AuthenticateAPIKey(ctx, "key-a", "c-alice"); err != nil {
			b.Fatal(err)
		}
	}
	if a.count() != 1 {
		b.Fatalf("accounts asked %d times", a.count())
	}
}

// AuthenticateSession refuses every session: these tests are about keys and tokens.
func (a *accounts) AuthenticateSession(context.Context, string) (principal.Principal, error) {
	return principal.Principal{}, principal.ErrUnauthenticated
}
