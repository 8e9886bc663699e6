package main

import (
	"context"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
)

// newKeygenCommand is the keygen group: fresh secrets for the configuration. It needs no
// running service. Text output is the bare value, one per line, for $(…) and files.
func newKeygenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Generate the secrets of a deployment (no service needed)",
		Args:  noSubcommand,
		RunE:  missingSubcommand,
	}
	cmd.AddCommand(keygenDataKey(), keygenSecret(), keygenInternalToken(), keygenCallerDigest())
	return cmd
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func keygenDataKey() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data-key KEY_ID",
		Short: "Print a new data key for MNV_DATA_KEYS (KEY_ID: letters, digits, - and _)",
		Args:  exactArgs(1, "KEY_ID"),
	}
	return leaf(cmd, true, func(_ context.Context, args []string) (result, error) {
		if !keyID.MatchString(args[0]) {
			return result{}, usagef("KEY_ID %q: 1 to 32 letters, digits, - and _", args[0])
		}
		spec := crypto.NewKeySpec(args[0])
		return result{lead: []field{{"dataKeys", spec}}, env: []field{{"MNV_DATA_KEYS", spec}}}, nil
	})
}

// secretVars are the variables a plain secret is meant for.
var secretVars = []string{"MNV_PEPPER", "MNV_ADMIN_TOKEN", "MNV_NUMBER_HASH_KEY"}

func keygenSecret() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret [--var NAME]",
		Short: "Print a new secret: a pepper, an admin token or a number hash key",
		Args:  exactArgs(0, ""),
	}
	name := cmd.Flags().String("var", "", "the variable it is for, which -o env exports: "+strings.Join(secretVars, ", "))
	format := outputFlag(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(cmd, *format, true); err != nil {
			return err
		}
		switch {
		case *name != "" && !slices.Contains(secretVars, *name):
			return usagef("--var %q: a secret is for %s", *name, strings.Join(secretVars, ", "))
		case *name == "" && *format == formatEnv:
			return usagef("-o env needs --var NAME, the variable the secret is for: %s", strings.Join(secretVars, ", "))
		}
		s := crypto.NewSecret()
		return result{lead: []field{{"secret", s}}, env: []field{{*name, s}}}.print(cmd.OutOrStdout(), *format)
	}
	return cmd
}

// callerArg checks that CALLER is one the servers know.
func callerArg(cmd *cobra.Command, args []string) error {
	if err := exactArgs(1, "CALLER")(cmd, args); err != nil {
		return err
	}
	if !slices.Contains(auth.KnownCallers, args[0]) {
		return usagef("CALLER %q: one of %s", args[0], strings.Join(auth.KnownCallers, ", "))
	}
	return nil
}

func keygenInternalToken() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "internal-token CALLER",
		Short: "Print a caller's new internal token, then its entry for the servers' MNV_INTERNAL_CALLERS",
		Long: "Print two lines: a new token, for that caller's own MNV_INTERNAL_TOKEN (its secret), and its\n" +
			"entry for the servers' MNV_INTERNAL_CALLERS, which is not secret.\nCALLER: " + strings.Join(auth.KnownCallers, ", "),
		Args: callerArg,
	}
	return leaf(cmd, true, func(_ context.Context, args []string) (result, error) {
		token := crypto.NewSecret()
		entry := auth.CallerEntry(args[0], token)
		return result{
			lead: []field{{"token", token}, {"callerEntry", entry}},
			env:  []field{{"MNV_INTERNAL_TOKEN", token}, {"MNV_INTERNAL_CALLERS", entry}},
		}, nil
	})
}

func keygenCallerDigest() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "caller-digest CALLER < token-file",
		Short: "Print the MNV_INTERNAL_CALLERS entry of a caller's token read from standard input",
		Long:  "Print the MNV_INTERNAL_CALLERS entry of a caller's token read from standard input.\nCALLER: " + strings.Join(auth.KnownCallers, ", "),
		Args:  callerArg,
	}
	var in io.Reader
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { in = cmd.InOrStdin() }
	return leaf(cmd, true, func(_ context.Context, args []string) (result, error) {
		b, err := io.ReadAll(io.LimitReader(in, 4096))
		if err != nil {
			return result{}, err
		}
		token := strings.TrimSpace(string(b))
		if len(token) < auth.MinTokenLength {
			return result{}, usagef("caller-digest: give the caller's token (%d+ characters) on standard input", auth.MinTokenLength)
		}
		entry := auth.CallerEntry(args[0], token)
		return result{lead: []field{{"callerEntry", entry}}, env: []field{{"MNV_INTERNAL_CALLERS", entry}}}, nil
	})
}
