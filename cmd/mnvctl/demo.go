package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
)

// newDemoCommand prints the demo client of the local run (make run) and where its API answers,
// read from the state folder: the README's first step, `eval "$(mnvctl demo -o env)"`.
func newDemoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Print the demo client of the local run (make run) and its API's address",
		Example: `  eval "$(./bin/mnvctl demo -o env)"   # sets MNV_API_URL, MNV_CLIENT_ID, MNV_API_KEY, MNV_CLIENT_SECRET
  curl -s "$MNV_API_URL/clients" -H "X-API-KEY: $MNV_API_KEY" -H "X-CLIENT-ID: $MNV_CLIENT_ID"`,
		Args: exactArgs(0, ""),
	}
	return leaf(cmd, true, func(context.Context, []string) (result, error) {
		d, err := devstate.FindDemo()
		if errors.Is(err, devstate.ErrNoState) || errors.Is(err, fs.ErrNotExist) {
			return result{}, errors.New("no demo client: start make run (it creates one on its first start), and run mnvctl in the checkout or with its MNV_STATE_DIR")
		}
		if err != nil {
			return result{}, err
		}
		addrs, err := devstate.FindAddrs()
		if err != nil && !errors.Is(err, devstate.ErrNoState) {
			return result{}, err
		}
		url := addrs.APIURL()
		fields := []field{{"apiUrl", url}, {"clientId", d.ClientID}, {"apiKey", d.APIKey}, {"clientSecret", d.ClientSecret}}
		return result{
			lead: fields,
			env: []field{{"MNV_API_URL", url}, {"MNV_CLIENT_ID", d.ClientID}, {"MNV_API_KEY", d.APIKey},
				{"MNV_CLIENT_SECRET", d.ClientSecret}},
			text: func(w io.Writer) error {
				var b strings.Builder
				for _, f := range []field{{"api url:      ", url}, {"client id:    ", d.ClientID}, {"api key:      ", d.APIKey}, {"client secret:", d.ClientSecret}} {
					v := f.value
					if v == "" {
						v = "-"
					}
					b.WriteString(f.name + " " + v + "\n")
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
		}, nil
	})
}
