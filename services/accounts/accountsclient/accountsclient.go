// Package accountsclient is how the other processes use accounts: it authenticates callers (a
// principal.Authenticator over AccountsInternalService, with the principal cache of
// accountsclient/principalcache in front) and is their money.Ledger, turning the reason of
// accounts' answer back into the value accounts' rules returned. It is accounts', in a module of
// its own that depends on nothing of accounts but its generated contract: the gateway and the
// other services build with it and without accounts' module (and its database driver).
package accountsclient

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient/principalcache"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/groupcommit"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// Client calls accounts with the caller's internal credential.
type Client struct {
	conn     *grpc.ClientConn
	internal accountsv1.AccountsInternalServiceClient
	debits   *groupcommit.Batcher[*accountsv1.DebitRequest, charged]
	// lastReset is when a call last asked the connection to reconnect now (unix nanoseconds).
	lastReset atomic.Int64
}

// A process that starts beside accounts (a rollout, make run, a test suite) may find it not
// listening yet. grpc-go then fails every call at once until its reconnect backoff (a second,
// growing) lets it try again, so the first requests after a start were 503 while accounts was
// up. A read now waits up to readyWait for the connection, asking it to reconnect at once (at
// most every resetEvery, so an outage is not a storm of dials); past it, it fails as before.
const (
	readyWait  = time.Second
	resetEvery = 100 * time.Millisecond
)

// awaitConn returns once the connection to accounts is up, or readyWait (or ctx) ended.
func (c *Client) awaitConn(ctx context.Context) {
	s := c.conn.GetState()
	if s == connectivity.Ready {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	for s != connectivity.Ready && s != connectivity.Shutdown {
		switch s {
		case connectivity.Idle:
			c.conn.Connect()
		case connectivity.TransientFailure:
			if now, last := time.Now().UnixNano(), c.lastReset.Load(); now-last >= int64(resetEvery) && c.lastReset.CompareAndSwap(last, now) {
				c.conn.ResetConnectBackoff()
			}
		}
		wait, stop := context.WithTimeout(ctx, resetEvery)
		changed := c.conn.WaitForStateChange(wait, s)
		stop()
		if !changed && ctx.Err() != nil {
			return
		}
		s = c.conn.GetState()
	}
}

// charged is one debit's outcome in a DebitMany batch.
type charged struct {
	c   money.Charged
	err error
}

// Debits wait for at most this long in a DebitMany call: less than a request gives a charge.
const debitTimeout = 10 * time.Second

// debitCalls is how many DebitMany calls may be in flight at once (debits spread over them by
// reference). One: a call costs mostly per call, in both processes. With two, make bench's
// verifies cost accounts 25% more CPU each, for no better latency (two runs of each, issue 15).
const debitCalls = 1

// Dial connects to accounts at addr as the caller o names.
func Dial(addr string, o grpcclient.Options) (*Client, error) {
	conn, err := grpcclient.Dial(addr, o)
	if err != nil {
		return nil, fmt.Errorf("dial accounts at %s: %w", addr, err)
	}
	c := &Client{conn: conn, internal: accountsv1.NewAccountsInternalServiceClient(conn)}
	cfg := groupcommit.Config{Shards: debitCalls, MaxBatch: money.MaxDebitsPerCall, Timeout: debitTimeout}
	if tracing.Enabled() { // off, debits pay nothing for spans
		cfg.Span = "debit many"
	}
	c.debits = groupcommit.New(cfg, c.debitMany)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// AuthenticateAPIKey implements principal.Authenticator.
func (c *Client) AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (principal.Principal, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.Authenticate(ctx, &accountsv1.AuthenticateRequest{ApiKey: apiKey, ClientId: clientID})
	if err != nil {
		return principal.Principal{}, authErr(err)
	}
	return auth.PrincipalFromProto(resp.GetPrincipal()), nil
}

// AuthenticateSDKToken implements principal.Authenticator.
func (c *Client) AuthenticateSDKToken(ctx context.Context, token, clientID string) (principal.Principal, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.AuthenticateSdkToken(ctx, &accountsv1.AuthenticateSdkTokenRequest{SdkToken: token, ClientId: clientID})
	if err != nil {
		return principal.Principal{}, authErr(err)
	}
	return auth.PrincipalFromProto(resp.GetPrincipal()), nil
}

// AuthenticateSession resolves a person's console session to its principal
// (principal.ErrUnauthenticated for an unknown, ended or idle session).
func (c *Client) AuthenticateSession(ctx context.Context, token string) (principal.Principal, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.AuthenticateSession(ctx, &accountsv1.AuthenticateSessionRequest{SessionToken: token})
	if err != nil {
		return principal.Principal{}, authErr(err)
	}
	return auth.PrincipalFromProto(resp.GetPrincipal()), nil
}

// AuditEvent is what a person did through their session, as the gateway records it: Action is
// the route's RPC, Target the ids its path named. ID and At are the gateway's, so a retried
// record lands once and keeps the time of the action.
type AuditEvent struct {
	ID, ClientID, UserID, SessionID string
	At                              time.Time
	Action, Target                  string
	Status                          int
	Addr, UserAgent                 string
}

// RecordAudit records an audit event with accounts; a repeat of its ID is no second event.
func (c *Client) RecordAudit(ctx context.Context, e AuditEvent) error {
	c.awaitConn(ctx)
	req := &accountsv1.RecordAuditRequest{
		EventId: e.ID, ClientId: e.ClientID, UserId: e.UserID, SessionId: e.SessionID, Action: e.Action, Target: e.Target,
		Status: int32(min(max(e.Status, 0), 999)), ClientAddress: e.Addr, UserAgent: e.UserAgent,
	}
	if !e.At.IsZero() {
		req.At = timestamppb.New(e.At)
	}
	_, err := c.internal.RecordAudit(ctx, req)
	return err
}

// AuthenticateClientSecret resolves a client id and its client secret to the client's principal
// (principal.ErrUnauthenticated for an unknown client or a wrong secret).
func (c *Client) AuthenticateClientSecret(ctx context.Context, clientID, secret string) (principal.Principal, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.AuthenticateClientSecret(ctx, &accountsv1.AuthenticateClientSecretRequest{ClientId: clientID, ClientSecret: secret})
	if err != nil {
		return principal.Principal{}, authErr(err)
	}
	return auth.PrincipalFromProto(resp.GetPrincipal()), nil
}

// ClientPrincipal reads a client's principal by its id, for a caller that holds a grant of the
// client's made earlier (the CAMARA facade's access tokens): fault.ErrNotFound for an unknown
// client, fault.ErrUnavailable when accounts does not answer.
func (c *Client) ClientPrincipal(ctx context.Context, clientID string) (principal.Principal, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.GetClientPrincipal(ctx, &accountsv1.GetClientPrincipalRequest{ClientId: clientID})
	switch status.Code(err) {
	case codes.OK:
		return auth.PrincipalFromProto(resp.GetPrincipal()), nil
	case codes.NotFound, codes.InvalidArgument:
		return principal.Principal{}, fault.ErrNotFound
	case codes.Unavailable, codes.DeadlineExceeded:
		return principal.Principal{}, fmt.Errorf("%w: client principal: %w", fault.ErrUnavailable, err)
	}
	return principal.Principal{}, fmt.Errorf("client principal: %w", err)
}

func authErr(err error) error {
	if status.Code(err) == codes.Unauthenticated {
		return principal.ErrUnauthenticated
	}
	return fmt.Errorf("authenticate with accounts: %w", err)
}

var _ money.Ledger = (*Client)(nil)

// Debit implements money.Ledger. Concurrent debits share DebitMany calls: under load a verify
// no longer pays a call of its own, alone it is a call of one.
func (c *Client) Debit(ctx context.Context, ch money.Charge) (money.Charged, error) {
	if err := ctx.Err(); err != nil { // queued, it would be charged with nobody to hear
		return money.Charged{}, money.Unknown("debit", err, true)
	}
	out, err := c.debits.Do(ctx, ch.Reference, &accountsv1.DebitRequest{
		ClientId: ch.ClientID, Kind: ledgerKind(ch.Kind), Variant: ch.Variant, Reference: ch.Reference,
	})
	switch {
	case err == nil:
		return out.c, out.err
	case ctx.Err() != nil: // gone before its batch answered, which may still charge it
		return money.Charged{}, money.Unknown("debit", err, true)
	}
	return money.Charged{}, err // the call failed: debitMany's unknown outcome
}

// debitMany charges a batch of debits in one call, each answered as Debit would answer it.
func (c *Client) debitMany(ctx context.Context, debits []*accountsv1.DebitRequest) ([]charged, error) {
	resp, err := c.internal.DebitMany(ctx, &accountsv1.DebitManyRequest{Debits: debits})
	if status.Code(err) == codes.Unimplemented {
		// An accounts older than DebitMany, during a rolling upgrade: one call per debit.
		out := make([]charged, len(debits))
		for i, d := range debits {
			out[i] = c.debitOne(ctx, d)
		}
		return out, nil
	}
	if err != nil {
		return nil, unknown("debit", err)
	}
	if len(resp.GetOutcomes()) != len(debits) {
		return nil, money.Unknown("debit", fmt.Errorf("%d outcomes for %d debits", len(resp.GetOutcomes()), len(debits)), false)
	}
	out := make([]charged, len(debits))
	for i, o := range resp.GetOutcomes() {
		if f := o.GetFailure(); f != nil {
			d := apierr.Details{Code: codes.Code(f.GetCode()), Reason: fault.Reason(f.GetReason()), Field: f.GetField(), Message: f.GetMessage()}
			out[i].err = debitErr(d.Err())
			continue
		}
		out[i].c = chargedOf(o.GetDebit())
	}
	return out, nil
}

func (c *Client) debitOne(ctx context.Context, d *accountsv1.DebitRequest) charged {
	resp, err := c.internal.Debit(ctx, d)
	if err != nil {
		return charged{err: debitErr(err)}
	}
	return charged{c: chargedOf(resp)}
}

// debitErr is the error of a debit accounts answered with err: a refusal is the very money
// error of its reason, anything else an unknown outcome.
func debitErr(err error) error {
	if refused, ok := money.Refusal(apierr.Parse(err).Reason); ok {
		return refused
	}
	return unknown("debit", err)
}

func chargedOf(r *accountsv1.DebitResponse) money.Charged {
	return money.Charged{EntryID: r.GetEntryId(), Amount: r.GetCharged(), BalanceAfter: r.GetBalanceAfter(), Replayed: r.GetReplayed()}
}

// Refund implements money.Ledger.
func (c *Client) Refund(ctx context.Context, r money.Refund) (money.Refunded, error) {
	resp, err := c.internal.Refund(ctx, &accountsv1.RefundRequest{ClientId: r.ClientID, Reference: r.Reference, Description: r.Description})
	if err != nil {
		if apierr.Parse(err).Reason == fault.NotFound {
			return money.Refunded{}, money.ErrNothingToRefund
		}
		return money.Refunded{}, unknown("refund", err)
	}
	return money.Refunded{EntryID: resp.GetEntryId(), Amount: resp.GetRefunded(), BalanceAfter: resp.GetBalanceAfter(), Replayed: resp.GetReplayed()}, nil
}

// Balance implements money.Ledger.
func (c *Client) Balance(ctx context.Context, clientID string) (int64, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: clientID})
	if err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	return resp.GetBalance(), nil
}

// LedgerKinds is the one table between money's kinds and accounts' LedgerKind, which accounts'
// server reads too (TestLedgerKinds holds it to both sides).
var LedgerKinds = enumtable.New(map[money.Kind]accountsv1.LedgerKind{
	money.KindTopUp:             accountsv1.LedgerKind_LEDGER_KIND_TOP_UP,
	money.KindVerification:      accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION,
	money.KindConnectEnrichment: accountsv1.LedgerKind_LEDGER_KIND_CONNECT_ENRICHMENT,
	money.KindStuckPlusReveal:   accountsv1.LedgerKind_LEDGER_KIND_STUCK_PLUS_REVEAL,
	money.KindVerificationStep:  accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION_STEP,
	money.KindRefund:            accountsv1.LedgerKind_LEDGER_KIND_REFUND,
	money.KindAdjustment:        accountsv1.LedgerKind_LEDGER_KIND_ADJUSTMENT,
})

// ledgerKind is k as accounts' protos name it.
func ledgerKind(k money.Kind) accountsv1.LedgerKind { return LedgerKinds.Enum(k) }

// unknown is the error of a money call that accounts did not answer with a rule of its own:
// its outcome is unknown, and the call was away when accounts could not be reached or did not
// answer in time.
func unknown(op string, err error) error {
	code := status.Code(err)
	return money.Unknown(op, err, code == codes.Unavailable || code == codes.DeadlineExceeded)
}

// AllowsWebOrigin tells whether a browser page whose Origin header is origin may capture the
// client's browser flows.
func (c *Client) AllowsWebOrigin(ctx context.Context, clientID, origin string) (bool, error) {
	c.awaitConn(ctx)
	resp, err := c.internal.CheckWebOrigin(ctx, &accountsv1.CheckWebOriginRequest{ClientId: clientID, Origin: origin})
	if err != nil {
		return false, fmt.Errorf("check web origin: %w", err)
	}
	return resp.GetAllowed(), nil
}

// AllowsRedirectURI tells whether an authorization request of the client may send its code to
// uri (one of its registered redirect URIs, exactly), and whether it registered any.
func (c *Client) AllowsRedirectURI(ctx context.Context, clientID, uri string) (allowed, registered bool, err error) {
	c.awaitConn(ctx)
	resp, err := c.internal.CheckRedirectUri(ctx, &accountsv1.CheckRedirectUriRequest{ClientId: clientID, RedirectUri: uri})
	if err != nil {
		return false, false, fmt.Errorf("check redirect uri: %w", err)
	}
	return resp.GetAllowed(), resp.GetRegistered(), nil
}

// startGrace is how long WatchPrincipals waits quietly for its first stream (a var so a test
// can shorten it).
var startGrace = 20 * time.Second

// Watcher is told what the WatchPrincipals stream says (principalcache.Cache).
type Watcher interface {
	Started(beat time.Duration)
	Heard()
	Invalidate(clientID string)
	Stopped()
	// StaleAfter is how long the stream may stay silent before the watcher stops trusting it.
	StaleAfter() time.Duration
}

// WatchPrincipals keeps a WatchPrincipals stream to accounts open until ctx ends and tells w
// what it says. A stream that ends, fails to start or stays silent for twice w.StaleAfter is
// told as Stopped (w then asks accounts on every call) and opened again with backoff.
//
// Until the first stream has started, a failure is logged at debug level for startGrace: the
// services of a suite start together, and accounts refuses the stream until it LISTENs, so a
// few refusals at start are the normal course and not a fault. Past startGrace, or once a
// stream was up and is lost, each failure is a warning.
func (c *Client) WatchPrincipals(ctx context.Context, w Watcher, log *zap.Logger) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 5*time.Second
	began, everStarted := time.Now(), false
	for ctx.Err() == nil {
		started, err := c.watch(ctx, w)
		w.Stopped()
		if ctx.Err() != nil {
			return
		}
		if started {
			b.Reset()
			everStarted = true
		}
		wait := b.NextBackOff()
		if !everStarted && time.Since(began) < startGrace {
			log.Debug("principal changes from accounts not received yet; authenticating every call with accounts until the stream is up",
				zap.Error(err), zap.Duration("retry_in", wait))
		} else {
			log.Warn("principal changes from accounts interrupted; authenticating every call with accounts until the stream is back",
				zap.Error(err), zap.Duration("retry_in", wait))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// Dial again now, not after gRPC's own backoff (a second and growing): the connection
		// also carries every call's authentication, and a start-up race with accounts left
		// calls failing fast for most of a second after accounts was up.
		c.conn.ResetConnectBackoff()
	}
}

// watch runs one stream; started tells whether it got as far as STARTED.
func (c *Client) watch(ctx context.Context, w Watcher) (started bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stream, err := c.internal.WatchPrincipals(ctx, &accountsv1.WatchPrincipalsRequest{})
	if err != nil {
		return false, err
	}
	// A stream that goes silent (a peer that vanished without closing) is ended by this
	// watchdog; until then the watcher itself stops trusting it after StaleAfter.
	silence := 5 * time.Second
	dog := time.AfterFunc(silence, func() { cancel(errors.New("no message from accounts")) })
	defer dog.Stop()
	for {
		m, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				return started, cause
			}
			return started, err
		}
		switch m.GetKind() {
		case accountsv1.WatchPrincipalsResponse_KIND_STARTED:
			beat := m.GetHeartbeatEvery().AsDuration()
			if beat <= 0 || started {
				return started, errors.New("accounts started the principal stream twice or without a heartbeat")
			}
			started = true
			w.Started(beat)
			silence = 2 * w.StaleAfter()
		case accountsv1.WatchPrincipalsResponse_KIND_HEARTBEAT:
			w.Heard()
		case accountsv1.WatchPrincipalsResponse_KIND_CLIENT, accountsv1.WatchPrincipalsResponse_KIND_API_KEY, accountsv1.WatchPrincipalsResponse_KIND_SDK_TOKEN:
			if m.GetClientId() == "" {
				return started, errors.New("accounts pushed a change without its client")
			}
			w.Invalidate(m.GetClientId())
		default:
			// A kind this version does not know may be a change: start over rather than guess.
			return started, fmt.Errorf("accounts pushed an unknown principal change %v", m.GetKind())
		}
		if !started {
			return false, errors.New("accounts pushed a change before STARTED")
		}
		dog.Reset(silence)
	}
}

// Cached returns the Authenticator the services' guards use: a principal cache in front of c
// (principalcache), and watch, which keeps the cache's WatchPrincipals stream and must run until
// the process stops (without it the cache never serves). cfg.Size < 0 turns the cache off.
func (c *Client) Cached(cfg principalcache.Config, reg prometheus.Registerer, log *zap.Logger) (_ *principalcache.Cache, watch func(ctx context.Context), _ error) {
	cache, err := principalcache.New(c, cfg, principalcache.Options{Registerer: reg})
	if err != nil {
		return nil, nil, fmt.Errorf("principal cache: register metrics: %w", err)
	}
	if !cache.Enabled() {
		return cache, func(context.Context) {}, nil
	}
	return cache, func(ctx context.Context) { c.WatchPrincipals(ctx, cache, log) }, nil
}
