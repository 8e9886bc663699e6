// Command mnvctl is the operator's tool: it creates clients and manages their balance, status,
// features and prices through the accounts service's admin gRPC API.
//
//	mnvctl client create --name ACME --contact-name "Ada" --contact-email ada@acme.test \
//	    --contact-phone 0123456789 --balance 100 --expires-in 30d --features VERIFY,SANDBOX -o json
//	mnvctl client show CLIENT_ID
//	mnvctl client list
//	mnvctl client top-up CLIENT_ID --amount 500 [--expires-in 90d]
//	mnvctl client suspend CLIENT_ID | mnvctl client activate CLIENT_ID
//	mnvctl client features CLIENT_ID VERIFY,CONNECT
//	mnvctl client price CLIENT_ID --kind VERIFICATION [--variant HEADER_ENRICHMENT] --amount 2 | --clear
//	mnvctl client origins CLIENT_ID [https://shop.example,https://www.shop.example | --clear]
//	mnvctl keygen data-key KEY_ID | mnvctl keygen secret
//	mnvctl keygen internal-token CALLER | mnvctl keygen caller-digest CALLER < token-file
//
// It reaches the accounts service at MNV_ACCOUNTS_ADDR (default 127.0.0.1:9091) with the admin
// credential from MNV_ADMIN_TOKEN, MNV_ADMIN_TOKEN_FILE, or the .mnv folder of a local setup,
// over TLS verified against MNV_GRPC_TLS_CA when that is set.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		if st, ok := status.FromError(err); ok {
			fmt.Fprintf(os.Stderr, "mnvctl: %s: %s\n", st.Code(), st.Message())
		} else {
			fmt.Fprintf(os.Stderr, "mnvctl: %v\n", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: mnvctl client <create|show|list|top-up|suspend|activate|features|price|origins> [flags]
       mnvctl keygen <data-key KEY_ID|secret|internal-token CALLER|caller-digest CALLER>
run "mnvctl client <command> -h" for the flags of a command`

func run(ctx context.Context, args []string, out io.Writer) error {
	return runWith(ctx, args, os.Stdin, out)
}

func runWith(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	if len(args) > 0 && args[0] == "keygen" {
		return keygen(args[1:], in, out)
	}
	if len(args) < 2 || args[0] != "client" {
		return errors.New(usage)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd, rest := args[1], args[2:]
	fs := flag.NewFlagSet("mnvctl client "+cmd, flag.ContinueOnError)
	format := fs.String("o", "text", "output: text or json")
	c := &command{fs: fs, out: out, format: format}
	switch cmd {
	case "create":
		return c.create(ctx, rest)
	case "show":
		return c.show(ctx, rest)
	case "list":
		return c.list(ctx, rest)
	case "top-up":
		return c.topUp(ctx, rest)
	case "suspend":
		return c.setStatus(ctx, rest, accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED)
	case "activate":
		return c.setStatus(ctx, rest, accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE)
	case "features":
		return c.features(ctx, rest)
	case "price":
		return c.price(ctx, rest)
	case "origins":
		return c.origins(ctx, rest)
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

// keygen prints a fresh secret for the configuration; it needs no running service.
//
// internal-token CALLER prints two lines: a new token, for that caller's own MNV_INTERNAL_TOKEN
// (its Secret), and its entry for the servers' MNV_INTERNAL_CALLERS, which is not secret.
// caller-digest CALLER prints the entry of a token read from standard input.
func keygen(args []string, in io.Reader, out io.Writer) error {
	switch {
	case len(args) == 2 && args[0] == "data-key" && keyID.MatchString(args[1]):
		_, err := fmt.Fprintln(out, crypto.NewKeySpec(args[1]))
		return err
	case len(args) == 1 && args[0] == "secret":
		_, err := fmt.Fprintln(out, crypto.NewSecret())
		return err
	case len(args) == 2 && args[0] == "internal-token" && slices.Contains(auth.KnownCallers, args[1]):
		token := crypto.NewSecret()
		_, err := fmt.Fprintf(out, "%s\n%s\n", token, auth.CallerEntry(args[1], token))
		return err
	case len(args) == 2 && args[0] == "caller-digest" && slices.Contains(auth.KnownCallers, args[1]):
		b, err := io.ReadAll(io.LimitReader(in, 4096))
		if err != nil {
			return err
		}
		token := strings.TrimSpace(string(b))
		if len(token) < auth.MinTokenLength {
			return fmt.Errorf("caller-digest: give the caller's token (%d+ characters) on standard input", auth.MinTokenLength)
		}
		_, err = fmt.Fprintln(out, auth.CallerEntry(args[1], token))
		return err
	}
	return fmt.Errorf("usage: mnvctl keygen data-key KEY_ID (letters, digits, - and _) | mnvctl keygen secret | "+
		"mnvctl keygen internal-token CALLER | mnvctl keygen caller-digest CALLER < token-file (CALLER: %s)", strings.Join(auth.KnownCallers, ", "))
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

type command struct {
	fs     *flag.FlagSet
	out    io.Writer
	format *string
}

// parse parses flags that may come before or after exactly positional arguments.
func (c *command) parse(args []string, positional int) ([]string, error) {
	return c.parseBetween(args, positional, positional)
}

// parseBetween parses flags that may come before or after min to max positional arguments.
func (c *command) parseBetween(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		if c.fs.NArg() == 0 {
			break
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	switch {
	case len(pos) < min || len(pos) > max:
		if min == max {
			return nil, fmt.Errorf("want %d argument(s), got %d", min, len(pos))
		}
		return nil, fmt.Errorf("want %d to %d arguments, got %d", min, max, len(pos))
	case *c.format != "text" && *c.format != "json":
		return nil, errors.New("-o must be text or json")
	}
	return pos, nil
}

func (c *command) admin() (accountsv1.AccountsAdminServiceClient, func(), error) {
	env := config.FromOS()
	addr := env.String("MNV_ACCOUNTS_ADDR", "127.0.0.1:9091")
	token := env.Secret("MNV_ADMIN_TOKEN")
	caFile := env.String("MNV_GRPC_TLS_CA", "")
	if err := env.Err(); err != nil {
		return nil, nil, err
	}
	if token == "" {
		var err error
		if token, err = devstate.FindAdminToken(); err != nil {
			return nil, nil, err
		}
	}
	opts, err := grpcclient.CredentialOptions(token, caFile)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, nil, err
	}
	return accountsv1.NewAccountsAdminServiceClient(conn), func() { _ = conn.Close() }, nil
}

func (c *command) create(ctx context.Context, args []string) error {
	name := c.fs.String("name", "", "client name (required)")
	contactName := c.fs.String("contact-name", "", "contact person's name (required)")
	contactEmail := c.fs.String("contact-email", "", "contact person's e-mail (required)")
	contactPhone := c.fs.String("contact-phone", "", "contact phone number, digits (required)")
	balance := c.fs.Int64("balance", 0, "initial balance in credits")
	expiresIn := c.fs.String("expires-in", "", "balance lifetime, e.g. 30d or 12h (default: never expires)")
	features := c.fs.String("features", "", "comma-separated: VERIFY,CONNECT,STUCK_PLUS,SANDBOX")
	withoutKey := c.fs.Bool("without-api-key", false, "issue no API key; the client generates its first one with its secret")
	if _, err := c.parse(args, 0); err != nil {
		return err
	}
	expires, err := expiry(*expiresIn)
	if err != nil {
		return err
	}
	feats, err := parseFeatures(*features)
	if err != nil {
		return err
	}
	cl, done, err := c.admin()
	if err != nil {
		return err
	}
	defer done()
	resp, err := cl.CreateClient(ctx, &accountsv1.CreateClientRequest{
		ClientName: *name, ContactPersonName: *contactName, ContactPersonEmail: *contactEmail,
		ContactPhoneNumber: *contactPhone, InitialBalance: *balance, BalanceExpiresAt: expires,
		Features: feats, WithoutApiKey: *withoutKey,
	})
	if err != nil {
		return err
	}
	if *c.format == "json" {
		var apiKey *string
		if k := resp.GetApiKey(); k != "" {
			apiKey = &k
		}
		return json.NewEncoder(c.out).Encode(struct {
			ClientID     string  `json:"clientId"`
			ClientSecret string  `json:"clientSecret"`
			APIKey       *string `json:"apiKey"`
		}{resp.GetClient().GetId(), resp.GetClientSecret(), apiKey})
	}
	fmt.Fprintf(c.out, "client id:     %s\nclient secret: %s\n", resp.GetClient().GetId(), resp.GetClientSecret())
	if resp.GetApiKey() != "" {
		fmt.Fprintf(c.out, "api key:       %s\n", resp.GetApiKey())
	}
	fmt.Fprintln(c.out, "The secret and the key are shown only now: store them safely.")
	return nil
}

func (c *command) show(ctx context.Context, args []string) error {
	pos, err := c.parse(args, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: pos[0]})
		return resp.GetDetails(), err
	})
}

func (c *command) list(ctx context.Context, args []string) error {
	page := c.fs.Int("page", 0, "page number, from 0")
	size := c.fs.Int("size", 20, "page size, 1 to 100")
	if _, err := c.parse(args, 0); err != nil {
		return err
	}
	cl, done, err := c.admin()
	if err != nil {
		return err
	}
	defer done()
	p, s := int32(*page), int32(*size)
	resp, err := cl.ListClients(ctx, &accountsv1.ListClientsRequest{Page: &p, Size: &s})
	if err != nil {
		return err
	}
	if *c.format == "json" {
		return c.print(resp)
	}
	for _, it := range resp.GetItems() {
		fmt.Fprintf(c.out, "%s  %-9s  balance %-8d %s\n", it.GetId(), strings.TrimPrefix(it.GetClientStatus().String(), "CLIENT_STATUS_"), it.GetBalance(), it.GetClientName())
	}
	fmt.Fprintf(c.out, "page %d of %d (%d clients)\n", resp.GetPage()+1, max(resp.GetTotalPages(), 1), resp.GetTotalItems())
	return nil
}

func (c *command) topUp(ctx context.Context, args []string) error {
	amount := c.fs.Int64("amount", 0, "credits to add")
	expiresIn := c.fs.String("expires-in", "", "new lifetime of the whole balance, e.g. 30d (default: keep)")
	reference := c.fs.String("reference", "", "idempotency reference (default: generated)")
	pos, err := c.parse(args, 1)
	if err != nil {
		return err
	}
	expires, err := expiry(*expiresIn)
	if err != nil {
		return err
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		return admin.TopUpBalance(ctx, &accountsv1.TopUpBalanceRequest{
			ClientId: pos[0], Amount: *amount, BalanceExpiresAt: expires, Reference: *reference,
		})
	})
}

func (c *command) setStatus(ctx context.Context, args []string, st accountsv1.ClientStatus) error {
	pos, err := c.parse(args, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		resp, err := admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: pos[0], Status: st})
		return resp.GetClient(), err
	})
}

func (c *command) features(ctx context.Context, args []string) error {
	pos, err := c.parse(args, 2)
	if err != nil {
		return err
	}
	feats, err := parseFeatures(pos[1])
	if err != nil {
		return err
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		resp, err := admin.SetClientFeatures(ctx, &accountsv1.SetClientFeaturesRequest{ClientId: pos[0], Features: feats})
		return resp.GetClient(), err
	})
}

func (c *command) price(ctx context.Context, args []string) error {
	kind := c.fs.String("kind", "", "VERIFICATION, CONNECT_ENRICHMENT or STUCK_PLUS_REVEAL")
	variant := c.fs.String("variant", "", "optional refinement, e.g. a verification serviceType")
	amount := c.fs.Int64("amount", -1, "price in credits")
	clear := c.fs.Bool("clear", false, "remove the override, so the configured price applies")
	pos, err := c.parse(args, 1)
	if err != nil {
		return err
	}
	k, ok := accountsv1.LedgerKind_value["LEDGER_KIND_"+strings.ToUpper(*kind)]
	if !ok || k == 0 {
		return errors.New("--kind must be VERIFICATION, CONNECT_ENRICHMENT or STUCK_PLUS_REVEAL")
	}
	req := &accountsv1.SetClientPriceRequest{ClientId: pos[0], Kind: accountsv1.LedgerKind(k), Variant: *variant}
	switch {
	case *clear && *amount >= 0:
		return errors.New("give --amount or --clear, not both")
	case *clear:
	case *amount >= 0:
		req.Amount = amount
	default:
		return errors.New("give --amount N or --clear")
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		return admin.SetClientPrice(ctx, req)
	})
}

// origins shows the web origins allowed to capture a client's browser flows, or replaces them
// with a comma-separated list (--clear: none).
func (c *command) origins(ctx context.Context, args []string) error {
	clear := c.fs.Bool("clear", false, "allow no origin")
	pos, err := c.parseBetween(args, 1, 2)
	if err != nil {
		return err
	}
	if len(pos) == 2 && *clear {
		return errors.New("give origins or --clear, not both")
	}
	return c.call(ctx, func(admin accountsv1.AccountsAdminServiceClient) (proto.Message, error) {
		if len(pos) == 1 && !*clear {
			resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: pos[0]})
			return &accountsv1.SetClientWebOriginsResponse{WebOrigins: resp.GetDetails().GetWebOrigins()}, err
		}
		var origins []string
		if len(pos) == 2 {
			for _, o := range strings.Split(pos[1], ",") {
				if o = strings.TrimSpace(o); o != "" {
					origins = append(origins, o)
				}
			}
		}
		return admin.SetClientWebOrigins(ctx, &accountsv1.SetClientWebOriginsRequest{ClientId: pos[0], Origins: origins})
	})
}

// call runs one admin call and prints its answer.
func (c *command) call(ctx context.Context, fn func(accountsv1.AccountsAdminServiceClient) (proto.Message, error)) error {
	admin, done, err := c.admin()
	if err != nil {
		return err
	}
	defer done()
	m, err := fn(admin)
	if err != nil {
		return err
	}
	return c.print(m)
}

// print writes m as indented JSON. protojson varies its whitespace on purpose; re-indenting
// with encoding/json gives output that scripts can rely on.
func (c *command) print(m proto.Message) error {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(c.out)
	return err
}

// expiry turns "30d", "12h" or "90m" into a timestamp from now; "" is no expiry.
func expiry(s string) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 3650 {
			return nil, fmt.Errorf("--expires-in %q: want days 1d to 3650d, or a duration like 12h", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return nil, fmt.Errorf("--expires-in %q: want days like 30d or a duration like 12h", s)
		}
	}
	return timestamppb.New(time.Now().Add(d)), nil
}

func parseFeatures(s string) ([]accountsv1.Feature, error) {
	var out []accountsv1.Feature
	for _, f := range strings.Split(s, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		v, ok := accountsv1.Feature_value["FEATURE_"+f]
		if !ok || v == 0 {
			return nil, fmt.Errorf("unknown feature %q; known: VERIFY, CONNECT, STUCK_PLUS, SANDBOX", f)
		}
		out = append(out, accountsv1.Feature(v))
	}
	return out, nil
}
