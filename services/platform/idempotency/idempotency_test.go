package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/idempotency/idemkey"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/principal"
)

const (
	schema  = "idemtest"
	mCreate = "/test.Svc/Create"
	mCharge = "/test.Svc/Charge"
	mGet    = "/test.Svc/Get"
)

// Client ids are uuids, as the table keeps them.
const (
	c1 = "00000000-0000-4000-8000-0000000000c1"
	c2 = "00000000-0000-4000-8000-0000000000c2"
	c3 = "00000000-0000-4000-8000-0000000000c3"
)

// mainSet stands for a service's own migrations: none, as for a service with no tables of its
// own yet.
var mainSet = fstest.MapFS{}

type env struct {
	pool    *pgxpool.Pool
	spec    string // of keyring
	keyring *crypto.Keyring
	store   *idempotency.Store
}

// TestStore runs every case on one database: creating a database is the slow part.
func TestStore(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name string
		run  func(*testing.T, env)
	}{
		{"UnaryInterceptor", testUnaryInterceptor},
		{"StoredAnswerIsSealed", testStoredAnswerIsSealed},
		{"InFlight", testInFlight},
		{"StaleKeys", testStaleKeys},
		{"TamperedAnswerIsNotReplayed", testTamperedAnswerIsNotReplayed},
		{"ReplayHeaderOverGRPC", testReplayHeaderOverGRPC},
		{"KeyFromContext", testKeyFromContext},
		{"ForgetTaggedAnswers", testForgetTaggedAnswers},
		{"UpgradeFromClientScope", testUpgradeFromClientScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, e) })
	}
}

func setup(t *testing.T) env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 8})
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pg.Migrate(ctx, pool, schema, mainSet, idempotency.Migrations()); err != nil {
		t.Fatalf("pg.Migrate: %v", err)
	}
	spec := crypto.NewKeySpec("k1")
	keyring, err := crypto.ParseKeyring(spec)
	if err != nil {
		t.Fatal(err)
	}
	return env{pool: pool, spec: spec, keyring: keyring, store: idempotency.New(pool, schema, keyring, zap.NewNop(), mCreate)}
}

// counter is a handler that counts its runs and answers with a message naming the run, so a
// replayed answer can be told from a fresh one.
type counter struct {
	mu       sync.Mutex
	calls    int
	err      error // returned (once) when set
	withResp bool  // return an answer along with err (gRPC drops it; the store must too)
}

func (c *counter) handle(ctx context.Context, req any) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	client := "-"
	if p, ok := principal.FromContext(ctx); ok {
		client = p.ClientID
	}
	var in string
	if m, ok := req.(*wrapperspb.StringValue); ok {
		in = m.GetValue()
	}
	resp := wrapperspb.String("created " + in + " run " + string(rune('0'+c.calls)) + " for " + client)
	if c.err != nil {
		err := c.err
		c.err = nil
		if c.withResp {
			return resp, err
		}
		return nil, err
	}
	return resp, nil
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// call is one request through the interceptor.
type call struct {
	client string // principal's client id; "" for no principal
	// cred is the principal's credential: "key:<id>" (an API key), "sdk:<id>" (an SDK token),
	// "none" (neither); when empty, the client's one API key "key:<client>".
	cred   string
	md     metadata.MD
	method string // mCreate when empty
	req    any    // a *wrapperspb.StringValue, or anything else
}

// principal is the principal of client calling with cred (see call.cred).
func principalOf(client, cred string) principal.Principal {
	p := principal.Principal{ClientID: client}
	if cred == "" {
		cred = "key:" + client
	}
	switch kind, id, _ := strings.Cut(cred, ":"); kind {
	case "key":
		p.KeyID = id
	case "sdk":
		p.SDKTokenID = id
	}
	return p
}

func key(k string) metadata.MD { return metadata.Pairs(idemkey.MD, k) }

func req(s string) *wrapperspb.StringValue { return wrapperspb.String(s) }

func do(store *idempotency.Store, h *counter, c call) (any, error) {
	ctx := context.Background()
	if c.md != nil {
		ctx = metadata.NewIncomingContext(ctx, c.md)
	}
	if c.client != "" {
		ctx = principal.WithPrincipal(ctx, principalOf(c.client, c.cred))
	}
	method := c.method
	if method == "" {
		method = mCreate
	}
	return store.UnaryInterceptor()(ctx, c.req, &grpc.UnaryServerInfo{FullMethod: method}, h.handle)
}

func testUnaryInterceptor(t *testing.T, e env) {
	twoMethods := idempotency.New(e.pool, schema, e.keyring, zap.NewNop(), mCreate, mCharge)
	errHandler := apierr.New(codes.Unavailable, fault.Unavailable, "downstream is down")
	const clientUUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

	type step struct {
		call
		store      *idempotency.Store // e.store when nil
		handlerErr error              // the handler fails this time
		errResp    bool               // and returns an answer along with its error
		wantCode   codes.Code
		wantReason fault.Reason // checked when wantCode != OK
		wantCalls  int          // handler runs so far in this case
		sameAs     int          // 1-based step whose answer this one must equal; 0: a fresh answer
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"no header: the handler runs each time", []step{
			{call: call{client: c1, req: req("a")}, wantCalls: 1},
			{call: call{client: c1, req: req("a")}, wantCalls: 2},
			{call: call{client: c1, md: metadata.Pairs("other", "x"), req: req("a")}, wantCalls: 3},
		}},
		{"same key, same request: runs once and replays the first answer", []step{
			{call: call{client: c1, md: key("same-1"), req: req("a")}, wantCalls: 1},
			{call: call{client: c1, md: key("same-1"), req: req("a")}, wantCalls: 1, sameAs: 1},
			{call: call{client: c1, md: key("same-1"), req: req("a")}, wantCalls: 1, sameAs: 1},
		}},
		{"same key, different request: mismatch", []step{
			{call: call{client: c1, md: key("mismatch-1"), req: req("a")}, wantCalls: 1},
			{call: call{client: c1, md: key("mismatch-1"), req: req("b")}, wantCode: codes.FailedPrecondition, wantReason: fault.IdempotencyMismatch, wantCalls: 1},
			{call: call{client: c1, md: key("mismatch-1"), req: req("")}, wantCode: codes.FailedPrecondition, wantReason: fault.IdempotencyMismatch, wantCalls: 1},
			// The original request still replays.
			{call: call{client: c1, md: key("mismatch-1"), req: req("a")}, wantCalls: 1, sameAs: 1},
		}},
		{"same key, another method: mismatch", []step{
			{store: twoMethods, call: call{client: c1, md: key("method-1"), req: req("a"), method: mCreate}, wantCalls: 1},
			{store: twoMethods, call: call{client: c1, md: key("method-1"), req: req("a"), method: mCharge}, wantCode: codes.FailedPrecondition, wantReason: fault.IdempotencyMismatch, wantCalls: 1},
		}},
		{"same key from another client: keys are per client", []step{
			{call: call{client: c1, md: key("shared-1"), req: req("a")}, wantCalls: 1},
			{call: call{client: c2, md: key("shared-1"), req: req("a")}, wantCalls: 2},
			{call: call{client: c2, md: key("shared-1"), req: req("a")}, wantCalls: 2, sameAs: 2},
			{call: call{client: c1, md: key("shared-1"), req: req("a")}, wantCalls: 2, sameAs: 1},
			// c2 may use the key for another request than c1 did, without a mismatch.
			{call: call{client: c3, md: key("shared-1"), req: req("b")}, wantCalls: 3},
		}},
		{"same key from another API key of the client: keys are per credential", []step{
			{call: call{client: c1, cred: "key:k1", md: key("cred-1"), req: req("a")}, wantCalls: 1},
			{call: call{client: c1, cred: "key:k2", md: key("cred-1"), req: req("a")}, wantCalls: 2},
			{call: call{client: c1, cred: "key:k2", md: key("cred-1"), req: req("a")}, wantCalls: 2, sameAs: 2},
			{call: call{client: c1, cred: "key:k1", md: key("cred-1"), req: req("a")}, wantCalls: 2, sameAs: 1},
			// Another credential's request is its own, not a mismatch of the first.
			{call: call{client: c1, cred: "key:k3", md: key("cred-1"), req: req("b")}, wantCalls: 3},
		}},
		{"an SDK token's key is not the API key's: no mismatch across credentials", []step{
			{store: twoMethods, call: call{client: c1, cred: "sdk:t1", md: key("cred-2"), req: req("a"), method: mCreate}, wantCalls: 1},
			{store: twoMethods, call: call{client: c1, cred: "key:k1", md: key("cred-2"), req: req("b"), method: mCharge}, wantCalls: 2},
			{store: twoMethods, call: call{client: c1, cred: "sdk:t2", md: key("cred-2"), req: req("a"), method: mCreate}, wantCalls: 3},
			{store: twoMethods, call: call{client: c1, cred: "key:k1", md: key("cred-2"), req: req("b"), method: mCharge}, wantCalls: 3, sameAs: 2},
			{store: twoMethods, call: call{client: c1, cred: "sdk:t1", md: key("cred-2"), req: req("a"), method: mCreate}, wantCalls: 3, sameAs: 1},
			// An API key and an SDK token with the same id are still two credentials.
			{store: twoMethods, call: call{client: c1, cred: "key:t1", md: key("cred-2"), req: req("a"), method: mCreate}, wantCalls: 4},
		}},
		{"a principal that names no credential is refused rather than share the client's keys", []step{
			{call: call{client: c1, cred: "none", md: key("cred-3"), req: req("a")}, wantCode: codes.Internal, wantReason: fault.Internal},
			{call: call{client: c1, cred: "none", req: req("a")}, wantCalls: 1},
		}},
		{"handler error releases the key", []step{
			{call: call{client: c1, md: key("retry-1"), req: req("a")}, handlerErr: errHandler, wantCode: codes.Unavailable, wantReason: fault.Unavailable, wantCalls: 1},
			{call: call{client: c1, md: key("retry-1"), req: req("a")}, wantCalls: 2},
			{call: call{client: c1, md: key("retry-1"), req: req("a")}, wantCalls: 2, sameAs: 2},
		}},
		{"handler error with an answer still releases the key", []step{
			{call: call{client: c1, md: key("retry-3"), req: req("a")}, handlerErr: errHandler, errResp: true, wantCode: codes.Unavailable, wantReason: fault.Unavailable, wantCalls: 1},
			{call: call{client: c1, md: key("retry-3"), req: req("a")}, wantCalls: 2},
			{call: call{client: c1, md: key("retry-3"), req: req("a")}, wantCalls: 2, sameAs: 2},
		}},
		{"handler error releases the key for another request too", []step{
			{call: call{client: c1, md: key("retry-2"), req: req("a")}, handlerErr: errHandler, wantCode: codes.Unavailable, wantReason: fault.Unavailable, wantCalls: 1},
			{call: call{client: c1, md: key("retry-2"), req: req("b")}, wantCalls: 2},
		}},
		{"malformed keys are INVALID_ARGUMENT and never run the handler", []step{
			{call: call{client: c1, md: key("has space"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: key(strings.Repeat("k", 256)), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: key(""), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: key("tab\there"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: key("newline\n"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: key("clé"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			{call: call{client: c1, md: metadata.Pairs(idemkey.MD, "rep-1", idemkey.MD, "rep-1"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
			// A malformed key is refused even without a principal.
			{call: call{md: key("has space"), req: req("a")}, wantCode: codes.InvalidArgument, wantReason: fault.InvalidArgument},
		}},
		{"longest and oddest valid keys are honoured", []step{
			{call: call{client: c1, md: key(strings.Repeat("k", 255)), req: req("a")}, wantCalls: 1},
			{call: call{client: c1, md: key(strings.Repeat("k", 255)), req: req("a")}, wantCalls: 1, sameAs: 1},
			{call: call{client: c1, md: key(`!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`), req: req("a")}, wantCalls: 2},
			{call: call{client: c1, md: key(`!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`), req: req("a")}, wantCalls: 2, sameAs: 3},
		}},
		{"a method not in the list ignores the header", []step{
			{call: call{client: c1, md: key("get-1"), req: req("a"), method: mGet}, wantCalls: 1},
			{call: call{client: c1, md: key("get-1"), req: req("a"), method: mGet}, wantCalls: 2},
			{call: call{client: c1, md: key("not valid"), req: req("a"), method: mGet}, wantCalls: 3},
		}},
		{"bootstrap: without a principal the key is scoped by x-client-id", []step{
			{call: call{md: metadata.Pairs(idemkey.MD, "boot-1", principal.MDClientID, strings.ToUpper(clientUUID)), req: req("a")}, wantCalls: 1},
			{call: call{md: metadata.Pairs(idemkey.MD, "boot-1", principal.MDClientID, clientUUID), req: req("a")}, wantCalls: 1, sameAs: 1},
			// A credential of that client does not share the bootstrap's answer, however it asks.
			{call: call{client: clientUUID, md: key("boot-1"), req: req("a")}, wantCalls: 2},
			{call: call{client: clientUUID, md: metadata.Pairs(idemkey.MD, "boot-1", principal.MDClientID, clientUUID), req: req("a")}, wantCalls: 2, sameAs: 3},
		}},
		{"no principal and no usable client id: the handler runs each time", []step{
			{call: call{md: key("anon-1"), req: req("a")}, wantCalls: 1},
			{call: call{md: key("anon-1"), req: req("a")}, wantCalls: 2},
			{call: call{md: metadata.Pairs(idemkey.MD, "anon-1", principal.MDClientID, "not-a-uuid"), req: req("a")}, wantCalls: 3},
		}},
		{"a request that is not a proto message is passed through", []step{
			{call: call{client: c1, md: key("nonproto-1"), req: "plain string"}, wantCalls: 1},
			{call: call{client: c1, md: key("nonproto-1"), req: "plain string"}, wantCalls: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &counter{}
			var answers []any
			for i, s := range tt.steps {
				store := s.store
				if store == nil {
					store = e.store
				}
				h.err, h.withResp = s.handlerErr, s.errResp
				resp, err := do(store, h, s.call)
				answers = append(answers, resp)

				if code := status.Code(err); code != s.wantCode {
					t.Fatalf("step %d: code %v (%v), want %v", i+1, code, err, s.wantCode)
				}
				if s.wantCode != codes.OK {
					if d := apierr.Parse(err); d.Reason != s.wantReason {
						t.Errorf("step %d: reason %q, want %q", i+1, d.Reason, s.wantReason)
					}
					if s.wantCode == codes.InvalidArgument || s.wantReason == fault.IdempotencyMismatch {
						if d := apierr.Parse(err); d.Field != "Idempotency-Key" {
							t.Errorf("step %d: field %q, want Idempotency-Key", i+1, d.Field)
						}
					}
					if resp != nil && !s.errResp {
						t.Errorf("step %d: answer %v with an error", i+1, resp)
					}
				}
				if got := h.count(); got != s.wantCalls {
					t.Fatalf("step %d: handler ran %d times in all, want %d", i+1, got, s.wantCalls)
				}
				if s.wantCode != codes.OK {
					continue
				}
				if resp == nil {
					t.Fatalf("step %d: nil answer", i+1)
				}
				if s.sameAs > 0 {
					first, ok1 := answers[s.sameAs-1].(proto.Message)
					got, ok2 := resp.(proto.Message)
					if !ok1 || !ok2 || !proto.Equal(first, got) {
						t.Errorf("step %d: answer %v, want the answer of step %d: %v", i+1, resp, s.sameAs, answers[s.sameAs-1])
					}
					if _, ok := resp.(*wrapperspb.StringValue); !ok {
						t.Errorf("step %d: replayed answer is a %T, want *wrapperspb.StringValue", i+1, resp)
					}
				} else {
					// A fresh answer differs from every earlier one.
					for j, prev := range answers[:i] {
						pm, ok1 := prev.(proto.Message)
						rm, ok2 := resp.(proto.Message)
						if ok1 && ok2 && proto.Equal(pm, rm) {
							t.Errorf("step %d: answer equals the answer of step %d, want a fresh one", i+1, j+1)
						}
					}
				}
			}
		})
	}
}

// testStoredAnswerIsSealed reads the table: the answer is stored, but not in clear, and is
// bound to its row.
func testStoredAnswerIsSealed(t *testing.T, e env) {
	ctx := context.Background()
	const secret = "mnv_SHOWN_ONCE_0123456789abcdefghijklmnopqrstuv"
	h := func(context.Context, any) (any, error) { return wrapperspb.String(secret), nil }
	callAs := func(store *idempotency.Store, client, cred, k string) (any, error) {
		c := metadata.NewIncomingContext(principal.WithPrincipal(ctx, principalOf(client, cred)), key(k))
		return store.UnaryInterceptor()(c, req("create key"), &grpc.UnaryServerInfo{FullMethod: mCreate}, h)
	}
	callWith := func(store *idempotency.Store, client, k string) (any, error) { return callAs(store, client, "", k) }
	for _, k := range []string{"sealed-1", "sealed-2"} {
		if _, err := callWith(e.store, c1, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := callAs(e.store, c1, "key:other", "sealed-1"); err != nil {
		t.Fatal(err)
	}

	var state string
	var response, hash []byte
	if err := e.pool.QueryRow(ctx, `SELECT state, response, request_hash FROM `+schema+`.idempotency_keys
		WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND credential = 'key:00000000-0000-4000-8000-0000000000c1' AND key = 'sealed-1'`).Scan(&state, &response, &hash); err != nil {
		t.Fatal(err)
	}
	if state != "DONE" {
		t.Errorf("state = %q, want DONE", state)
	}
	if len(response) == 0 {
		t.Fatal("no response stored")
	}
	for _, clear := range []string{secret, "SHOWN_ONCE", "google.protobuf.StringValue", "create key"} {
		if bytes.Contains(response, []byte(clear)) {
			t.Errorf("stored response contains %q in clear", clear)
		}
	}
	if bytes.Contains(hash, []byte("create key")) {
		t.Error("request hash contains the request in clear")
	}

	// The sealed answer opens with the keyring and the row's binding only: a response copied to
	// another row does not replay there.
	if _, err := e.pool.Exec(ctx, `UPDATE `+schema+`.idempotency_keys SET response = $1
		WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND credential = 'key:00000000-0000-4000-8000-0000000000c1' AND key = 'sealed-2'`, response); err != nil {
		t.Fatal(err)
	}
	if resp, err := callWith(e.store, c1, "sealed-2"); err == nil {
		t.Errorf("a response moved to another row replayed: %v", resp)
	}
	// Nor to another credential's row of the same key.
	if _, err := e.pool.Exec(ctx, `UPDATE `+schema+`.idempotency_keys SET response = $1
		WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND credential = 'key:other' AND key = 'sealed-1'`, response); err != nil {
		t.Fatal(err)
	}
	if resp, err := callAs(e.store, c1, "key:other", "sealed-1"); err == nil {
		t.Errorf("a response moved to another credential's row replayed: %v", resp)
	}

	// A rotated keyring (new current key, old key kept) still replays old answers.
	rotated, err := crypto.ParseKeyring(crypto.NewKeySpec("k2") + "," + e.spec)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := callWith(idempotency.New(e.pool, schema, rotated, zap.NewNop(), mCreate), c1, "sealed-1")
	if err != nil {
		t.Fatalf("replay after rotation: %v", err)
	}
	if !proto.Equal(resp.(proto.Message), wrapperspb.String(secret)) {
		t.Errorf("replay after rotation = %v", resp)
	}

	// A keyring without the sealing key cannot replay.
	stranger, err := crypto.ParseKeyring(crypto.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := callWith(idempotency.New(e.pool, schema, stranger, zap.NewNop(), mCreate), c1, "sealed-1"); err == nil {
		t.Errorf("replay with a foreign key succeeded: %v", resp)
	}
}

// testInFlight runs a second request with the key while the first is still in its handler.
func testInFlight(t *testing.T, e env) {
	ctx := principal.WithPrincipal(context.Background(), principalOf(c1, ""))
	ctx = metadata.NewIncomingContext(ctx, key("inflight-1"))
	icpt := e.store.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: mCreate}

	started, release := make(chan struct{}), make(chan struct{})
	var firstResp any
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		firstResp, firstErr = icpt(ctx, req("a"), info, func(context.Context, any) (any, error) {
			close(started)
			<-release
			return wrapperspb.String("first"), nil
		})
	}()
	<-started

	secondRan := false
	second := func(context.Context, any) (any, error) { secondRan = true; return wrapperspb.String("second"), nil }
	tests := []struct {
		name       string
		req        *wrapperspb.StringValue
		wantCode   codes.Code
		wantReason fault.Reason
	}{
		{"same request while running: conflict", req("a"), codes.Aborted, fault.Conflict},
		{"other request while running: mismatch", req("b"), codes.FailedPrecondition, fault.IdempotencyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := icpt(ctx, tt.req, info, second)
			if status.Code(err) != tt.wantCode || apierr.Parse(err).Reason != tt.wantReason {
				t.Errorf("call = %v, %v; want %v / %s", resp, err, tt.wantCode, tt.wantReason)
			}
		})
	}
	close(release)
	<-done
	if firstErr != nil || !proto.Equal(firstResp.(proto.Message), wrapperspb.String("first")) {
		t.Fatalf("first call = %v, %v", firstResp, firstErr)
	}
	if secondRan {
		t.Error("the second handler ran while the first held the key")
	}
	// Once the first is done, the same request replays its answer.
	resp, err := icpt(ctx, req("a"), info, second)
	if err != nil || !proto.Equal(resp.(proto.Message), wrapperspb.String("first")) {
		t.Errorf("after the first finished: %v, %v; want the first answer", resp, err)
	}
	if secondRan {
		t.Error("the second handler ran instead of a replay")
	}
}

// testStaleKeys ages rows in the table to check that expired keys and abandoned RUNNING keys
// are taken over, while a recent RUNNING key is still a conflict.
func testStaleKeys(t *testing.T, e env) {
	tests := []struct {
		name     string
		age      string // SQL run on the row after the first call
		wantRun  bool   // the second call runs the handler again
		wantCode codes.Code
	}{
		{"done, recent: replay", ``, false, codes.OK},
		{"done, 23 hours old: replay", `created_at = now() - interval '23 hours'`, false, codes.OK},
		{"done, 25 hours old: expired, runs again", `created_at = now() - interval '25 hours', updated_at = now() - interval '25 hours'`, true, codes.OK},
		{"running, recent: conflict", `state = 'RUNNING', response = NULL, updated_at = now()`, false, codes.Aborted},
		{"running, 3 minutes stale: abandoned, runs again", `state = 'RUNNING', response = NULL, updated_at = now() - interval '3 minutes'`, true, codes.OK},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := "stale-" + string(rune('a'+i))
			h := &counter{}
			c := call{client: c1, md: key(k), req: req("a")}
			first, err := do(e.store, h, c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.age != "" {
				tag, err := e.pool.Exec(context.Background(), `UPDATE `+schema+`.idempotency_keys SET `+tt.age+` WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND key = $1`, k)
				if err != nil || tag.RowsAffected() != 1 {
					t.Fatalf("age the row: %v, %d rows", err, tag.RowsAffected())
				}
			}
			resp, err := do(e.store, h, c)
			if status.Code(err) != tt.wantCode {
				t.Fatalf("second call: %v, want %v", err, tt.wantCode)
			}
			wantCalls := 1
			if tt.wantRun {
				wantCalls = 2
			}
			if h.count() != wantCalls {
				t.Errorf("handler ran %d times, want %d", h.count(), wantCalls)
			}
			if tt.wantCode == codes.OK && !tt.wantRun && !proto.Equal(resp.(proto.Message), first.(proto.Message)) {
				t.Errorf("second answer %v, want the replay %v", resp, first)
			}
			if tt.wantRun {
				// The new run is remembered in turn.
				third, err := do(e.store, h, c)
				if err != nil || h.count() != 2 || !proto.Equal(third.(proto.Message), resp.(proto.Message)) {
					t.Errorf("third call = %v, %v after %d runs; want a replay of the second", third, err, h.count())
				}
			}
		})
	}
}

func testTamperedAnswerIsNotReplayed(t *testing.T, e env) {
	ctx := context.Background()
	h := &counter{}
	c := call{client: c1, md: key("tamper-1"), req: req("a")}
	if _, err := do(e.store, h, c); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE `+schema+`.idempotency_keys
		SET response = set_byte(response, length(response) - 1, get_byte(response, length(response) - 1) # 1)
		WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND key = 'tamper-1'`); err != nil {
		t.Fatal(err)
	}
	resp, err := do(e.store, h, c)
	if err == nil {
		t.Fatalf("tampered answer replayed: %v", resp)
	}
	if !errors.Is(err, crypto.ErrOpen) {
		t.Errorf("error %v does not wrap crypto.ErrOpen", err)
	}
	if h.count() != 1 {
		t.Errorf("handler ran %d times, want 1", h.count())
	}
}

// testReplayHeaderOverGRPC runs the interceptor in a real gRPC server (in memory), where the
// replay can set the Idempotent-Replayed header.
func testReplayHeaderOverGRPC(t *testing.T, e env) {
	h := &counter{}
	withPrincipal := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(principal.WithPrincipal(ctx, principalOf(c1, "")), req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(withPrincipal, e.store.UnaryInterceptor()))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Svc",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Create",
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: mCreate}, h.handle)
			},
		}},
	}, struct{}{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name         string
		key          string // "" for no header
		in           string
		wantReplayed bool
		wantCalls    int
	}{
		{"first call", "grpc-1", "a", false, 1},
		{"replay", "grpc-1", "a", true, 1},
		{"replay again", "grpc-1", "a", true, 1},
		{"other key", "grpc-2", "a", false, 2},
		{"no key", "", "a", false, 3},
	}
	var first *wrapperspb.StringValue
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ctx
			if tt.key != "" {
				c = metadata.AppendToOutgoingContext(c, idemkey.MD, tt.key)
			}
			var header metadata.MD
			out := new(wrapperspb.StringValue)
			if err := conn.Invoke(c, mCreate, req(tt.in), out, grpc.Header(&header)); err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = out
			}
			replayed := strings.Join(header.Get(idemkey.MDReplayed), ",")
			if (replayed == "true") != tt.wantReplayed || (replayed != "" && replayed != "true") {
				t.Errorf("%s header = %q, want replayed %v", idemkey.MDReplayed, replayed, tt.wantReplayed)
			}
			if tt.wantReplayed && !proto.Equal(out, first) {
				t.Errorf("replayed %v, want %v", out, first)
			}
			if h.count() != tt.wantCalls {
				t.Errorf("handler ran %d times, want %d", h.count(), tt.wantCalls)
			}
		})
	}
}

// testKeyFromContext: what a handler derives its debit reference from is the same for a retry
// by the same credential and differs for another credential using the same key, which runs
// a request of its own and must be charged for it.
func testKeyFromContext(t *testing.T, e env) {
	seen := func(c call) string {
		t.Helper()
		var got string
		h := func(ctx context.Context, _ any) (any, error) {
			k, ok := idempotency.KeyFromContext(ctx)
			if !ok {
				t.Fatal("no key in the handler's context")
			}
			got = k
			// Failing releases the key, so the next call runs the handler again.
			return nil, apierr.New(codes.Unavailable, fault.Unavailable, "try again")
		}
		ctx := metadata.NewIncomingContext(principal.WithPrincipal(context.Background(), principalOf(c.client, c.cred)), c.md)
		_, _ = e.store.UnaryInterceptor()(ctx, req("a"), &grpc.UnaryServerInfo{FullMethod: mCreate}, h)
		return got
	}
	first := seen(call{client: c1, cred: "key:k1", md: key("ref-1")})
	tests := []struct {
		name string
		c    call
		same bool
	}{
		{"retry by the same API key", call{client: c1, cred: "key:k1", md: key("ref-1")}, true},
		{"another API key of the client", call{client: c1, cred: "key:k2", md: key("ref-1")}, false},
		{"an SDK token of the client", call{client: c1, cred: "sdk:k1", md: key("ref-1")}, false},
		{"another key of the same API key", call{client: c1, cred: "key:k1", md: key("ref-2")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := seen(tt.c); (got == first) != tt.same {
				t.Errorf("KeyFromContext = %q, first %q: want same %v", got, first, tt.same)
			}
		})
	}
	if _, ok := idempotency.KeyFromContext(context.Background()); ok {
		t.Error("KeyFromContext found a key in a context without one")
	}
}

// testForgetTaggedAnswers: an answer tagged with a subject is forgotten when the subject is,
// inside the caller's transaction, and only that answer.
func testForgetTaggedAnswers(t *testing.T, e env) {
	ctx := context.Background()
	h := &counter{}
	tagging := func(subject string) grpc.UnaryHandler {
		return func(ctx context.Context, r any) (any, error) {
			if subject != "" {
				idempotency.Tag(ctx, subject)
			}
			return h.handle(ctx, r)
		}
	}
	run := func(client, k, subject string) any {
		t.Helper()
		c := metadata.NewIncomingContext(principal.WithPrincipal(ctx, principalOf(client, "")), key(k))
		resp, err := e.store.UnaryInterceptor()(c, req("a"), &grpc.UnaryServerInfo{FullMethod: mCreate}, tagging(subject))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	rows := func(client, k string) int {
		t.Helper()
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.idempotency_keys WHERE client_id = $1 AND key = $2`, client, k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	forget := func(client, subject string, commit bool) {
		t.Helper()
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := e.store.Forget(ctx, tx, client, subject); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	first := run(c1, "forget-1", "profile:p1")
	run(c1, "forget-2", "profile:p2")
	run(c1, "forget-3", "")
	run(c2, "forget-1", "profile:p1")

	// A rolled-back erasure forgets nothing.
	forget(c1, "profile:p1", false)
	if rows(c1, "forget-1") != 1 {
		t.Fatal("a rolled-back Forget deleted the answer")
	}
	forget(c1, "profile:p1", true)
	tests := []struct {
		name      string
		client, k string
		want      int
	}{
		{"the subject's answer is gone", c1, "forget-1", 0},
		{"another subject's answer stays", c1, "forget-2", 1},
		{"an untagged answer stays", c1, "forget-3", 1},
		{"another client's answer about the same subject stays", c2, "forget-1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rows(tt.client, tt.k); got != tt.want {
				t.Errorf("%d rows, want %d", got, tt.want)
			}
		})
	}
	// The forgotten key runs anew instead of replaying the erased answer.
	calls := h.count()
	if again := run(c1, "forget-1", "profile:p3"); proto.Equal(again.(proto.Message), first.(proto.Message)) || h.count() != calls+1 {
		t.Errorf("after Forget: %v after %d runs, want a fresh run", again, h.count())
	}
}

// testUpgradeFromClientScope migrates a schema that has the client-scoped table of migration 001
// and rows in it: the rows stay (to expire) but replay to nobody, since nobody can tell which
// credential wrote them.
func testUpgradeFromClientScope(t *testing.T, e env) {
	ctx := context.Background()
	const old = "idemold"
	shipped, err := fs.ReadFile(idempotency.Migrations().FS, "001_idempotency_keys.sql")
	if err != nil {
		t.Fatal(err)
	}
	only001 := fstest.MapFS{"001_idempotency_keys.sql": &fstest.MapFile{Data: shipped}}
	if err := pg.Migrate(ctx, e.pool, old, mainSet, pg.Migrations{Name: "idempotency", FS: only001}); err != nil {
		t.Fatal(err)
	}
	// An answer stored by the client-scoped version, sealed as it sealed them.
	plain := append([]byte("google.protobuf.StringValue\x00"), mustMarshal(t, wrapperspb.String("old answer"))...)
	if _, err := e.pool.Exec(ctx, `INSERT INTO `+old+`.idempotency_keys (client_id, key, method, request_hash, state, response)
		VALUES ('00000000-0000-4000-8000-0000000000c1', 'old-1', $1, $2, 'DONE', $3)`, mCreate, []byte("hash"), e.keyring.Seal(plain, []byte(old+".idempotency_keys|00000000-0000-4000-8000-0000000000c1|old-1"))); err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, e.pool, old, mainSet, idempotency.Migrations()); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	var cred string
	if err := e.pool.QueryRow(ctx, `SELECT credential FROM `+old+`.idempotency_keys WHERE client_id = '00000000-0000-4000-8000-0000000000c1' AND key = 'old-1'`).Scan(&cred); err != nil {
		t.Fatalf("the old row: %v", err)
	}
	if cred != "" {
		t.Errorf("the old row's credential is %q, want none", cred)
	}
	h := &counter{}
	resp, err := do(idempotency.New(e.pool, old, e.keyring, zap.NewNop(), mCreate), h, call{client: c1, md: key("old-1"), req: req("a")})
	if err != nil || h.count() != 1 {
		t.Fatalf("a key of an old row: %v, %v after %d runs; want a fresh run", resp, err, h.count())
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
