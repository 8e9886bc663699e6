// Package principalcache keeps the principals accounts resolved, so that a service does not ask
// accounts on every call, and drops them when accounts pushes a change (WatchPrincipals, fed to
// the Cache by accountsclient.Client.WatchPrincipals).
//
// The cache is a way in only while its stream is known to be healthy: started (accounts said
// that every change from then on will be pushed) and heard from within StaleAfter. Otherwise
// every call asks accounts, as if there were no cache. Entries are keyed by a fingerprint of
// the credential (a digest with a key of this process, never the credential), bounded in number
// (least recently used go first) and in age (MaxAge, and never beyond the credential's own
// expiry). A failed authentication is never cached: a caller spraying keys fills nothing. A
// client's principal read by its id (ClientPrincipal, for a caller holding a grant of the
// client's) is kept the same way, keyed by the id.
package principalcache

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Defaults.
const (
	DefaultSize   = 10000
	DefaultMaxAge = time.Minute
)

// Authenticator is what the cache sits in front of (accountsclient.Client); the Cache is one
// too (principal.Authenticator).
type Authenticator interface {
	AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (principal.Principal, error)
	AuthenticateSDKToken(ctx context.Context, sdkToken, clientID string) (principal.Principal, error)
	AuthenticateSession(ctx context.Context, token string) (principal.Principal, error)
	// ClientPrincipal reads a client's principal by its id, with no credential (the caller holds
	// a grant of the client's, like the CAMARA facade's access tokens).
	ClientPrincipal(ctx context.Context, clientID string) (principal.Principal, error)
}

// Config is a Cache's configuration.
type Config struct {
	// Size bounds the entries (MNV_PRINCIPAL_CACHE_SIZE; DefaultSize when 0; negative: no
	// cache, every call asks accounts).
	Size int
	// MaxAge bounds an entry's age, a safety net behind the stream (MNV_PRINCIPAL_CACHE_MAX_AGE;
	// DefaultMaxAge when 0).
	MaxAge time.Duration
}

// LoadConfig reads the configuration from env.
func LoadConfig(env *config.Env) Config {
	return Config{Size: env.Int("MNV_PRINCIPAL_CACHE_SIZE", DefaultSize), MaxAge: env.Duration("MNV_PRINCIPAL_CACHE_MAX_AGE", DefaultMaxAge)}
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	if c.Size > 1_000_000 {
		return errors.New("MNV_PRINCIPAL_CACHE_SIZE: at most 1000000 (negative turns the cache off)")
	}
	if c.MaxAge < 0 || c.MaxAge > time.Hour {
		return errors.New("MNV_PRINCIPAL_CACHE_MAX_AGE: must be between 0 (the default) and 1h")
	}
	return nil
}

// Options are the rest of what a Cache needs.
type Options struct {
	// Registerer receives the metrics (nil for none).
	Registerer prometheus.Registerer
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

type entry struct {
	p principal.Principal
	// until is when the entry stops being served: MaxAge after the question was asked, or the
	// credential's own end when sooner.
	until time.Time
}

// Cache is a principal cache in front of an Authenticator.
type Cache struct {
	next   Authenticator
	maxAge time.Duration
	now    func() time.Time
	key    [32]byte
	off    bool

	mu sync.Mutex
	// entries by fingerprint; byClient indexes them for a client's invalidation.
	entries  *lru.LRU[[32]byte, entry]
	byClient map[string]map[[32]byte]struct{}
	// started: a stream said STARTED and has not ended since. staleAfter: how long without a
	// message from it the stream is no longer trusted; heard: its last message.
	started    bool
	staleAfter time.Duration
	heard      time.Time
	// gen changes with every invalidation and every start or end of a stream: an answer asked
	// for under another generation may predate a change, and is not kept.
	gen uint64

	m metrics
}

// New returns a Cache in front of next.
func New(next Authenticator, cfg Config, o Options) (*Cache, error) {
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{next: next, maxAge: cfg.MaxAge, now: o.Now, off: cfg.Size < 0, byClient: map[string]map[[32]byte]struct{}{}}
	if _, err := rand.Read(c.key[:]); err != nil {
		return nil, err
	}
	size := max(cfg.Size, 1)
	var err error
	if c.entries, err = lru.NewLRU(size, c.evicted); err != nil {
		return nil, err
	}
	if c.m, err = newMetrics(o.Registerer); err != nil {
		return nil, err
	}
	return c, nil
}

// evicted keeps the client index in step; called under mu by the LRU.
func (c *Cache) evicted(fp [32]byte, e entry) {
	if set := c.byClient[e.p.ClientID]; set != nil {
		delete(set, fp)
		if len(set) == 0 {
			delete(c.byClient, e.p.ClientID)
		}
	}
}

// Enabled reports whether the cache may ever serve (Size not negative); when not, nothing need
// watch accounts.
func (c *Cache) Enabled() bool { return !c.off }

// AuthenticateAPIKey implements principal.Authenticator.
func (c *Cache) AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (principal.Principal, error) {
	return c.authenticate(ctx, 'k', apiKey, clientID, c.next.AuthenticateAPIKey)
}

// AuthenticateSDKToken implements principal.Authenticator.
func (c *Cache) AuthenticateSDKToken(ctx context.Context, token, clientID string) (principal.Principal, error) {
	return c.authenticate(ctx, 't', token, clientID, c.next.AuthenticateSDKToken)
}

// AuthenticateSession asks accounts every time: a session is never kept, since each use moves
// its idle timeout and a person removed from a client must lose it at once. The console's
// requests are a person's clicks, not an API client's volume.
func (c *Cache) AuthenticateSession(ctx context.Context, token string) (principal.Principal, error) {
	return c.next.AuthenticateSession(ctx, token)
}

// ClientPrincipal reads a client's principal by its id: kept like a credential's, and dropped
// with the client's other entries when accounts pushes a change of it, so a suspension or a
// feature removed applies within the stream's bound.
func (c *Cache) ClientPrincipal(ctx context.Context, clientID string) (principal.Principal, error) {
	return c.authenticate(ctx, 'c', clientID, clientID, func(ctx context.Context, _, clientID string) (principal.Principal, error) {
		return c.next.ClientPrincipal(ctx, clientID)
	})
}

func (c *Cache) fingerprint(kind byte, secret string) [32]byte {
	h := hmac.New(sha256.New, c.key[:])
	h.Write([]byte{kind})
	h.Write([]byte(secret))
	var fp [32]byte
	h.Sum(fp[:0])
	return fp
}

type askFunc func(ctx context.Context, secret, clientID string) (principal.Principal, error)

func (c *Cache) authenticate(ctx context.Context, kind byte, secret, clientID string, ask askFunc) (principal.Principal, error) {
	if c.off {
		return ask(ctx, secret, clientID)
	}
	fp := c.fingerprint(kind, secret)
	now := c.now()
	c.mu.Lock()
	live := c.liveLocked(now)
	if !live && c.started && c.entries.Len() > 0 {
		// A silent stream may resume, but what it kept back is not worth the risk: start empty.
		c.clearLocked()
	}
	gen := c.gen
	if live {
		if e, ok := c.entries.Get(fp); ok {
			if now.Before(e.until) {
				c.mu.Unlock()
				c.m.lookups.WithLabelValues("hit").Inc()
				// As accounts would answer: the credential names its client; another is refused.
				if (clientID != "" || kind == 't') && clientID != e.p.ClientID {
					return principal.Principal{}, principal.ErrUnauthenticated
				}
				return e.p, nil
			}
			c.entries.Remove(fp)
		}
	}
	c.mu.Unlock()
	if live {
		c.m.lookups.WithLabelValues("miss").Inc()
	} else {
		c.m.lookups.WithLabelValues("bypass").Inc()
	}
	p, err := ask(ctx, secret, clientID)
	if err != nil || !live {
		return p, err
	}
	until := now.Add(c.maxAge)
	if p.ValidFor != nil {
		// now is before the question was asked, so this ends no later than the credential.
		until = minTime(until, now.Add(*p.ValidFor))
	}
	c.mu.Lock()
	// Kept only when nothing changed since the question was asked: a change pushed meanwhile
	// may be newer than the answer.
	if c.gen == gen && c.liveLocked(c.now()) && until.After(c.now()) {
		c.entries.Add(fp, entry{p: p, until: until})
		set := c.byClient[p.ClientID]
		if set == nil {
			set = map[[32]byte]struct{}{}
			c.byClient[p.ClientID] = set
		}
		set[fp] = struct{}{}
	}
	c.m.entries.Set(float64(c.entries.Len()))
	c.mu.Unlock()
	return p, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// liveLocked reports whether the stream is trusted at now.
func (c *Cache) liveLocked(now time.Time) bool {
	return c.started && now.Sub(c.heard) < c.staleAfter
}

// Started is told when a stream said STARTED: from now on every change is pushed, and a
// heartbeat comes every beat. The cache starts empty.
func (c *Cache) Started(beat time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.started = true
	// Three missed heartbeats: within a second of accounts' default beat (250 ms), so a stream
	// that died silently stops the cache before a change it missed is a second old.
	c.staleAfter = 3 * beat
	c.heard = c.now()
	c.m.up.Set(1)
	c.m.starts.Inc()
}

// Heard is told of every message of the stream (a heartbeat, a change).
func (c *Cache) Heard() {
	now := c.now()
	c.mu.Lock()
	c.heard = now
	c.mu.Unlock()
}

// Invalidate drops every entry of the client: one of its credentials, or the client itself,
// changed.
func (c *Cache) Invalidate(clientID string) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heard = now
	c.forgetLocked(clientID)
	c.m.invalidations.Inc()
}

// Forget drops every entry of the client as Invalidate does, but is no word from the stream (it
// keeps no stream alive): for a change this process saw go through itself, such as the gateway
// answering a client's own write, so that the client's next call here sees the change without
// waiting for accounts' push.
func (c *Cache) Forget(clientID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(clientID)
}

func (c *Cache) forgetLocked(clientID string) {
	c.gen++
	for fp := range c.byClient[clientID] {
		c.entries.Remove(fp)
	}
	delete(c.byClient, clientID)
	c.m.entries.Set(float64(c.entries.Len()))
}

// Stopped is told when the stream ended, or could not start: nothing is served from the cache
// until the next Started.
func (c *Cache) Stopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = false
	c.clearLocked()
	c.m.up.Set(0)
}

func (c *Cache) clearLocked() {
	c.gen++
	c.entries.Purge()
	clear(c.byClient)
	c.m.entries.Set(0)
}

// Live reports whether the cache may serve now: its stream started and is heard from.
func (c *Cache) Live() bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.liveLocked(now)
}

// StaleAfter is how long the stream may stay silent before the cache stops serving (0 before a
// stream started).
func (c *Cache) StaleAfter() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.staleAfter
}

type metrics struct {
	lookups       *prometheus.CounterVec
	entries       prometheus.Gauge
	up            prometheus.Gauge
	starts        prometheus.Counter
	invalidations prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mnv_principal_cache_lookups_total",
			Help: "Client credentials authenticated and clients read by id, by result: hit (served by the cache), miss (asked accounts, may be kept), bypass (asked accounts: the change stream is down or stale).",
		}, []string{"result"}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mnv_principal_cache_entries", Help: "Principals in the cache."}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mnv_principal_stream_up", Help: "1 while the WatchPrincipals stream to accounts has started and not ended, else 0.",
		}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mnv_principal_stream_starts_total", Help: "WatchPrincipals streams started (each starts the cache empty).",
		}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mnv_principal_cache_invalidations_total", Help: "Changes of principals pushed by accounts.",
		}),
	}
	for _, r := range []string{"hit", "miss", "bypass"} {
		m.lookups.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.lookups, m.entries, m.up, m.starts, m.invalidations} {
			if err := reg.Register(c); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}
