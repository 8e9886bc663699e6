// Package arch_test checks the shape of the services that the compiler does not: the domain
// packages (the rules) reach neither the database driver, nor gRPC, nor the generated protos,
// and transactions go through platform/pg alone. It asks the go command and git, so a new
// import or file cannot slip past it.
package arch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

const mod = "github.com/mnvhq/mnv/"

// forbidden are the import path prefixes a domain package must not depend on, even indirectly:
// storage belongs in internal/store, the transport in internal/server.
var forbidden = []string{
	"github.com/jackc/pgx",
	"google.golang.org/grpc",
	mod + "proto/gen",
}

type pkg struct {
	ImportPath string
	Name       string
	Imports    []string
	Deps       []string
}

// domainPackage reports whether path is a package of rules: under a service's internal/, and
// not its store, its server, or a test helper package (accountstest, connecttest, …).
func domainPackage(p pkg) bool {
	rest, ok := strings.CutPrefix(p.ImportPath, mod+"services/")
	if !ok {
		return false
	}
	svc, rest, _ := strings.Cut(rest, "/")
	if svc == "platform" || !strings.HasPrefix(rest, "internal/") {
		return false
	}
	for _, skip := range []string{"internal/store", "internal/server"} {
		if rest == skip || strings.HasPrefix(rest, skip+"/") {
			return false
		}
	}
	return !strings.HasSuffix(p.Name, "test")
}

func isForbidden(path string) bool {
	return slices.ContainsFunc(forbidden, func(f string) bool { return path == f || strings.HasPrefix(path, f+"/") })
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// listPackages runs go list -deps over every service's internal packages, in the workspace.
func listPackages(t *testing.T, root string) map[string]pkg {
	t.Helper()
	return goList(t, root, "./services/accounts/internal/...", "./services/verification/internal/...", "./services/connect/internal/...")
}

// goList runs go list -deps over patterns, in the workspace.
func goList(t *testing.T, root string, patterns ...string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-json=ImportPath,Name,Imports,Deps"}, patterns...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// chain is the shortest import chain from p to a forbidden package, or nil.
func chain(pkgs map[string]pkg, from string) []string { return chainTo(pkgs, from, isForbidden) }

// chainTo is the shortest import chain from p to a package bad reports, or nil.
func chainTo(pkgs map[string]pkg, from string, bad func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != from && bad(cur) {
			var path []string
			for at := cur; at != ""; at = prev[at] {
				path = append(path, at)
			}
			slices.Reverse(path)
			return path
		}
		for _, imp := range pkgs[cur].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// TestDomainPackagesImportNoTransport fails, naming the package and the import chain, when a
// domain package depends on pgx, gRPC or the generated protos.
func TestDomainPackagesImportNoTransport(t *testing.T) {
	pkgs := listPackages(t, repoRoot(t))
	var domain []string
	for path, p := range pkgs {
		if domainPackage(p) {
			domain = append(domain, path)
		}
	}
	slices.Sort(domain)
	// A list without the packages we know would make the check pass for nothing.
	for _, must := range []string{"services/accounts/internal/billing", "services/accounts/internal/domain", "services/verification/internal/verify", "services/connect/internal/profiles"} {
		if !slices.Contains(domain, mod+must) {
			t.Fatalf("go list found no domain package %s; found %v", must, domain)
		}
	}
	for _, path := range domain {
		if bad := chain(pkgs, path); bad != nil {
			t.Errorf("domain package %s imports %s (through %s); storage goes in internal/store, the transport in internal/server",
				path, bad[len(bad)-1], strings.Join(bad, " -> "))
		}
	}
}

// services are the services of the checkout, each with its module and its generated protos.
var services = []string{"accounts", "verification", "connect"}

// serviceCode reports whether path is a service's: its module's packages, its clients' modules
// (accountsclient, connectclient), or its generated protos (proto/gen/mnv/<service>/...).
func serviceCode(path string) bool {
	for _, svc := range services {
		for _, prefix := range []string{mod + "services/" + svc, mod + "proto/gen/mnv/" + svc} {
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return true
			}
		}
	}
	return false
}

// TestSharedKitKnowsNoService fails, naming the package and the import chain, when a package of
// the shared kit (services/platform) depends on a service: its generated protos or its code. The
// kit is what every service and the gateway share; what wraps one service's API is that
// service's (accounts' accountsclient, connect's connectclient), and what travels between all
// of them has a proto package of its own (mnv.principal.v1, mnv.options.v1).
func TestSharedKitKnowsNoService(t *testing.T) {
	pkgs := goList(t, repoRoot(t), "./services/platform/...")
	var kit []string
	for path := range pkgs {
		if path == mod+"services/platform" || strings.HasPrefix(path, mod+"services/platform/") {
			kit = append(kit, path)
		}
	}
	slices.Sort(kit)
	// A list without the packages we know would make the check pass for nothing.
	for _, must := range []string{"services/platform/auth", "services/platform/principal", "services/platform/outbox", "services/platform/grpcserver"} {
		if !slices.Contains(kit, mod+must) {
			t.Fatalf("go list found no package %s; found %v", must, kit)
		}
	}
	for _, path := range kit {
		if bad := chainTo(pkgs, path, serviceCode); bad != nil {
			t.Errorf("shared package %s depends on %s (through %s); what wraps a service's API is the service's, what all share needs a proto package of its own",
				path, bad[len(bad)-1], strings.Join(bad, " -> "))
		}
	}
}

// TestServiceCode: what the shared kit's check counts as a service's.
func TestServiceCode(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{mod + "proto/gen/mnv/accounts/v1", true},
		{mod + "proto/gen/mnv/connect/v1", true},
		{mod + "proto/gen/mnv/verification/v1", true},
		{mod + "services/accounts/accountsclient", true},
		{mod + "services/connect/internal/store", true},
		{mod + "proto/gen/mnv/principal/v1", false},
		{mod + "proto/gen/mnv/options/v1", false},
		{mod + "proto/gen/openapi", false},
		{mod + "services/platform/auth", false},
		{mod + "services/accountsx", false},
	}
	for _, tt := range tests {
		if got := serviceCode(tt.path); got != tt.want {
			t.Errorf("serviceCode(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestTransactionsGoThroughPg fails when a Go file outside services/platform/pg opens a
// transaction with pgx's callback helpers instead of pg.InTx (or pg.Stores.InTx): one helper
// owns commit and rollback, and domain code sees no pgx.
func TestTransactionsGoThroughPg(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "*.go")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	// Spelled in two parts so that this file does not match itself.
	needles := []string{"pgx." + "BeginFunc(", "pgx." + "BeginTxFunc("}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git ls-files lists %d Go files: not the checkout", len(files))
	}
	for _, f := range files {
		if strings.HasPrefix(f, "services/platform/pg/") {
			continue
		}
		uses, err := fileContains(filepath.Join(root, f), needles)
		if err != nil {
			t.Fatal(err)
		}
		if uses {
			t.Errorf("%s opens a transaction with pgx directly; use pg.InTx or a pg.Stores port", f)
		}
	}
}

func fileContains(path string, needles []string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(needles, func(n string) bool { return bytes.Contains(b, []byte(n)) }), nil
}

// TestChargesGoThroughTheSaga fails when a Go file other than the charge saga's
// (services/platform/charge) debits a client: every priced operation records its intent,
// debits outside any row-locking transaction, and settles or is reconciled in one place.
// Accounts (which keeps the ledger) and accountsclient (the Ledger over gRPC) implement the
// debit, and tests call fakes.
func TestChargesGoThroughTheSaga(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "services/*.go")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git ls-files lists %d Go files under services: not the checkout", len(files))
	}
	allowed := []string{"services/platform/charge/", "services/platform/accountsclient/", "services/accounts/"}
	// Spelled in parts so that this file does not match itself.
	needles := []string{"." + "Debit(", "." + "DebitMany("}
	debitors := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		uses, err := fileContains(filepath.Join(root, f), needles)
		if err != nil {
			t.Fatal(err)
		}
		if !uses {
			continue
		}
		debitors++
		if !slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(f, p) }) {
			t.Errorf("%s debits the ledger itself; charge through platform/charge (Saga.Complete, Reconciler)", f)
		}
	}
	// A search that finds not even the saga's own debit would pass for nothing.
	if debitors == 0 {
		t.Fatal("no file debits the ledger, not even platform/charge: the search is broken")
	}
}
