package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// callTimeout bounds one admin call, dialling included.
const callTimeout = 30 * time.Second

// leaf makes cmd print the result of run in the format of its -o; env says whether the command
// has an env form. The format is checked before run calls anything.
func leaf(cmd *cobra.Command, env bool, run func(ctx context.Context, args []string) (result, error)) *cobra.Command {
	format := outputFlag(cmd, env)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(cmd, *format, env); err != nil {
			return err
		}
		if err := checkRequired(cmd); err != nil {
			return err
		}
		r, err := run(cmd.Context(), args)
		if err != nil {
			return err
		}
		return r.print(cmd.OutOrStdout(), *format)
	}
	return cmd
}

// call runs fn with the admin API, within callTimeout.
func (c *conn) call(ctx context.Context, fn func(context.Context, accountsv1.AccountsAdminServiceClient) (result, error)) (result, error) {
	admin, done, err := c.admin()
	if err != nil {
		return result{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := fn(ctx, admin)
	return r, reached(err, "accounts", c.dialed, c.from, "MNV_ACCOUNTS_ADDR")
}

func newClientCommand() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Create clients and manage their balance, status, features, operators, prices, web origins, redirect URIs and low-balance threshold",
		Long:  "The client commands call the accounts service's admin API.\n\n" + environment,
		Args:  noSubcommand,
		RunE:  missingSubcommand,
	}
	c.flags(cmd)
	cmd.AddCommand(c.create(), c.show(), c.list(), c.topUp(),
		c.setStatus("suspend", "Suspend a client: it gets 403 on everything but reading its details", accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED),
		c.setStatus("activate", "Activate a suspended client", accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE),
		c.features(), c.operators(), c.price(), c.origins(), c.redirectURIs(), c.lowBalance())
	return cmd
}

func (c *conn) create() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create --name NAME --contact-name NAME --contact-email EMAIL --contact-phone DIGITS [flags]",
		Short: "Create a client; prints its id, its secret and its first API key, shown only now",
		Example: `  mnvctl client create --name "Acme Ltd" --contact-name "Ada Lovelace" \
    --contact-email ada@acme.test --contact-phone 0123456789 --balance 100 \
    --features VERIFY,SANDBOX -o env > acme.env && . ./acme.env`,
		Args: exactArgs(0, ""),
	}
	f := cmd.Flags()
	name := f.String("name", "", "client name (required)")
	contactName := f.String("contact-name", "", "contact person's name (required)")
	contactEmail := f.String("contact-email", "", "contact person's e-mail (required)")
	contactPhone := f.String("contact-phone", "", "contact phone number, digits (required)")
	balance := f.Int64("balance", 0, "initial balance in credits")
	expiresIn := f.String("expires-in", "", "balance lifetime, e.g. 30d or 12h (default: never expires)")
	features := f.String("features", "", "comma-separated: VERIFY,CONNECT,STUCK_PLUS,SANDBOX,NUMBER_SHARE")
	withoutKey := f.Bool("without-api-key", false, "issue no API key; the client generates its first one with its secret")
	require(cmd, "name", "contact-name", "contact-email", "contact-phone")
	fieldFlags(cmd, "clientName", "name", "contactPersonName", "contact-name", "contactPersonEmail", "contact-email",
		"contactPhoneNumber", "contact-phone", "initialBalance", "balance", "balanceExpiresAt", "expires-in", "features", "features")
	return leaf(cmd, true, func(ctx context.Context, _ []string) (result, error) {
		expires, err := expiry(*expiresIn)
		if err != nil {
			return result{}, err
		}
		feats, err := parseFeatures(*features)
		if err != nil {
			return result{}, err
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.CreateClient(ctx, &accountsv1.CreateClientRequest{
				ClientName: *name, ContactPersonName: *contactName, ContactPersonEmail: *contactEmail,
				ContactPhoneNumber: *contactPhone, InitialBalance: *balance, BalanceExpiresAt: expires,
				Features: feats, WithoutApiKey: *withoutKey,
			})
			if err != nil {
				return result{}, err
			}
			id, secret, key := resp.GetClient().GetId(), resp.GetClientSecret(), resp.GetApiKey()
			return result{
				msg:  resp,
				lead: []field{{"clientId", id}},
				env:  c.withAPIURL(field{"MNV_CLIENT_ID", id}, field{"MNV_API_KEY", key}, field{"MNV_CLIENT_SECRET", secret}),
				text: func(w io.Writer) error {
					s := fmt.Sprintf("client id:     %s\nclient secret: %s\n", id, secret)
					if key != "" {
						s += fmt.Sprintf("api key:       %s\n", key)
					}
					_, err := io.WriteString(w, s+"The secret and the key are shown only now: store them safely.\n")
					return err
				},
			}, nil
		})
	})
}

func (c *conn) show() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show CLIENT_ID",
		Short: "Show a client: details, effective prices, active keys, web origins, redirect URIs, operators",
		Args:  exactArgs(1, "CLIENT_ID"),
	}
	return leaf(cmd, true, func(ctx context.Context, args []string) (result, error) {
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: args[0]})
			if err != nil {
				return result{}, err
			}
			return result{msg: resp.GetDetails(), env: []field{{"MNV_CLIENT_ID", resp.GetDetails().GetClient().GetId()}}}, nil
		})
	})
}

func (c *conn) list() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--page N] [--size N]",
		Short: "List the clients, newest first, one page at a time",
		Long: "List the clients, newest first, one page at a time. Pages count from 1 here; the json\n" +
			"output is the API's page, which counts from 0.",
		Args: exactArgs(0, ""),
	}
	page := cmd.Flags().Int32("page", 1, "page number, from 1")
	size := cmd.Flags().Int32("size", 20, "page size, 1 to 100")
	return leaf(cmd, false, func(ctx context.Context, _ []string) (result, error) {
		if *page < 1 {
			return result{}, usagef("--page %d: pages count from 1", *page)
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			p := *page - 1
			resp, err := admin.ListClients(ctx, &accountsv1.ListClientsRequest{Page: &p, Size: size})
			if err != nil {
				return result{}, err
			}
			return result{msg: resp, text: func(w io.Writer) error { return clientTable(w, resp) }}, nil
		})
	})
}

// clientTable writes a page of clients as a table, with the page it is, counted from 1.
func clientTable(w io.Writer, resp *accountsv1.ListClientsResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tBALANCE\tNAME")
	for _, it := range resp.GetItems() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", it.GetId(), strings.TrimPrefix(it.GetClientStatus().String(), "CLIENT_STATUS_"), it.GetBalance(), it.GetClientName())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "page %d of %d (%d clients)\n", resp.GetPage()+1, max(resp.GetTotalPages(), 1), resp.GetTotalItems())
	return err
}

func (c *conn) topUp() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top-up CLIENT_ID --amount N [--expires-in 90d] [--reference REF]",
		Short: "Add credits to a client's balance (once per reference)",
		Args:  exactArgs(1, "CLIENT_ID"),
	}
	f := cmd.Flags()
	amount := f.Int64("amount", 0, "credits to add")
	expiresIn := f.String("expires-in", "", "new lifetime of the whole balance, e.g. 30d (default: keep)")
	reference := f.String("reference", "", "idempotency reference (default: generated)")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		expires, err := expiry(*expiresIn)
		if err != nil {
			return result{}, err
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.TopUpBalance(ctx, &accountsv1.TopUpBalanceRequest{
				ClientId: args[0], Amount: *amount, BalanceExpiresAt: expires, Reference: *reference,
			})
			return result{msg: resp}, err
		})
	})
}

func (c *conn) setStatus(use, short string, st accountsv1.ClientStatus) *cobra.Command {
	cmd := &cobra.Command{Use: use + " CLIENT_ID", Short: short, Args: exactArgs(1, "CLIENT_ID")}
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: args[0], Status: st})
			return result{msg: resp.GetClient()}, err
		})
	})
}

func (c *conn) features() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "features CLIENT_ID FEATURE,…",
		Short: "Replace a client's features (VERIFY, CONNECT, STUCK_PLUS, SANDBOX, NUMBER_SHARE)",
		Args:  exactArgs(2, "CLIENT_ID FEATURES"),
	}
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		feats, err := parseFeatures(args[1])
		if err != nil {
			return result{}, err
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.SetClientFeatures(ctx, &accountsv1.SetClientFeaturesRequest{ClientId: args[0], Features: feats})
			return result{msg: resp.GetClient()}, err
		})
	})
}

func (c *conn) price() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "price CLIENT_ID --kind KIND [--variant V] --amount N | --clear",
		Short: "Set or clear a client's price of one kind of operation",
		Args:  exactArgs(1, "CLIENT_ID"),
	}
	f := cmd.Flags()
	kind := f.String("kind", "", "VERIFICATION, CONNECT_ENRICHMENT, STUCK_PLUS_REVEAL or VERIFICATION_STEP")
	variant := f.String("variant", "", "optional refinement, e.g. a verification serviceType")
	amount := f.Int64("amount", -1, "price in credits")
	clear := f.Bool("clear", false, "remove the override, so the configured price applies")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		k, ok := accountsv1.LedgerKind_value["LEDGER_KIND_"+strings.ToUpper(*kind)]
		if !ok || k == 0 {
			return result{}, usagef("--kind must be VERIFICATION, CONNECT_ENRICHMENT, STUCK_PLUS_REVEAL or VERIFICATION_STEP")
		}
		req := &accountsv1.SetClientPriceRequest{ClientId: args[0], Kind: accountsv1.LedgerKind(k), Variant: *variant}
		switch {
		case *clear && *amount >= 0:
			return result{}, usagef("give --amount or --clear, not both")
		case *clear:
		case *amount >= 0:
			req.Amount = amount
		default:
			return result{}, usagef("give --amount N or --clear")
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.SetClientPrice(ctx, req)
			return result{msg: resp}, err
		})
	})
}

// origins shows the web origins allowed to capture a client's browser flows, or replaces them
// with a comma-separated list (--clear: none).
func (c *conn) origins() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "origins CLIENT_ID [ORIGIN,… | --clear]",
		Short: "Show or replace the web origins allowed to capture a client's browser flows",
		Args:  rangeArgs(1, 2, "CLIENT_ID [ORIGINS]"),
	}
	clear := cmd.Flags().Bool("clear", false, "allow no origin")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if len(args) == 2 && *clear {
			return result{}, usagef("give origins or --clear, not both")
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			if len(args) == 1 && !*clear {
				resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: args[0]})
				return result{msg: &accountsv1.SetClientWebOriginsResponse{WebOrigins: resp.GetDetails().GetWebOrigins()}}, err
			}
			var origins []string
			if len(args) == 2 {
				for _, o := range strings.Split(args[1], ",") {
					if o = strings.TrimSpace(o); o != "" {
						origins = append(origins, o)
					}
				}
			}
			resp, err := admin.SetClientWebOrigins(ctx, &accountsv1.SetClientWebOriginsRequest{ClientId: args[0], Origins: origins})
			return result{msg: resp}, err
		})
	})
}

// redirectURIs shows the redirect URIs registered for a client's authorization code flow (mnv's
// OpenID provider, the CAMARA endpoints), or replaces them: one argument each, since a URI's
// query may hold a comma (--clear: none).
func (c *conn) redirectURIs() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "redirect-uris CLIENT_ID [URI…| --clear]",
		Short: "Show or replace the redirect URIs registered for a client's authorization code flow",
		Long: "Without URIs, shows the client's registered redirect URIs. URIs replace them: an authorization\n" +
			"request's redirect_uri must be one of them exactly (an http loopback address, 127.0.0.1 or\n" +
			"[::1], on any port). Each is an absolute https URI (http only on localhost, 127.0.0.1 or [::1]),\n" +
			"without fragment, written as the client sends it.",
		Args: rangeArgs(1, 1+maxRedirectURIs, "CLIENT_ID [URI…]"),
	}
	clear := cmd.Flags().Bool("clear", false, "register none: every authorization of the client is refused")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if len(args) > 1 && *clear {
			return result{}, usagef("give URIs or --clear, not both")
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			if len(args) == 1 && !*clear {
				resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: args[0]})
				return result{msg: &accountsv1.SetClientRedirectUrisResponse{RedirectUris: resp.GetDetails().GetRedirectUris()}}, err
			}
			resp, err := admin.SetClientRedirectUris(ctx, &accountsv1.SetClientRedirectUrisRequest{ClientId: args[0], RedirectUris: args[1:]})
			return result{msg: resp}, err
		})
	})
}

// maxRedirectURIs is accounts' bound, here so that a longer list is a usage error before any
// call.
const maxRedirectURIs = 20

// operators shows the operators (and their methods) a client may use, or replaces them.
func (c *conn) operators() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operators CLIENT_ID [OPERATOR[:METHOD],… | --clear | --none]",
		Short: "Show or replace the operators, and their methods, a client may use",
		Long: "Without a list, shows the client's operators. A list replaces them: each entry is an operator\n" +
			"id of verification's registry, or * for every operator of it (quote it in a shell), alone for\n" +
			"all of its methods or with :HEADER_ENRICHMENT or :NETWORK_API for one; an id given twice\n" +
			"gets both methods. What a client can use is its list intersected with the registry: an\n" +
			"operator the registry lacks, or a method the operator does not support, enables nothing, and\n" +
			"a sandbox operator also needs the SANDBOX feature.\n\n" +
			"--clear returns the client to the default set: every sandbox operator of the registry, with\n" +
			"all of its methods (usable with SANDBOX). --none enables no operator at all.",
		Example: `  mnvctl client operators $MNV_CLIENT_ID sandbox,acme-ae:NETWORK_API
  mnvctl client operators $MNV_CLIENT_ID '*:HEADER_ENRICHMENT'
  mnvctl client operators $MNV_CLIENT_ID --clear`,
		Args: rangeArgs(1, 2, "CLIENT_ID [OPERATORS]"),
	}
	clear := cmd.Flags().Bool("clear", false, "return to the default set (the registry's sandbox operators)")
	none := cmd.Flags().Bool("none", false, "enable no operator")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if n := btoi(len(args) == 2) + btoi(*clear) + btoi(*none); n > 1 {
			return result{}, usagef("give a list, --clear or --none: one of them")
		}
		var ops *accountsv1.OperatorEnablement
		switch {
		case *clear:
			ops = &accountsv1.OperatorEnablement{DefaultSet: true}
		case *none:
			ops = &accountsv1.OperatorEnablement{}
		case len(args) == 2:
			var err error
			if ops, err = parseOperators(args[1]); err != nil {
				return result{}, err
			}
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			if ops == nil {
				resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: args[0]})
				return result{msg: &accountsv1.SetClientOperatorsResponse{Operators: resp.GetDetails().GetOperators()}}, err
			}
			resp, err := admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: args[0], Operators: ops})
			return result{msg: resp}, err
		})
	})
}

// parseOperators reads OPERATOR[:METHOD],…: an operator alone has every method, an operator
// given twice has the methods of both entries.
func parseOperators(s string) (*accountsv1.OperatorEnablement, error) {
	all := []accountsv1.OperatorMethod{accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT, accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API}
	out := &accountsv1.OperatorEnablement{}
	byID := map[string]*accountsv1.OperatorGrant{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, method, withMethod := strings.Cut(entry, ":")
		methods := all
		if withMethod {
			v, ok := accountsv1.OperatorMethod_value["OPERATOR_METHOD_"+strings.ToUpper(strings.TrimSpace(method))]
			if !ok || v == 0 {
				return nil, usagef("%q: unknown method %q; known: HEADER_ENRICHMENT, NETWORK_API", entry, method)
			}
			methods = []accountsv1.OperatorMethod{accountsv1.OperatorMethod(v)}
		}
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, usagef("%q: an operator id is missing", entry)
		}
		g, ok := byID[id]
		if !ok {
			g = &accountsv1.OperatorGrant{OperatorId: id}
			byID[id] = g
			out.Grants = append(out.Grants, g)
		}
		for _, m := range methods {
			if !slices.Contains(g.Methods, m) {
				g.Methods = append(g.Methods, m)
			}
		}
	}
	if len(out.Grants) == 0 {
		return nil, usagef("the list names no operator (--none enables none, --clear gives the default set)")
	}
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lowBalance shows, sets or clears a client's own threshold of the balance.low event.
func (c *conn) lowBalance() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "low-balance CLIENT_ID [THRESHOLD | --default]",
		Short: "Show or set the balance below which a debit sends the client's balance.low event (0: never)",
		Long: "Without THRESHOLD, shows the client's own threshold and the one that applies. --default\n" +
			"clears the client's own, so the service's default (MNV_LOW_BALANCE_THRESHOLD) applies.",
		Args: rangeArgs(1, 2, "CLIENT_ID [THRESHOLD]"),
	}
	def := cmd.Flags().Bool("default", false, "take the service's default threshold")
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if len(args) == 2 && *def {
			return result{}, usagef("give a threshold or --default, not both")
		}
		req := &accountsv1.SetClientLowBalanceThresholdRequest{ClientId: args[0]}
		if len(args) == 2 {
			n, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || n < 0 {
				return result{}, usagef("THRESHOLD must be a whole number of credits, 0 or more")
			}
			req.Threshold = &n
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			if len(args) == 1 && !*def {
				resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: args[0]})
				d := resp.GetDetails()
				return result{msg: &accountsv1.SetClientLowBalanceThresholdResponse{
					LowBalanceThreshold: d.LowBalanceThreshold, EffectiveLowBalanceThreshold: d.GetEffectiveLowBalanceThreshold(),
				}}, err
			}
			resp, err := admin.SetClientLowBalanceThreshold(ctx, req)
			return result{msg: resp}, err
		})
	})
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
			return nil, usagef("--expires-in %q: want days 1d to 3650d, or a duration like 12h", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return nil, usagef("--expires-in %q: want days like 30d or a duration like 12h", s)
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
			return nil, usagef("unknown feature %q; known: VERIFY, CONNECT, STUCK_PLUS, SANDBOX, NUMBER_SHARE", f)
		}
		out = append(out, accountsv1.Feature(v))
	}
	return out, nil
}

// withAPIURL puts MNV_API_URL before vars when the local run's API is known (see conn.apiURL).
func (c *conn) withAPIURL(vars ...field) []field {
	if c.apiURL == "" {
		return vars
	}
	return append([]field{{"MNV_API_URL", c.apiURL}}, vars...)
}
