package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
)

// TestWebhooksAgainstConnect lists and disables a client's endpoint through a real connect
// service, which it finds by MNV_CONNECT_ADDR, with the operator's token.
func TestWebhooksAgainstConnect(t *testing.T) {
	acc := apptest.Start(t) // first: under -short it skips before the build
	bin := build(t)
	con := connecttest.Start(t, acc.Addr, authtest.ConnectToken, nil)
	c := acc.CreateClient(t, 10)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", c.APIKey)
	made, err := connectv1.NewWebhookServiceClient(apptest.Dial(t, con.Addr, "")).CreateWebhook(ctx,
		&connectv1.CreateWebhookRequest{Url: "https://hooks.example.com/mnv", Events: []string{"balance.low"}})
	if err != nil {
		t.Fatal(err)
	}
	id, secret := made.GetWebhook().GetId(), made.GetWebhook().GetSecret()
	env := []string{"MNV_CONNECT_ADDR=" + con.Addr, "MNV_ADMIN_TOKEN=" + connecttest.AdminToken}
	mnvctl := func(t *testing.T, args ...string) string {
		t.Helper()
		r := runBin(t, bin, t.TempDir(), env, "", args...)
		if r.code != 0 {
			t.Fatalf("mnvctl %s: exit %d: %s", strings.Join(args, " "), r.code, r.errOut)
		}
		if strings.Contains(r.out, secret) || strings.Contains(r.out, "whsec_") {
			t.Fatalf("mnvctl %s shows a secret: %s", strings.Join(args, " "), r.out)
		}
		return r.out
	}

	if out := mnvctl(t, "webhooks", "list", "--client", c.ID); !strings.Contains(out, id) || !strings.Contains(out, "enabled") ||
		!strings.Contains(out, "balance.low") || !strings.Contains(out, "1 endpoint(s)") {
		t.Fatalf("list: %s", out)
	}
	var listed struct {
		Items []map[string]any `json:"items"`
	}
	decode(t, mnvctl(t, "webhooks", "list", "--client", c.ID, "-o", "json"), &listed)
	if len(listed.Items) != 1 || listed.Items[0]["id"] != id || listed.Items[0]["enabled"] != true || listed.Items[0]["secret"] != nil {
		t.Fatalf("list -o json: %+v", listed)
	}
	if out := mnvctl(t, "webhooks", "disable", "--client", c.ID, id); !strings.Contains(out, "disabled (OPERATOR)") {
		t.Fatalf("disable: %s", out)
	}
	var shown map[string]any
	decode(t, mnvctl(t, "webhooks", "list", "--client", c.ID, "-o", "json"), &listed)
	shown = listed.Items[0]
	if shown["enabled"] != false || shown["disabledReason"] != "OPERATOR" {
		t.Fatalf("after disable: %v", shown)
	}
	decode(t, mnvctl(t, "webhooks", "enable", "--client", c.ID, id, "-o", "json"), &shown)
	if shown["enabled"] != true || shown["disabledReason"] != nil {
		t.Fatalf("after enable: %v", shown)
	}

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no --client", env, []string{"webhooks", "list"}, 2, "--client is required"},
		{"another client's endpoint", env, []string{"webhooks", "disable", "--client", acc.CreateClient(t, 1).ID, id}, 1, "no webhook endpoint " + strconv.Quote(id) + " of client "},
		{"a wrong token", []string{"MNV_CONNECT_ADDR=" + con.Addr, "MNV_ADMIN_TOKEN=" + strings.Repeat("x", 40)}, []string{"webhooks", "list", "--client", c.ID}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, bin, t.TempDir(), tc.env, "", tc.args...)
			if r.code != tc.code || !strings.Contains(strings.ToLower(r.errOut), strings.ToLower(tc.want)) {
				t.Fatalf("exit %d, %q; want %d with %q", r.code, r.errOut, tc.code, tc.want)
			}
		})
	}
}
