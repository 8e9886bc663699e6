package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/config"
)

// defaultConnectAddr is connect's address in a local run with the default ports.
const defaultConnectAddr = "127.0.0.1:9093"

// webhookAdmin dials connect's webhook admin API: the address from --addr, else
// MNV_CONNECT_ADDR, else the local run's record, else the default.
func (c *conn) webhookAdmin() (connectv1.WebhookAdminServiceClient, func(), error) {
	env := config.FromOS()
	addr := c.addr
	c.from = "from --addr"
	if addr == "" {
		addr, c.from = env.String("MNV_CONNECT_ADDR", ""), "from MNV_CONNECT_ADDR"
	}
	if err := env.Err(); err != nil {
		return nil, nil, err
	}
	if addr == "" {
		a, err := devstate.FindAddrs()
		switch {
		case errors.Is(err, devstate.ErrNoState) || err == nil && a.ConnectGRPC == "":
			addr, c.from = defaultConnectAddr, "the default"
		case err != nil:
			return nil, nil, fmt.Errorf("the address make run recorded (set MNV_CONNECT_ADDR instead): %w", err)
		default:
			addr, c.from = a.ConnectGRPC, "recorded by make run"
		}
	}
	c.dialed = addr
	cc, err := c.dial(env, addr)
	if err != nil {
		return nil, nil, err
	}
	return connectv1.NewWebhookAdminServiceClient(cc), func() { _ = cc.Close() }, nil
}

func (c *conn) callWebhooks(ctx context.Context, fn func(context.Context, connectv1.WebhookAdminServiceClient) (result, error)) (result, error) {
	admin, done, err := c.webhookAdmin()
	if err != nil {
		return result{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := fn(ctx, admin)
	return r, reached(err, "connect", c.dialed, c.from, "MNV_CONNECT_ADDR")
}

func newWebhooksCommand() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Show and disable a client's event webhook endpoints; receive deliveries locally",
		Long:  "The webhooks commands call the connect service's admin API.\n\n" + environment,
		Args:  noSubcommand,
		RunE:  missingSubcommand,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&c.addr, "addr", "", "connect gRPC address (default: MNV_CONNECT_ADDR, else make run's, else "+defaultConnectAddr+")")
	f.StringVar(&c.caFile, "tls-ca", "", "CA file: dial over TLS verified against it (default: MNV_GRPC_TLS_CA; none: plaintext)")
	f.StringVar(&c.serverName, "tls-server-name", "", "name the server's certificate must have (default: the address's host)")
	client := f.String("client", "", "the client's id (required)")
	cmd.AddCommand(c.webhooksList(client), c.webhooksDisable(client), c.webhooksEnable(client), newReceiveCmd())
	return cmd
}

func needClient(client string) error {
	if client == "" {
		return usagef("--client is required")
	}
	return nil
}

func (c *conn) webhooksList(client *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list --client CLIENT_ID",
		Short: "List a client's webhook endpoints (never their secrets)",
		Args:  exactArgs(0, ""),
	}
	return leaf(cmd, false, func(ctx context.Context, _ []string) (result, error) {
		if err := needClient(*client); err != nil {
			return result{}, err
		}
		return c.callWebhooks(ctx, func(ctx context.Context, admin connectv1.WebhookAdminServiceClient) (result, error) {
			resp, err := admin.ListClientWebhooks(ctx, &connectv1.ListClientWebhooksRequest{ClientId: *client})
			if err != nil {
				return result{}, err
			}
			return result{msg: resp, text: func(w io.Writer) error { return webhookTable(w, resp.GetItems()) }}, nil
		})
	})
}

func (c *conn) webhooksDisable(client *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "disable --client CLIENT_ID WEBHOOK_ID",
		Short: "Disable a client's webhook endpoint; only the operator can enable it again (webhooks enable)",
		Args:  exactArgs(1, "WEBHOOK_ID"),
	}
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if err := needClient(*client); err != nil {
			return result{}, err
		}
		return c.callWebhooks(ctx, func(ctx context.Context, admin connectv1.WebhookAdminServiceClient) (result, error) {
			resp, err := admin.DisableClientWebhook(ctx, &connectv1.DisableClientWebhookRequest{ClientId: *client, WebhookId: args[0]})
			if err != nil {
				return result{}, err
			}
			return result{msg: resp.GetWebhook(), text: func(w io.Writer) error {
				return webhookTable(w, []*connectv1.WebhookEndpoint{resp.GetWebhook()})
			}}, nil
		})
	})
}

func (c *conn) webhooksEnable(client *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enable --client CLIENT_ID WEBHOOK_ID",
		Short: "Enable a client's webhook endpoint, whoever disabled it",
		Args:  exactArgs(1, "WEBHOOK_ID"),
	}
	return leaf(cmd, false, func(ctx context.Context, args []string) (result, error) {
		if err := needClient(*client); err != nil {
			return result{}, err
		}
		return c.callWebhooks(ctx, func(ctx context.Context, admin connectv1.WebhookAdminServiceClient) (result, error) {
			resp, err := admin.EnableClientWebhook(ctx, &connectv1.EnableClientWebhookRequest{ClientId: *client, WebhookId: args[0]})
			if err != nil {
				return result{}, err
			}
			return result{msg: resp.GetWebhook(), text: func(w io.Writer) error {
				return webhookTable(w, []*connectv1.WebhookEndpoint{resp.GetWebhook()})
			}}, nil
		})
	})
}

// webhookTable writes endpoints as a table.
func webhookTable(w io.Writer, items []*connectv1.WebhookEndpoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tFAILING SINCE\tEVENTS\tURL")
	for _, e := range items {
		state := "enabled"
		if !e.GetEnabled() {
			state = "disabled (" + strings.TrimPrefix(e.GetDisabledReason().String(), "WEBHOOK_DISABLED_REASON_") + ")"
		}
		failing := "-"
		if e.GetFailingSince() != nil {
			failing = e.GetFailingSince().AsTime().UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetId(), state, failing, strings.Join(e.GetEvents(), ","), e.GetUrl())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d endpoint(s)\n", len(items))
	return err
}
