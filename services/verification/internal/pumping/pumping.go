// Package pumping decides whether mnv may send a one-time code by SMS to a number: the rules that
// keep SMS pumping (toll fraud: an attacker makes mnv text numbers whose termination fees it
// shares, paid from a client's balance) from spending a client's money. See
// docs/architecture.md, "Pumping controls".
//
// Rules only: what is stored (the blocked prefixes, the day's spend) is behind the small ports
// declared here, the velocity budgets are a Limiter (platform/ratelimit's, Redis-backed when
// MNV_REDIS_URL is set, which the app hands in: that package also holds gRPC interceptors, so
// this one declares the method it uses rather than import it) and the conversion counts a
// Counters (Redis, counters.go). It imports neither pgx nor gRPC (tests/arch).
package pumping

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/phone"
)

// Reason is why a send was refused: one per rule, stable (the workflow reports it, metrics count
// by it).
type Reason string

// The refusals, in the order the rules are applied.
const (
	// InvalidNumber: not a valid E.164 number.
	InvalidNumber Reason = "INVALID_NUMBER"
	// NotMobile: the numbering plan says the number is not a mobile line (fixed, premium-rate,
	// VoIP…); only MOBILE, and FIXED_LINE_OR_MOBILE where the plan cannot tell, pass.
	NotMobile Reason = "NOT_MOBILE"
	// CountryMismatch: the country the caller gave is not the number's.
	CountryMismatch Reason = "COUNTRY_MISMATCH"
	// CountryNotAllowed: the number's country is not on the client's allow-list (an empty list
	// allows none, the sandbox aside).
	CountryNotAllowed Reason = "COUNTRY_NOT_ALLOWED"
	// PremiumPrefix: the number starts with a prefix of the high-cost deny list.
	PremiumPrefix Reason = "PREMIUM_PREFIX"
	// PrefixBlocked: the number's prefix was blocked (automatically, its conversion having
	// collapsed at volume, or by an operator).
	PrefixBlocked Reason = "PREFIX_BLOCKED"
	// SpendCap: the client's SMS spend today reached its daily cap.
	SpendCap Reason = "SPEND_CAP"
	// NumberVelocity: too many codes to this number for this client lately.
	NumberVelocity Reason = "NUMBER_VELOCITY"
	// AddressVelocity: too many codes asked for this client from the end user's address
	// lately (AllowFrom).
	AddressVelocity Reason = "ADDRESS_VELOCITY"
	// PrefixVelocity: too many codes to this prefix, all clients together, lately.
	PrefixVelocity Reason = "PREFIX_VELOCITY"
)

// Refusal is the error of a refused send.
type Refusal struct {
	Reason Reason
	// RetryAfter is, for the velocity refusals, when the budget has a token again.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return "pumping: refused: " + string(r.Reason) }

// Code is the refusal's reason as a string, which a caller reports without knowing this
// package (the workflow's step reason).
func (r *Refusal) Code() string { return string(r.Reason) }

// ReasonOf returns the reason of a refusal error, or "" for any other error (nil included).
func ReasonOf(err error) Reason {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// EventPrefixBlocked names the automatic block of a prefix: the log line's event field (the
// alert) and what an event of it is called.
const EventPrefixBlocked = "verification.prefix_blocked"

// Block is the record of a blocked prefix.
type Block struct {
	// Prefix is the E.164 prefix blocked ("+4474001"): every number starting with it.
	Prefix string
	// Reason says why ("conversion": automatic).
	Reason string
	// Starts and Verified are the window's counts that decided it.
	Starts, Verified int64
	At               time.Time
}

// Blocks keeps the blocked prefixes: a global (Reference) table, every client's sends to a
// blocked prefix being refused.
type Blocks interface {
	// PrefixBlocked reports whether any of prefixes (every prefix of one number) is blocked.
	PrefixBlocked(ctx context.Context, prefixes []string) (bool, error)
	// BlockPrefix records b unless its prefix is already blocked; created says whether this
	// call recorded it.
	BlockPrefix(ctx context.Context, b Block) (created bool, err error)
}

// Spend tells a client's SMS spend of the current day (UTC), in credits, from the ledger: the
// settled charges and the sends reserved but not yet paid.
type Spend interface {
	SpentToday(ctx context.Context, clientID string) (int64, error)
}

// Counters keeps, per prefix, the starts (requests to send, refused ones included) and the codes
// checked OK in the current window.
type Counters interface {
	// AddStart counts one start to prefix and returns the window's counts after it.
	AddStart(ctx context.Context, prefix string) (starts, verified int64, err error)
	// AddVerified counts one code checked OK for a number of prefix.
	AddVerified(ctx context.Context, prefix string) error
}

// Limiter spends a velocity budget: ratelimit.Limiter's Allow (ratelimit.Store.Limiter).
type Limiter interface {
	Allow(ctx context.Context, key string) (allowed bool, retryAfter time.Duration, err error)
}

// Limit is a velocity budget, ratelimit.Limit's shape (convert with ratelimit.Limit(l)): Rate
// per second (0 or less: off) and Burst.
type Limit struct {
	Rate  float64
	Burst int
}

// Client is what the rules need of the client asking.
type Client struct {
	ID string
	// Countries is the client's SMS allow-list (ISO 3166-1 alpha-2); empty allows none.
	Countries []string
	// Sandbox: the client's codes go to the sandbox SMSC, which costs nothing and reaches no
	// one, so the country allow-list does not apply.
	Sandbox bool
	// DailyCap is the client's own cap on SMS spend per day, in credits; 0 takes Config's.
	DailyCap int64
	// SpentToday, when set, reads the client's spend of the day in place of Ports.Spend: the
	// caller's own transaction, under a per-client lock it takes there and holds until it
	// commits the send it asks about, so concurrent sends each see the others' reservations and
	// the cap holds exactly (docs/architecture.md, "Pumping controls"). It is called only when
	// a cap applies, so a client without one never waits on that lock.
	SpentToday SpendFunc
}

// SpendFunc reads a client's SMS spend of the day, in credits (Client.SpentToday).
type SpendFunc func(ctx context.Context) (int64, error)

// Config are the rules' settings (docs/operations.md, "Pumping controls").
type Config struct {
	// DenyPrefixes are the high-cost E.164 prefixes no code is sent to (DefaultDenyPrefixes).
	DenyPrefixes []string
	// PrefixDigits is how many digits of the E.164 number make its prefix, for the prefix
	// velocity, the conversion counts and the automatic block (default 7: "+4474001").
	PrefixDigits int
	// PrefixLimit is the velocity per prefix across all clients; NumberLimit per client and
	// number; AddressLimit per client and end-user address (an IPv6 address by its /64).
	PrefixLimit, NumberLimit, AddressLimit Limit
	// DailyCap is the SMS spend cap per client and day, in credits; 0 is no cap.
	DailyCap int64
	// BlockMinStarts is the volume at which a prefix's conversion is judged: that many starts
	// in the counters' window; BlockMinConversion the share of them that must end in a code
	// checked OK, below which the prefix is blocked. BlockMinStarts 0 turns the automatic
	// block off.
	BlockMinStarts     int64
	BlockMinConversion float64
	// Window is the conversion counts' window (RedisCounters).
	Window time.Duration
}

// DefaultDenyPrefixes are the non-geographic codes whose termination costs are high and
// shared with the range holder, the ranges SMS pumping favours: Inmarsat (+870), the
// satellite networks of the global mobile satellite system (+881), the international
// networks (+882, +883), international premium-rate (+979) and shared-cost (+808) services,
// and universal personal telecommunication (+878). Operators add the geographic ranges
// their own traffic shows abused.
var DefaultDenyPrefixes = []string{"+870", "+878", "+881", "+882", "+883", "+808", "+979"}

// DefaultConfig is the configuration mnv runs with unless told otherwise.
func DefaultConfig() Config {
	return Config{
		DenyPrefixes: slices.Clone(DefaultDenyPrefixes),
		PrefixDigits: 7,
		// A prefix of 7 digits is a range of up to a few hundred thousand lines: a second's
		// worth, with a minute's burst, is far more than real sign-ups reach across all clients.
		PrefixLimit: Limit{Rate: 1, Burst: 60},
		// Three codes at once (a user who asks again), then one per ten minutes.
		NumberLimit: Limit{Rate: 1.0 / 600, Burst: 3},
		// One address may be many users (a carrier's NAT, an office): a minute per code, ten
		// at once.
		AddressLimit:       Limit{Rate: 1.0 / 60, Burst: 10},
		DailyCap:           1000,
		BlockMinStarts:     200,
		BlockMinConversion: 0.05,
		Window:             DefaultWindow,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	for _, p := range c.DenyPrefixes {
		if !isPrefix(p) {
			return fmt.Errorf("pumping: deny prefix %q is not '+' and 1 to 15 digits", p)
		}
	}
	switch {
	case c.PrefixDigits < 2 || c.PrefixDigits > 12:
		return fmt.Errorf("pumping: prefix digits %d: between 2 and 12", c.PrefixDigits)
	case c.DailyCap < 0:
		return errors.New("pumping: the daily cap is negative")
	case c.BlockMinStarts < 0 || c.BlockMinConversion < 0 || c.BlockMinConversion > 1:
		return errors.New("pumping: the block's minimum starts must be ≥ 0 and its conversion between 0 and 1")
	case c.Window < time.Minute || c.Window > 24*time.Hour:
		return errors.New("pumping: the window must be between 1m and 24h")
	}
	return nil
}

func isPrefix(p string) bool {
	if len(p) < 2 || len(p) > 16 || p[0] != '+' || p[1] == '0' {
		return false
	}
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Ports are what a Guard stores and counts with.
type Ports struct {
	Blocks   Blocks
	Spend    Spend
	Counters Counters
	// PrefixLimiter and NumberLimiter spend the velocity budgets (ratelimit.Store.Limiter with
	// Config's limits, shared through Redis; a limit that is off lets everything through).
	PrefixLimiter, NumberLimiter Limiter
	// AddressLimiter spends the budgets per client and end-user address (AllowFrom); nil: that
	// rule is off.
	AddressLimiter Limiter
	// NumberKey turns a number into the key of its budget, so no number is written to Redis in
	// clear (phone.Hasher.Sum in the app); nil: SHA-256.
	NumberKey func(e164 string) []byte
}

// Guard applies the rules.
type Guard struct {
	cfg   Config
	ports Ports
	log   *zap.Logger

	refused *prometheus.CounterVec
	blocked prometheus.Counter

	// known are the prefixes this process saw blocked, and when: a burst on one does not ask
	// the store again for each start. An entry is believed for knownFor, so a prefix an
	// operator unblocks is sent to again soon after.
	mu    sync.Mutex
	known map[string]time.Time
	// countsDown is set while the counters fail.
	countsDown atomic.Bool
}

// New returns the guard of cfg over ports, its metrics registered with reg (nil: none).
func New(cfg Config, ports Ports, log *zap.Logger, reg prometheus.Registerer) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ports.Blocks == nil || ports.Spend == nil || ports.Counters == nil || ports.PrefixLimiter == nil || ports.NumberLimiter == nil {
		return nil, errors.New("pumping: every port is required")
	}
	if ports.NumberKey == nil {
		ports.NumberKey = func(e164 string) []byte { s := sha256.Sum256([]byte(e164)); return s[:] }
	}
	if log == nil {
		log = zap.NewNop()
	}
	g := &Guard{cfg: cfg, ports: ports, log: log, known: map[string]time.Time{}}
	g.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "pumping", Name: "refused_total",
		Help: "SMS sends the pumping controls refused, by reason.",
	}, []string{"reason"})
	g.blocked = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "pumping", Name: "prefixes_blocked_total",
		Help: "Prefixes blocked automatically because their conversion collapsed at volume (each is an alert).",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{g.refused, g.blocked} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// Prefix is the number's prefix for the velocity, the counts and the block: its first
// PrefixDigits digits after '+'.
func (g *Guard) Prefix(e164 string) string {
	if n := 1 + g.cfg.PrefixDigits; len(e164) > n {
		return e164[:n]
	}
	return e164
}

// Allow decides whether a code may be sent by SMS to e164 for c, country being the number's
// country as the caller sees it ("" when it does not say). nil: send; a *Refusal: not, and
// why; another error: a store failed, and the caller decides (the workflow refuses: a guard
// that cannot look must not let money out).
//
// The cheap rules come first; every start of a valid number is counted for its prefix's
// conversion, refused or not (an attack is measured by what it asks, so a prefix refused by the
// deny list or the velocity still shows its collapse); the budgets are spent last, so a send
// refused by a rule costs none of them.
func (g *Guard) Allow(ctx context.Context, c Client, e164, country string) error {
	return g.AllowFrom(ctx, c, e164, country, netip.Addr{})
}

// AllowFrom is Allow for a start whose end user's address is known (a browser flow's, a
// backend's X-Forwarded-For it vouches for): the budget per client and address applies too.
// An invalid addr skips that rule.
func (g *Guard) AllowFrom(ctx context.Context, c Client, e164, country string, addr netip.Addr) error {
	n, err := phone.Parse(e164)
	if err != nil {
		return g.refuse(InvalidNumber, 0)
	}
	prefix := g.Prefix(n.E164)
	if err := g.count(ctx, prefix); err != nil {
		return err
	}
	switch n.LineType() {
	case phone.LineMobile, phone.LineFixedOrMobile:
	default:
		return g.refuse(NotMobile, 0)
	}
	if country != "" && !strings.EqualFold(country, n.Region) {
		return g.refuse(CountryMismatch, 0)
	}
	if !c.Sandbox && !slices.ContainsFunc(c.Countries, func(cc string) bool { return strings.EqualFold(cc, n.Region) }) {
		return g.refuse(CountryNotAllowed, 0)
	}
	if slices.ContainsFunc(g.cfg.DenyPrefixes, func(p string) bool { return strings.HasPrefix(n.E164, p) }) {
		return g.refuse(PremiumPrefix, 0)
	}
	blocked, err := g.isBlocked(ctx, n.E164, prefix)
	if err != nil {
		return err
	}
	if blocked {
		return g.refuse(PrefixBlocked, 0)
	}
	if limit := cmpOr(c.DailyCap, g.cfg.DailyCap); limit > 0 {
		read := c.SpentToday
		if read == nil {
			read = func(ctx context.Context) (int64, error) { return g.ports.Spend.SpentToday(ctx, c.ID) }
		}
		spent, err := read(ctx)
		if err != nil {
			return fmt.Errorf("pumping: spend: %w", err)
		}
		if spent >= limit {
			return g.refuse(SpendCap, 0)
		}
	}
	key := c.ID + ":" + hex.EncodeToString(g.ports.NumberKey(n.E164))
	if ok, wait, err := g.ports.NumberLimiter.Allow(ctx, key); err != nil {
		return fmt.Errorf("pumping: number velocity: %w", err)
	} else if !ok {
		return g.refuse(NumberVelocity, wait)
	}
	if addr.IsValid() && g.ports.AddressLimiter != nil {
		if ok, wait, err := g.ports.AddressLimiter.Allow(ctx, c.ID+":"+addressKey(addr)); err != nil {
			return fmt.Errorf("pumping: address velocity: %w", err)
		} else if !ok {
			return g.refuse(AddressVelocity, wait)
		}
	}
	if ok, wait, err := g.ports.PrefixLimiter.Allow(ctx, prefix); err != nil {
		return fmt.Errorf("pumping: prefix velocity: %w", err)
	} else if !ok {
		return g.refuse(PrefixVelocity, wait)
	}
	return nil
}

// addressKey is an address's budget key: an IPv4 address itself, an IPv6 address its /64 (one
// subscriber's usual allocation, which it can walk through at will).
func addressKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

func (g *Guard) refuse(r Reason, wait time.Duration) error {
	g.refused.WithLabelValues(string(r)).Inc()
	return &Refusal{Reason: r, RetryAfter: wait}
}

// Verified counts a code checked OK for e164, the numerator of its prefix's conversion. It
// never fails its caller: a code checked OK stays checked when the counts are away (the
// failure is logged as AddStart's is). A number that does not parse had no start counted.
func (g *Guard) Verified(ctx context.Context, e164 string) {
	n, perr := phone.Parse(e164)
	if perr != nil {
		return
	}
	if err := g.ports.Counters.AddVerified(ctx, g.Prefix(n.E164)); err != nil {
		g.countsFailed(err)
	}
}

// countsFailed logs the start of a counters outage, once.
func (g *Guard) countsFailed(err error) {
	if g.countsDown.CompareAndSwap(false, true) {
		g.log.Warn("pumping: conversion counts unavailable; prefixes are not judged until Redis answers", zap.Error(err))
	}
}

// count counts a start to prefix (a counters failure is logged and passes) and blocks the prefix when its conversion collapsed at volume:
// at least BlockMinStarts starts in the window and fewer than BlockMinConversion of them
// checked OK. The block is recorded once (the store keeps one row per prefix; this process
// remembers it), and only its recording raises the alert: metric, warn line, event name.
func (g *Guard) count(ctx context.Context, prefix string) error {
	starts, verified, err := g.ports.Counters.AddStart(ctx, prefix)
	if err != nil {
		// The counts are Redis's. Without them no collapse is seen, but the other rules hold
		// (the velocity falls back to this replica's buckets): as for the API's limits, a
		// Redis outage costs the sharing, never the sends. Logged when it starts and ends.
		g.countsFailed(err)
		return nil
	}
	if g.countsDown.CompareAndSwap(true, false) {
		g.log.Info("pumping: conversion counts available again")
	}
	if g.cfg.BlockMinStarts == 0 || starts < g.cfg.BlockMinStarts || float64(verified) >= g.cfg.BlockMinConversion*float64(starts) {
		return nil
	}
	if g.seen(prefix) {
		return nil
	}
	created, err := g.ports.Blocks.BlockPrefix(ctx, Block{Prefix: prefix, Reason: "conversion", Starts: starts, Verified: verified, At: time.Now()})
	if err != nil {
		return fmt.Errorf("pumping: block: %w", err)
	}
	g.remember(prefix)
	if created {
		g.blocked.Inc()
		g.log.Warn("pumping: prefix blocked, its conversion collapsed at volume",
			zap.String("event", EventPrefixBlocked), zap.String("prefix", prefix),
			zap.Int64("starts", starts), zap.Int64("verified", verified))
	}
	return nil
}

// isBlocked asks the store whether any prefix of the number is blocked, unless this process
// already saw its prefix blocked.
func (g *Guard) isBlocked(ctx context.Context, e164, prefix string) (bool, error) {
	if g.seen(prefix) {
		return true, nil
	}
	var prefixes []string
	for i := 2; i <= len(e164); i++ {
		prefixes = append(prefixes, e164[:i])
	}
	b, err := g.ports.Blocks.PrefixBlocked(ctx, prefixes)
	if err != nil {
		return false, fmt.Errorf("pumping: blocks: %w", err)
	}
	return b, nil
}

// knownFor is how long this process believes a block it saw without asking the store again.
const knownFor = time.Minute

func (g *Guard) seen(prefix string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.known[prefix]
	if ok && time.Since(at) > knownFor {
		delete(g.known, prefix)
		return false
	}
	return ok
}

func (g *Guard) remember(prefix string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known[prefix] = time.Now()
}
