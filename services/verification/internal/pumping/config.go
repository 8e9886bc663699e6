package pumping

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/mnvhq/mnv/services/platform/config"
)

// LoadConfig reads the MNV_PUMPING_* variables over DefaultConfig (docs/operations.md, "Pumping
// controls"). Check the result with Validate.
func LoadConfig(env *config.Env) Config {
	c := DefaultConfig()
	if v := env.String("MNV_PUMPING_DENY_PREFIXES", ""); v != "" {
		c.DenyPrefixes = nil
		if v != "none" {
			for _, p := range strings.Split(v, ",") {
				c.DenyPrefixes = append(c.DenyPrefixes, strings.TrimSpace(p))
			}
		}
	}
	c.PrefixDigits = env.Int("MNV_PUMPING_PREFIX_DIGITS", c.PrefixDigits)
	c.PrefixLimit = Limit{
		Rate:  env.Float("MNV_PUMPING_PREFIX_RATE", c.PrefixLimit.Rate),
		Burst: env.Int("MNV_PUMPING_PREFIX_BURST", c.PrefixLimit.Burst),
	}
	c.NumberLimit = Limit{
		Rate:  env.Float("MNV_PUMPING_NUMBER_PER_HOUR", c.NumberLimit.Rate*3600) / 3600,
		Burst: env.Int("MNV_PUMPING_NUMBER_BURST", c.NumberLimit.Burst),
	}
	c.AddressLimit = Limit{
		Rate:  env.Float("MNV_PUMPING_ADDRESS_PER_HOUR", c.AddressLimit.Rate*3600) / 3600,
		Burst: env.Int("MNV_PUMPING_ADDRESS_BURST", c.AddressLimit.Burst),
	}
	c.DailyCap = int64(env.Int("MNV_PUMPING_DAILY_CAP", int(c.DailyCap)))
	c.BlockMinStarts = int64(env.Int("MNV_PUMPING_BLOCK_MIN_STARTS", int(c.BlockMinStarts)))
	c.BlockMinConversion = env.Float("MNV_PUMPING_BLOCK_MIN_CONVERSION", c.BlockMinConversion)
	c.Window = env.Duration("MNV_PUMPING_WINDOW", c.Window)
	return c
}

// Clients tells the rules what they need of a client by its id: its allow-list, whether it is a
// sandbox client, its own daily cap. Where those are kept is the caller's.
type Clients interface {
	PumpingClient(ctx context.Context, clientID string) (Client, error)
}

// ByID is the guard asked by client id, as the workflow asks it (its PumpingGuard port).
type ByID struct {
	Guard   *Guard
	Clients Clients
}

// Allow reads the client and applies the rules (Guard.Allow).
func (b ByID) Allow(ctx context.Context, clientID, number, country string) error {
	return b.AllowFrom(ctx, clientID, number, country, netip.Addr{})
}

// AllowFrom is Allow with the end user's address (Guard.AllowFrom).
func (b ByID) AllowFrom(ctx context.Context, clientID, number, country string, addr netip.Addr) error {
	c, err := b.Clients.PumpingClient(ctx, clientID)
	if err != nil {
		return fmt.Errorf("pumping: client: %w", err)
	}
	c.ID = clientID
	return b.Guard.AllowFrom(ctx, c, number, country, addr)
}

// Request is one send asked by client id.
type Request struct {
	ClientID, Number, Country string
	// Sandbox: the caller knows the client to be a sandbox client (its principal's SANDBOX
	// feature, kept by the workflow from its start); Clients may say so too.
	Sandbox bool
	// Addr is the end user's address; invalid skips the per-address budget.
	Addr netip.Addr
	// SpentToday, when set, is the client's spend of the day as the caller's transaction sees
	// it under its per-client lock (Client.SpentToday).
	SpentToday SpendFunc
}

// Check reads the client and applies the rules to r (Guard.AllowFrom).
func (b ByID) Check(ctx context.Context, r Request) error {
	c, err := b.Clients.PumpingClient(ctx, r.ClientID)
	if err != nil {
		return fmt.Errorf("pumping: client: %w", err)
	}
	c.ID = r.ClientID
	c.Sandbox = c.Sandbox || r.Sandbox
	if r.SpentToday != nil {
		c.SpentToday = r.SpentToday
	}
	return b.Guard.AllowFrom(ctx, c, r.Number, r.Country, r.Addr)
}

// Verified counts a code checked OK for number (Guard.Verified): the workflow calls it, or no
// prefix ever converts.
func (b ByID) Verified(ctx context.Context, number string) {
	b.Guard.Verified(ctx, number)
}
