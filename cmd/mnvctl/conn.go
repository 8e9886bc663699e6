package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
)

// defaultAccountsAddr is accounts' address in a local run with the default ports.
const defaultAccountsAddr = "127.0.0.1:9091"

// conn is how mnvctl reaches the accounts service: each setting from its flag, else its
// variable, else the local run's state folder, else the default.
type conn struct {
	addr, caFile, serverName string
	// apiURL is the local run's API when mnvctl reached accounts through the address the run
	// recorded: -o env of a new client then says where its API answers too.
	apiURL string
	// dialed is the address the command dialled, and from where it came (for the hint when
	// nothing answers there).
	dialed, from string
}

func (c *conn) flags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.addr, "addr", "", "accounts gRPC address (default: MNV_ACCOUNTS_ADDR, else make run's, else "+defaultAccountsAddr+")")
	f.StringVar(&c.caFile, "tls-ca", "", "CA file: dial over TLS verified against it (default: MNV_GRPC_TLS_CA; none: plaintext)")
	f.StringVar(&c.serverName, "tls-server-name", "", "name the server's certificate must have (default: the address's host)")
}

// admin dials the accounts admin API; done closes the connection.
func (c *conn) admin() (client accountsv1.AccountsAdminServiceClient, done func(), err error) {
	env := config.FromOS()
	addr := c.addr
	c.from = "from --addr"
	if addr == "" {
		addr, c.from = env.String("MNV_ACCOUNTS_ADDR", ""), "from MNV_ACCOUNTS_ADDR"
	}
	if err := env.Err(); err != nil {
		return nil, nil, err
	}
	if addr == "" {
		if addr, c.apiURL, err = recordedAddr(); err != nil {
			return nil, nil, err
		}
		c.from = "the default"
		if c.apiURL != "" {
			c.from = "recorded by make run"
		}
	}
	c.dialed = addr
	cc, err := c.dial(env, addr)
	if err != nil {
		return nil, nil, err
	}
	return accountsv1.NewAccountsAdminServiceClient(cc), func() { _ = cc.Close() }, nil
}

// dial opens a connection to addr that presents the operator's credential, over TLS when a CA
// is given.
func (c *conn) dial(env *config.Env, addr string) (*grpc.ClientConn, error) {
	token := env.Secret("MNV_ADMIN_TOKEN")
	caFile := c.caFile
	if caFile == "" {
		caFile = env.String("MNV_GRPC_TLS_CA", "")
	}
	if err := env.Err(); err != nil {
		return nil, err
	}
	var err error
	if token == "" {
		if token, err = devstate.FindAdminToken(); err != nil {
			return nil, err
		}
	}
	if c.serverName != "" && caFile == "" {
		return nil, usagef("--tls-server-name needs TLS: give --tls-ca or MNV_GRPC_TLS_CA")
	}
	opts, err := grpcclient.CredentialOptions(token, caFile)
	if err != nil {
		return nil, err
	}
	if c.serverName != "" {
		// With TLS, grpc-go checks the certificate against the authority.
		opts = append(opts, grpc.WithAuthority(c.serverName))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}

// recordedAddr is accounts' address recorded by the local run, with the run's API, or the
// default without one.
func recordedAddr() (addr, apiURL string, err error) {
	a, err := devstate.FindAddrs()
	switch {
	case errors.Is(err, devstate.ErrNoState) || err == nil && a.AccountsGRPC == "":
		return defaultAccountsAddr, "", nil
	case err != nil:
		return "", "", fmt.Errorf("the address make run recorded (set MNV_ACCOUNTS_ADDR instead): %w", err)
	}
	return a.AccountsGRPC, a.APIURL(), nil
}
