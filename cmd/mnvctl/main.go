// Command mnvctl is the operator's tool: it creates clients and manages their balance, status,
// features and prices through the accounts service's admin gRPC API.
//
//	mnvctl client create --name ACME --contact-name "Ada" --contact-email ada@acme.test \
//	    --contact-phone 0123456789 --balance 100 --expires-in 30d --features VERIFY,SANDBOX -o env
//	mnvctl client show CLIENT_ID
//	mnvctl client list [--page 1] [--size 20]
//	mnvctl client top-up CLIENT_ID --amount 500 [--expires-in 90d]
//	mnvctl client suspend CLIENT_ID | mnvctl client activate CLIENT_ID
//	mnvctl client features CLIENT_ID VERIFY,CONNECT
//	mnvctl client price CLIENT_ID --kind VERIFICATION [--variant HEADER_ENRICHMENT] --amount 2 | --clear
//	mnvctl client origins CLIENT_ID [https://shop.example,https://www.shop.example | --clear]
//	mnvctl keygen data-key KEY_ID | mnvctl keygen secret
//	mnvctl keygen internal-token CALLER | mnvctl keygen caller-digest CALLER < token-file
//	mnvctl webhooks list --client CLIENT_ID | mnvctl webhooks disable|enable --client CLIENT_ID WEBHOOK_ID
//	mnvctl webhooks receive --secret whsec_… [--listen 127.0.0.1:8099] [--count N]
//	mnvctl schema tables | mnvctl schema citus
//	mnvctl completion bash|zsh|fish
//
// Every command that prints takes -o text (aligned, for people), json (the API's shapes: enum
// names without their prefix, integers as numbers) or, where it reveals a credential, env
// (export lines for eval). See conn.go for how it reaches the accounts service.
//
// Exit status: 0 on success and for --help, 1 when the call fails (what failed is printed in the
// operator's words: explain.go), 2 on a usage error, a missing required flag included (the usage
// is printed).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; otherwise the module
// version of the build, or "devel".
var version = ""

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// execute runs mnvctl with args and returns its exit status.
func execute(args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var usage usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(errOut, "mnvctl: %v\n\n%s", err, cmd.UsageString())
		return 2
	}
	fmt.Fprintf(errOut, "mnvctl: %s\n", explain(cmd, cmd.Flags().Args(), err))
	return 1
}

// usageError is a command line mnvctl cannot run: exit status 2, with the usage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

const environment = `Environment:
  MNV_ACCOUNTS_ADDR     accounts gRPC address (--addr beats it; default: the address make run
                        recorded in its state folder, else 127.0.0.1:9091)
  MNV_ADMIN_TOKEN       operator credential (default: the state folder's secrets/admin-token)
  MNV_ADMIN_TOKEN_FILE  file holding the operator credential, instead of MNV_ADMIN_TOKEN
  MNV_GRPC_TLS_CA       CA file: dial over TLS verified against it (--tls-ca beats it)
  MNV_STATE_DIR         state folder of make run (default: .mnv in the working directory or
                        the nearest directory above it)`

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "mnvctl",
		Short: "Operate mnv: clients, balances, prices, and the secrets of a deployment",
		Long: "mnvctl creates clients and manages their balance, status, features and prices through the\n" +
			"accounts service's admin gRPC API, and generates the secrets a deployment needs.\n\n" + environment,
		Version:       buildVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noSubcommand,
		RunE:          missingSubcommand,
	}
	root.SetVersionTemplate("mnvctl {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newClientCommand(), newUserCommand(), newWebhooksCommand(), newKeygenCommand(), newDemoCommand(), newSchemaCommand())
	return root
}

// noSubcommand lets a group command see an unknown subcommand, which missingSubcommand reports.
func noSubcommand(*cobra.Command, []string) error { return nil }

// missingSubcommand is the run of a group command: it only ever runs without a known
// subcommand. Without it cobra prints the help and exits 0 for "mnvctl client frobnicate".
func missingSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usagef("%s needs a command", cmd.CommandPath())
}

// buildVersion is version, else the module version go build recorded, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// exactArgs and rangeArgs are cobra's positional checks as usage errors.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return rangeArgs(n, n, names)
}

func rangeArgs(min, max int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			if max == 0 {
				return usagef("%s takes no arguments, got %d", cmd.CommandPath(), len(args))
			}
			if min == max {
				return usagef("%s wants %d argument(s) (%s), got %d", cmd.CommandPath(), min, names, len(args))
			}
			return usagef("%s wants %d to %d arguments (%s), got %d", cmd.CommandPath(), min, max, names, len(args))
		}
		return nil
	}
}
