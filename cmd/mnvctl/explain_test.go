package main

import (
	"errors"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
)

// TestExplain: what a failed call prints, by code, for the commands' own arguments and flags.
func TestExplain(t *testing.T) {
	root := newRoot()
	find := func(path ...string) *cobra.Command {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	create, show := find("client", "create"), find("client", "show")
	disable := find("webhooks", "disable")
	if err := disable.Parent().PersistentFlags().Set("client", "c-1"); err != nil {
		t.Fatal(err)
	}
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:9091: connect: connection refused"`)
	tests := []struct {
		name string
		cmd  *cobra.Command
		args []string
		err  error
		want string
	}{
		{"not found, a client", show, []string{"abc"}, apierr.New(codes.NotFound, "NOT_FOUND", "not found"), `no client with id "abc"`},
		{"not found, a webhook", disable, []string{"w-9"}, apierr.New(codes.NotFound, "NOT_FOUND", "not found"), `no webhook endpoint "w-9" of client "c-1"`},
		{"a field, by its flag", create, nil, apierr.Invalid("contactPersonName", "contactPersonName: must not be blank"), "refused: --contact-name: must not be blank"},
		{"a field without a flag", create, nil, apierr.Invalid("other", "other: bad"), "refused: other: bad"},
		{"token refused", show, []string{"abc"}, status.Error(codes.Unauthenticated, "bad token"), "the operator credential was refused (bad token): check MNV_ADMIN_TOKEN or MNV_ADMIN_TOKEN_FILE, or the state folder's secrets/admin-token"},
		{"nothing listens", show, []string{"abc"}, reached(refused, "accounts", "127.0.0.1:9091", "the default", "MNV_ACCOUNTS_ADDR"),
			"cannot reach accounts at 127.0.0.1:9091 (the default): is mnv running? Start it with `make run` in the checkout, or point MNV_ACCOUNTS_ADDR (or --addr) at a running accounts\n" +
				`  detail: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:9091: connect: connection refused"`},
		{"the service's own unavailability is not a hint to start it", show, []string{"abc"},
			reached(status.Error(codes.Unavailable, "authentication is unavailable, try again"), "accounts", "a:1", "the default", "MNV_ACCOUNTS_ADDR"),
			"the service is unavailable, try again: authentication is unavailable, try again"},
		{"internal", show, []string{"abc"}, status.Error(codes.Internal, "internal error"), "the service failed (Internal): internal error"},
		{"not a status", show, nil, errors.New("read token: no such file"), "read token: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := explain(tt.cmd, tt.args, tt.err); got != tt.want {
				t.Errorf("explain = %q\nwant      %q", got, tt.want)
			}
		})
	}
}
