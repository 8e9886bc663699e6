package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// maxEventBody bounds what the receiver reads of one request: an event is a few hundred bytes.
const maxEventBody = 1 << 20

// newReceiveCmd is `mnvctl webhooks receive`: a local endpoint that checks each delivery with the
// Standard Webhooks reference library (the one a client's own receiver would use) and prints
// the events it accepts. It is for trying webhooks out and for debugging a secret, not a
// production receiver.
func newReceiveCmd() *cobra.Command {
	var (
		addr    string
		secrets []string
		count   int
	)
	cmd := &cobra.Command{
		Use:   "receive --secret whsec_… [--listen 127.0.0.1:8099] [--count N]",
		Short: "Receive webhook deliveries locally, verify their signatures and print the events",
		Long: `Listens on --listen and checks every POST with the Standard Webhooks reference library
against each --secret (give two during a rotation's overlap). A delivery that verifies is
answered 204 and printed; one that does not is answered 401 and reported on stderr. With
--count it exits after that many verified events; otherwise on Ctrl-C.

Secrets also come from MNV_WEBHOOK_SECRET (comma-separated) when no --secret is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(secrets) == 0 {
				for _, s := range strings.Split(os.Getenv("MNV_WEBHOOK_SECRET"), ",") {
					if s = strings.TrimSpace(s); s != "" {
						secrets = append(secrets, s)
					}
				}
			}
			if len(secrets) == 0 {
				return usagef("--secret is required (the whsec_… secret shown when the endpoint was created)")
			}
			var hooks []*standardwebhooks.Webhook
			for _, s := range secrets {
				wh, err := standardwebhooks.NewWebhook(s)
				if err != nil {
					return usagef("--secret is not a whsec_… secret")
				}
				hooks = append(hooks, wh)
			}
			lis, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "mnvctl: receiving webhooks on http://%s/\n", lis.Addr())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r := &receiver{hooks: hooks, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), left: count, done: stop}
			srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-ctx.Done()
				shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(shut)
			}()
			if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:8099", "address to listen on")
	cmd.Flags().StringArrayVar(&secrets, "secret", nil, "the endpoint's whsec_… signing secret (repeat during a rotation)")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many verified events (0: run until interrupted)")
	return cmd
}

// receiver verifies and prints deliveries.
type receiver struct {
	hooks       []*standardwebhooks.Webhook
	out, errOut io.Writer
	mu          sync.Mutex
	left        int // verified events until done; 0: no limit
	done        func()
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEventBody))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	var verr error
	for _, wh := range rc.hooks {
		if verr = wh.Verify(body, r.Header); verr == nil {
			break
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if verr != nil {
		fmt.Fprintf(rc.errOut, "mnvctl: refused a delivery (webhook-id %q): %v\n", r.Header.Get("webhook-id"), verr)
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
		return
	}
	// One line per event, so a shell can read them (jq, grep) as they come.
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		line.Reset()
		line.Write(body)
	}
	fmt.Fprintf(rc.out, "%s\n", line.Bytes())
	w.WriteHeader(http.StatusNoContent)
	if rc.left > 0 {
		if rc.left--; rc.left == 0 {
			rc.done()
		}
	}
}
