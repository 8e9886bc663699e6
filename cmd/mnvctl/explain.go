package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
)

// What mnvctl says when a call fails: in the operator's words, the flags they typed and the
// thing they named, not the service's API field names and a bare gRPC code.

// requiredAnnotation marks a flag that the command checks itself (checkRequired) before it
// dials anything, so that every missing one is named at once, by its flag.
const requiredAnnotation = "mnvctl_required"

// require marks cmd's flags names as required.
func require(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.Flags().SetAnnotation(n, requiredAnnotation, []string{"true"}); err != nil {
			panic(err) // a flag name of ours that does not exist
		}
	}
}

// checkRequired is a usage error naming every required flag of cmd that is unset or blank.
func checkRequired(cmd *cobra.Command) error {
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[requiredAnnotation]; ok && strings.TrimSpace(f.Value.String()) == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) == 0 {
		return nil
	}
	return usagef("%s needs %s", cmd.CommandPath(), strings.Join(missing, ", "))
}

// fieldAnnotation names, for the API fields a command sends, the flag that sets each, so that
// a refusal of the service names what the operator typed.
const fieldAnnotation = "mnvctl_field"

// fieldFlags records that flag sets the API field of each pair (field, flag).
func fieldFlags(cmd *cobra.Command, pairs ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		cmd.Annotations[fieldAnnotation+":"+pairs[i]] = "--" + pairs[i+1]
	}
}

// unreachable is a call that found no service at addr.
type unreachable struct {
	service, addr string
	from          string // where addr came from
	setBy         string // the variable that sets it
	err           error
}

func (u unreachable) Error() string {
	return fmt.Sprintf("cannot reach %s at %s (%s): is mnv running? Start it with `make run` in the checkout, "+
		"or point %s (or --addr) at a running %s\n  detail: %s", u.service, u.addr, u.from, u.setBy, u.service, status.Convert(u.err).Message())
}

func (u unreachable) Unwrap() error { return u.err }

// reached wraps err of a call to service at addr: a service away is told as unreachable.
func reached(err error, service, addr, from, setBy string) error {
	if status.Code(err) == codes.Unavailable && !strings.Contains(status.Convert(err).Message(), "try again") {
		return unreachable{service: service, addr: addr, from: from, setBy: setBy, err: err}
	}
	return err
}

// explain is the line mnvctl prints for a failed call of cmd with args.
func explain(cmd *cobra.Command, args []string, err error) string {
	var u unreachable
	if errors.As(err, &u) {
		return u.Error()
	}
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	d := apierr.Parse(err)
	msg := st.Message()
	if d.Field != "" {
		if flag := cmd.Annotations[fieldAnnotation+":"+d.Field]; flag != "" {
			msg = flag + ": " + strings.TrimPrefix(msg, d.Field+": ")
		}
	}
	switch st.Code() {
	case codes.NotFound:
		if what := named(cmd, args); what != "" {
			return "no " + what
		}
		return "not found: " + msg
	case codes.InvalidArgument:
		return "refused: " + msg
	case codes.Unauthenticated:
		return "the operator credential was refused (" + msg + "): check MNV_ADMIN_TOKEN or MNV_ADMIN_TOKEN_FILE, or the state folder's secrets/admin-token"
	case codes.PermissionDenied, codes.FailedPrecondition:
		return "refused: " + msg
	case codes.AlreadyExists:
		return "already exists: " + msg
	case codes.DeadlineExceeded:
		return "no answer within " + callTimeout.String() + ": " + msg
	case codes.Unavailable:
		return "the service is unavailable, try again: " + msg
	}
	return fmt.Sprintf("the service failed (%s): %s", st.Code(), msg)
}

// named is what cmd's arguments name, for a NOT_FOUND: "client with id X".
func named(cmd *cobra.Command, args []string) string {
	path := cmd.CommandPath()
	switch {
	case strings.HasPrefix(path, "mnvctl client ") && len(args) > 0:
		return fmt.Sprintf("client with id %q", args[0])
	case strings.HasPrefix(path, "mnvctl webhooks ") && len(args) > 0:
		return fmt.Sprintf("webhook endpoint %q of client %q", args[0], flagValue(cmd, "client"))
	case strings.HasPrefix(path, "mnvctl webhooks "):
		return fmt.Sprintf("client with id %q", flagValue(cmd, "client"))
	}
	return ""
}

// flagValue is the value of cmd's flag name, its own or inherited.
func flagValue(cmd *cobra.Command, name string) string {
	if f := cmd.Flag(name); f != nil {
		return f.Value.String()
	}
	return ""
}
