package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

func newUserCommand() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Invite the people who sign in to a client's console",
		Long:  "The user commands call the accounts service's admin API.\n\n" + environment,
		Args:  noSubcommand,
		RunE:  missingSubcommand,
	}
	c.flags(cmd)
	cmd.AddCommand(c.invite())
	return cmd
}

func (c *conn) invite() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "invite --client CLIENT_ID --email EMAIL [--role ADMIN|MEMBER]",
		Short: "Invite a person to a client's console; prints the link, shown only now",
		Long: "The link opens the console, where the person creates a passkey and is signed in. It works\n" +
			"once, until it expires (MNV_CONSOLE_INVITATION_TTL). For a person who is a member\n" +
			"already (a lost passkey), the invitation adds a new passkey: a recovery.",
		Example: `  mnvctl user invite --client "$MNV_CLIENT_ID" --email ada@acme.test --role ADMIN`,
		Args:    exactArgs(0, ""),
	}
	client := cmd.Flags().String("client", "", "the client's id (required)")
	email := cmd.Flags().String("email", "", "the person's e-mail address (required)")
	role := cmd.Flags().String("role", "ADMIN", "ADMIN or MEMBER")
	_ = cmd.MarkFlagRequired("client")
	_ = cmd.MarkFlagRequired("email")
	return leaf(cmd, false, func(ctx context.Context, _ []string) (result, error) {
		r, ok := accountsv1.Role_value["ROLE_"+strings.ToUpper(*role)]
		if !ok || r == 0 {
			return result{}, usagef("--role must be ADMIN or MEMBER")
		}
		return c.call(ctx, func(ctx context.Context, admin accountsv1.AccountsAdminServiceClient) (result, error) {
			resp, err := admin.InviteUser(ctx, &accountsv1.InviteUserRequest{ClientId: *client, Email: *email, Role: accountsv1.Role(r)})
			return result{msg: resp}, err
		})
	})
}
