// Package verificationtest builds what the verification service's unit tests share: fresh keys
// that seal blobs and numbers, an operator registry from YAML, and a fresh database.
package verificationtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// Database is a fresh database of the test's own on the real server, with the verification
// schema and River's tables beside it (jobs.New makes a queue over it), through a pool of at
// most maxConns connections, closed with the test.
func Database(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pg.Migrate(ctx, pool, "verification", migrations.FS); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "verification"); err != nil {
		t.Fatal(err)
	}
	// make test-partitioned: the tenant tables hash-partitioned by client_id, as the app does.
	if err := tenancy.PartitionFromEnv(ctx, pool, migrations.Tables); err != nil {
		t.Fatal(err)
	}
	return pool
}

// Keys seal what the service keeps: blobs (Sealer) and numbers at rest (Vault), under one fresh
// keyring (Keyring, for what seals with it directly).
type Keys struct {
	Keyring *crypto.Keyring
	Sealer  *seal.Sealer
	Vault   *phone.Vault
}

// NewKeys returns Keys under a fresh keyring and number-hash key.
func NewKeys(t testing.TB) Keys {
	t.Helper()
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	return Keys{Keyring: keyring, Sealer: seal.NewSealer(keyring), Vault: phone.NewVault("verification", keyring, hasher)}
}

// Operators parses a registry (the operators file's YAML).
func Operators(t testing.TB, yaml string) *operators.Registry {
	t.Helper()
	ops, err := operators.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// OperatorsFile loads a registry written as a file, beside a secret.txt holding secret: the
// way an operator's CAMARA client secret reaches it (clientSecretFile: secret.txt).
func OperatorsFile(t testing.TB, yaml, secret string) *operators.Registry {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"operators.yaml": yaml, "secret.txt": secret + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := operators.Load(filepath.Join(dir, "operators.yaml"), false)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// Registry is a registry of three operators the domain tests share: alpha and beta (header
// enrichment) and gamma (header enrichment and NETWORK_API), each on its own address range.
const Registry = `operators:
  - id: alpha
    name: Alpha
    country: AE
    mccMnc: ["424-02"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["10.0.0.0/8"]
      numberHeader: X-Alpha-Msisdn
  - id: beta
    name: Beta
    country: AE
    mccMnc: ["424-03"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["192.0.2.0/24"]
      numberHeader: X-Beta-Msisdn
  - id: gamma
    name: Gamma
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
    headerEnrichment:
      trustedRanges: ["198.51.100.0/24"]
      numberHeader: X-Gamma-Msisdn
`
