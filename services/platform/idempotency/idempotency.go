// Package idempotency implements the Idempotency-Key header (docs/api-decisions.md#idempotency) as
// a gRPC interceptor: the same key with the same request within 24 hours returns the first answer
// (with Idempotent-Replayed: true) and runs the operation once; with another request it is
// IDEMPOTENCY_MISMATCH; while the first is still running it is CONFLICT.
//
// Keys are scoped to the credential that sent them (an API key, an SDK token; the first-key
// bootstrap, which has none yet, by the client it names), never shared across a client's
// credentials: a key can only ever replay an answer to the credential that received it first,
// so a shown-once secret never reaches another credential. Answers are stored sealed with the
// service's keyring, bound to their row, since they may carry such a secret.
//
// A handler whose answer holds someone's personal data tags it (Tag) with a subject, and the
// erasure of that subject forgets the stored answers (Store.Forget) in its own transaction.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/idempotency/idemkey"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Retention is how long a key is remembered.
const Retention = 24 * time.Hour

// abandonAfter is when a RUNNING key whose process died may be taken over.
const abandonAfter = 2 * time.Minute

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations creates the idempotency table in a service's schema; pass it to pg.Migrate.
func Migrations() pg.Migrations {
	sub, _ := fs.Sub(migrationFS, "migrations")
	return pg.Migrations{Name: "idempotency", FS: sub}
}

// Tables declares the table the migrations make in a service's schema: a client's keys, so
// distributed with its other rows.
func Tables() []tenancy.Table {
	return []tenancy.Table{{Name: "idempotency_keys", Class: tenancy.Tenant, Why: "a client's idempotency keys, looked up by client, credential and key"}}
}

// Store remembers keys in schema.idempotency_keys.
type Store struct {
	keys    keys
	table   string
	keyring *crypto.Keyring
	methods map[string]bool
	log     *zap.Logger
}

// New returns a Store for the methods (full names) that honour the header.
func New(pool *pgxpool.Pool, schema string, keyring *crypto.Keyring, log *zap.Logger, methods ...string) *Store {
	table := schema + ".idempotency_keys"
	s := &Store{keys: keys{pool: pool, table: table}, table: table, keyring: keyring, methods: map[string]bool{}, log: log}
	for _, m := range methods {
		s.methods[m] = true
	}
	return s
}

var (
	errMismatch = apierr.Field(codes.FailedPrecondition, fault.IdempotencyMismatch, "Idempotency-Key",
		"this Idempotency-Key was used with a different request")
	errInFlight = apierr.Field(codes.Aborted, fault.Conflict, "Idempotency-Key",
		"a request with this Idempotency-Key is still in progress")
	errBadKey = apierr.Invalid("Idempotency-Key", "must be "+idemkey.Rule)
	// A principal that names neither an API key nor an SDK token: a bug, refused loudly, since
	// the alternative is sharing its key with the client's other credentials.
	errNoCredential = apierr.New(codes.Internal, fault.Internal, "idempotency: the caller's credential is unknown")
)

// Credentials that are not an API key or an SDK token.
const (
	// bootstrapCredential scopes the keys of a method that takes no credential (the first-key
	// bootstrap) within the client it names; its request hash covers the secret that proves the
	// caller, so only a caller who sent that same secret can replay its answer.
	bootstrapCredential = "bootstrap"
)

// request is the key of the request being handled, in its context.
type request struct {
	credential, key string
	subject         string // set by Tag
}

type requestInContext struct{}

// KeyFromContext returns an identity of the Idempotency-Key of the request being handled, if it
// has one: the key together with the credential that sent it, unique within the client. A
// handler that charges can derive its debit reference from it, so that a retry taking over an
// interrupted first attempt is not charged twice, while another credential of the client using
// the same key is charged for its own request.
func KeyFromContext(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(requestInContext{}).(*request)
	if !ok {
		return "", false
	}
	return r.credential + " " + r.key, true
}

// Tag marks the answer of the request being handled as holding the data of subject (e.g.
// "profile:<id>"), so that Forget(subject) drops it once that data is erased. Without an
// Idempotency-Key it does nothing. A request has one subject; a second Tag replaces it.
func Tag(ctx context.Context, subject string) {
	if r, ok := ctx.Value(requestInContext{}).(*request); ok {
		r.subject = subject
	}
}

// Forget deletes the client's stored answers tagged with subject. Call it in the transaction
// that erases the subject's data, so that no replay returns the data after the erasure. A key
// whose answer is forgotten is free again: its replay runs the request anew.
func (s *Store) Forget(ctx context.Context, db pg.DB, clientID, subject string) error {
	if err := s.keys.forget(ctx, db, clientID, subject); err != nil {
		return fmt.Errorf("idempotency: forget answers of %s: %w", subject, err)
	}
	return nil
}

// UnaryInterceptor applies the header to the store's methods. It must run after authentication.
func (s *Store) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !s.methods[info.FullMethod] {
			return handler(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		keys := md.Get(idemkey.MD)
		if len(keys) == 0 {
			return handler(ctx, req)
		}
		if len(keys) > 1 || !idemkey.Valid(keys[0]) {
			return nil, errBadKey
		}
		client, credential, err := scope(ctx, md)
		if err != nil {
			return nil, err
		}
		if client == "" {
			return handler(ctx, req)
		}
		msg, ok := req.(proto.Message)
		if !ok {
			return handler(ctx, req)
		}
		hash, err := requestHash(info.FullMethod, msg)
		if err != nil {
			return nil, err
		}
		r := &request{credential: credential, key: keys[0]}
		ctx = context.WithValue(ctx, requestInContext{}, r)
		return s.run(ctx, client, r, info.FullMethod, hash, func() (any, error) { return handler(ctx, req) })
	}
}

func (s *Store) run(ctx context.Context, client string, r *request, method string, hash []byte, handler func() (any, error)) (any, error) {
	// The sealed answer is bound to its row: moved to another client's, credential's or key's
	// row it does not open.
	ad := []byte(s.table + "|" + client + "|" + r.credential + "|" + r.key)
	for attempt := 0; attempt < 3; attempt++ {
		claimed, err := s.keys.claim(ctx, client, r.credential, r.key, method, hash)
		if err != nil {
			return nil, err
		}
		if claimed {
			resp, herr := handler()
			s.finish(ctx, client, r, resp, herr, ad)
			return resp, herr
		}
		seen, found, err := s.keys.read(ctx, client, r.credential, r.key)
		if err != nil {
			return nil, err
		}
		if !found {
			continue // finished with an error and released in between: claim again
		}
		switch {
		case time.Since(seen.created) > Retention || (seen.state == "RUNNING" && time.Since(seen.updated) > abandonAfter):
			if err := s.keys.expire(ctx, client, r.credential, r.key, seen.updated); err != nil {
				return nil, err
			}
			continue
		case seen.method != method || !bytes.Equal(seen.requestHash, hash):
			return nil, errMismatch
		case seen.state == "RUNNING":
			return nil, errInFlight
		}
		resp, err := s.decode(seen.response, ad)
		if err != nil {
			return nil, err
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs(idemkey.MDReplayed, "true"))
		return resp, nil
	}
	return nil, errInFlight
}

// finish stores the answer, with its subject, or releases the key after an error so that a
// retry runs again.
func (s *Store) finish(ctx context.Context, client string, r *request, resp any, herr error, ad []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var err error
	if msg, ok := resp.(proto.Message); ok && herr == nil {
		var b []byte
		if b, err = encode(msg); err == nil {
			var subject *string
			if r.subject != "" {
				subject = &r.subject
			}
			err = s.keys.done(ctx, client, r.credential, r.key, s.keyring.Seal(b, ad), subject)
		}
	} else {
		err = s.keys.release(ctx, client, r.credential, r.key)
	}
	if err != nil {
		// The operation is done; only its replay is lost. A retry within abandonAfter is 409.
		s.log.Warn("idempotency: store answer", zap.Error(err))
	}
}

// Run deletes expired keys every few minutes until ctx ends.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.keys.purge(ctx, Retention); err != nil && ctx.Err() == nil {
				s.log.Warn("idempotency: purge", zap.Error(err))
			}
		}
	}
}

// scope is who a key belongs to: the authenticated client and the credential it called with,
// else (the bootstrap, which has no principal) the client id it names. client is "" when the
// request names no client: its key cannot be kept apart from anyone else's, so it is not kept.
func scope(ctx context.Context, md metadata.MD) (client, scoped string, err error) {
	if p, ok := principal.FromContext(ctx); ok {
		if c := p.Credential(); c != "" {
			return p.ClientID, c, nil
		}
		return "", "", errNoCredential
	}
	if ids := md.Get(principal.MDClientID); len(ids) == 1 {
		if id, ok := principal.ParseClientID(ids[0]); ok {
			return id, bootstrapCredential, nil
		}
	}
	return "", "", nil
}

func requestHash(method string, m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("idempotency: hash request: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(b)
	return h.Sum(nil), nil
}

// encode stores the message with its type name, so the replay can rebuild it.
func encode(m proto.Message) ([]byte, error) {
	name := string(m.ProtoReflect().Descriptor().FullName())
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(name), 0), b...), nil
}

func (s *Store) decode(sealed, ad []byte) (proto.Message, error) {
	plain, err := s.keyring.Open(sealed, ad)
	if err != nil {
		return nil, fmt.Errorf("idempotency: open stored answer: %w", err)
	}
	i := bytes.IndexByte(plain, 0)
	if i < 0 {
		return nil, errors.New("idempotency: stored answer is malformed")
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(plain[:i]))
	if err != nil {
		return nil, fmt.Errorf("idempotency: stored answer type: %w", err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(plain[i+1:], m); err != nil {
		return nil, fmt.Errorf("idempotency: decode stored answer: %w", err)
	}
	return m, nil
}
