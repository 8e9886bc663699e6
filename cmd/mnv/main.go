// Command mnv runs the whole suite in one process for local development (make run): every
// service and the gateway, each on its own port, talking real gRPC over loopback. On first start
// it generates development secrets and a demo client under the state folder (.mnv). Each app
// presents its own internal token, as in a deployment, and the sandbox operator is on unless
// MNV_SANDBOX says otherwise.
//
// Production runs each service's own binary instead (services/*/cmd, gateway/cmd).
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/cmd/internal/demosite"
	"github.com/mnvhq/mnv/cmd/internal/devstate"
	"github.com/mnvhq/mnv/cmd/internal/shellenv"
	gateway "github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	accounts "github.com/mnvhq/mnv/services/accounts/app"
	connect "github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/lifecycle"
	"github.com/mnvhq/mnv/services/platform/process"
	verification "github.com/mnvhq/mnv/services/verification/app"
)

func main() {
	state := os.Getenv(devstate.StateDirVar)
	if state == "" {
		state = devstate.DefaultDir
	}
	// Secrets first: the services read them from the environment as they start.
	tokens, err := devSecrets(state)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mnv: %v\n", err)
		os.Exit(1)
	}
	process.Main("mnv", func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error {
		return run(ctx, env, log, reg, state, tokens)
	})
}

// devSecrets makes the development secrets and points the environment at them: one internal
// token per caller (the files by caller are returned; each app gets its own, see ownToken) and
// the caller list every server accepts, which the all-in-one always sets itself. It also sets
// the development defaults (devDefaults) the environment leaves unset.
func devSecrets(state string) (map[string]string, error) {
	if err := devstate.EnsureSecrets(state); err != nil {
		return nil, err
	}
	tokens, callers, err := devstate.InternalTokens(state)
	if err != nil {
		return nil, err
	}
	if err := os.Setenv("MNV_INTERNAL_CALLERS", callers.String()); err != nil {
		return nil, err
	}
	for name, value := range devDefaults {
		if _, set := os.LookupEnv(name); !set {
			if err := os.Setenv(name, value); err != nil {
				return nil, err
			}
		}
	}
	return tokens, nil
}

// devDefaults are what this development binary turns on unless the environment says otherwise:
// the sandbox operator, and a CRM receiver on the developer's own machine (plain http on
// loopback), so the README's walk-through runs without a restart. Production runs the services'
// own binaries, where all of them are off.
var devDefaults = map[string]string{
	"MNV_SANDBOX":              "true",
	"MNV_WEBHOOK_ALLOW_HTTP":   "true",
	"MNV_WEBHOOK_ALLOWED_NETS": "127.0.0.0/8,::1/128",
}

// tokenVar is the variable of a process's own internal token.
const tokenVar = "MNV_INTERNAL_TOKEN"

// ownToken is the environment one app of the all-in-one reads: the process's, with the app's
// own internal token (tokenFile) in place of any the environment sets.
func ownToken(tokenFile string) *config.Env {
	return config.New(func(name string) (string, bool) {
		switch name {
		case tokenVar:
			return "", false
		case tokenVar + "_FILE":
			return tokenFile, true
		}
		return os.LookupEnv(name)
	})
}

func run(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry, state string, tokens map[string]string) error {
	acfg, err := accounts.LoadConfig(ownToken(tokens[auth.CallerAccounts]))
	if err != nil {
		return err
	}
	gcfg, err := gateway.LoadConfig(ownToken(tokens[auth.CallerGateway]))
	if err != nil {
		return err
	}
	vcfg, err := verification.LoadConfig(ownToken(tokens[auth.CallerVerification]))
	if err != nil {
		return err
	}
	ccfg, err := connect.LoadConfig(ownToken(tokens[auth.CallerConnect]))
	if err != nil {
		return err
	}
	demoAddr := env.String(demoAddrVar, defaultDemoAddr)
	if vcfg.CAMARAAddr == "" {
		// The all-in-one serves the CAMARA facade (off by default in the service's own binary).
		vcfg.CAMARAAddr = defaultCAMARAAddr
	}
	// A default port another program holds is no reason to fail a developer's start: take a free
	// one and say so. An address set in the environment is kept, and fails loudly if taken.
	for _, a := range []struct {
		name string
		addr *string
	}{
		{"MNV_ACCOUNTS_GRPC_ADDR", &acfg.GRPCAddr}, {"MNV_VERIFICATION_GRPC_ADDR", &vcfg.GRPCAddr},
		{"MNV_CONNECT_GRPC_ADDR", &ccfg.GRPCAddr}, {"MNV_HTTP_ADDR", &gcfg.HTTPAddr}, {demoAddrVar, &demoAddr},
		{"MNV_VERIFICATION_CAMARA_ADDR", &vcfg.CAMARAAddr},
	} {
		if _, set := os.LookupEnv(a.name); set {
			continue
		}
		if free, moved, err := freeIfTaken(*a.addr); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		} else if moved {
			log.Warn("default address taken; using a free port (set the variable to choose one)",
				zap.String("variable", a.name), zap.String("taken", *a.addr), zap.String("using", free))
			*a.addr = free
		}
	}
	vcfg.AccountsAddr, ccfg.AccountsAddr, vcfg.ConnectAddr, acfg.ConnectAddr = acfg.GRPCAddr, acfg.GRPCAddr, ccfg.GRPCAddr, ccfg.GRPCAddr
	gcfg.AccountsAddr, gcfg.VerificationAddr, gcfg.ConnectAddr = acfg.GRPCAddr, vcfg.GRPCAddr, ccfg.GRPCAddr
	gcfg.CAMARAAddr = vcfg.CAMARAAddr
	if _, set := os.LookupEnv("MNV_CONSOLE_ORIGIN"); !set {
		// The console's passkeys belong to a host name, never an IP address: localhost, on the
		// gateway's port.
		if _, port, err := net.SplitHostPort(gcfg.HTTPAddr); err == nil {
			acfg.Console.Origin = "http://localhost:" + port
		}
	}
	if _, set := os.LookupEnv("MNV_CAMARA_ISSUER"); !set {
		// The facade's issuer is the gateway's public URL, wherever it listens.
		vcfg.CAMARAIssuer = "http://" + gcfg.HTTPAddr
	}

	camaraFake, err := startSandboxCAMARA(state, &vcfg, gcfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("sandbox CAMARA operator: %w", err)
	}
	if camaraFake != nil {
		defer camaraFake.Close()
		log.Info("sandbox-camara operator (a fake CAMARA operator) started", zap.String("url", camaraFake.URL))
	}

	smsc, err := startSandboxSMSC(&vcfg)
	if err != nil {
		return fmt.Errorf("sandbox SMSC: %w", err)
	}
	if smsc != nil {
		defer smsc.Close()
		log.Info("sandbox SMSC started: the workflows' SMS go there", zap.String("addr", smsc.Addr()))
	}

	// Each app logs as its component and labels its metrics with its service.
	logOf := func(name string) *zap.Logger { return log.With(zap.String("component", name)) }
	regOf := func(name string) prometheus.Registerer {
		return prometheus.WrapRegistererWith(prometheus.Labels{"service": name}, reg)
	}
	apps, err := start(ctx, []part{
		{"accounts", func(ctx context.Context) (process.Service, error) {
			return service(accounts.New(ctx, acfg, logOf("accounts"), regOf("accounts")))
		}},
		{"verification", func(ctx context.Context) (process.Service, error) {
			return service(verification.New(ctx, vcfg, logOf("verification"), regOf("verification")))
		}},
		{"connect", func(ctx context.Context) (process.Service, error) {
			return service(connect.New(ctx, ccfg, logOf("connect"), regOf("connect")))
		}},
		{"gateway", func(ctx context.Context) (process.Service, error) {
			return service(gateway.New(ctx, gcfg, logOf("gateway"), regOf("gateway"), reg))
		}},
	})
	if err != nil {
		return err
	}
	gatewayAddr := apps[len(apps)-1].lis.Addr()
	// The demo site comes last, stopped first: it calls the gateway. Its page loads the SDK from
	// the gateway's address as a browser on this machine reaches it.
	demo := demosite.New(demoAddr, "http://"+browserAddr(gatewayAddr))
	demoApps, err := start(ctx, []part{{"demo site", func(context.Context) (process.Service, error) { return demo, nil }}})
	if err != nil {
		for _, a := range slices.Backward(apps) {
			_ = a.lis.Close()
			_ = a.app.Close()
		}
		return err
	}
	apps = append(apps, demoApps...)
	demoURL := "http://" + browserAddr(demoApps[0].lis.Addr())
	addrs := devstate.Addrs{
		AccountsGRPC: apps[0].lis.Addr().String(), VerificationGRPC: apps[1].lis.Addr().String(),
		ConnectGRPC: apps[2].lis.Addr().String(), GatewayHTTP: gatewayAddr.String(), DemoHTTP: demoApps[0].lis.Addr().String(),
		CAMARAHTTP: vcfg.CAMARAAddr,
	}
	return serve(ctx, apps, acfg.ShutdownTimeout, func(ctx context.Context) {
		// The addresses bound, whatever ports were given: mnvctl reads them to reach this run.
		if err := devstate.WriteAddrs(state, addrs); err != nil {
			log.Error("state folder", zap.Error(err))
		}
		d, err := demoClient(ctx, acfg, gcfg.TLSCAFile, state, addrs.APIURL(), demoOrigins(demoApps[0].lis.Addr()))
		if err != nil {
			log.Error("demo client", zap.Error(err))
		} else {
			demo.SetClient(demosite.Client{ID: d.ClientID, APIKey: d.APIKey})
		}
		if err == nil {
			consoleLink(ctx, acfg, gcfg.TLSCAFile, d.ClientID, log)
		}
		fmt.Printf("\nDemo site: %s\nmnv is running: API on http://%s/v1/api (press Ctrl-C to stop)\n", demoURL, gatewayAddr)
	})
}

// demoAddrVar names the demo site's address; defaultDemoAddr is where it listens when unset.
const (
	demoAddrVar     = "MNV_DEMO_ADDR"
	defaultDemoAddr = "127.0.0.1:8081"
	// defaultCAMARAAddr is where the all-in-one serves the CAMARA facade, behind its gateway.
	defaultCAMARAAddr = "127.0.0.1:9095"
)

// browserAddr is addr as a browser on this machine reaches it: a listener on every interface
// (0.0.0.0, ::) answers on loopback.
func browserAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// part is one app of the suite and how to build it.
type part struct {
	name  string
	build func(context.Context) (process.Service, error)
}

// service turns what an app's New returns into a process.Service, keeping a failed New's nil
// a nil interface.
func service[S process.Service](s S, err error) (process.Service, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// started is an app built and listening.
type started struct {
	name string
	app  process.Service
	lis  net.Listener
}

// start builds the parts and opens their listeners, in order: accounts first, which the others
// dial. When one fails, what was started before it is closed, the last first, so a failed start
// leaves no port bound and no connection open.
func start(ctx context.Context, parts []part) (_ []started, err error) {
	var opened lifecycle.Closer
	defer opened.CloseOnError(&err)
	apps := make([]started, 0, len(parts))
	for _, p := range parts {
		a, err := p.build(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		opened.Add(p.name, a.Close)
		lis, err := a.Listen()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		opened.Add(p.name+" listener", lis.Close)
		apps = append(apps, started{name: p.name, app: a, lis: lis})
	}
	return apps, nil
}

// serve runs the apps (each closes what it opened when it ends) and then, once, ready, until ctx
// ends or an app fails. Then it stops them the last started first, each after the ones started
// after it have stopped: the gateway finishes its requests while the services behind it still
// answer. Each app may take its graceful stop (shutdown) and its cleanup.
func serve(ctx context.Context, apps []started, shutdown time.Duration, ready func(context.Context)) error {
	g, gctx := errgroup.WithContext(ctx)
	stopping := lifecycle.Closer{Timeout: time.Duration(len(apps)) * (shutdown + lifecycle.DefaultTimeout)}
	for _, a := range apps {
		// Each app's own context, which only stopping ends.
		actx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		g.Go(func() error {
			defer close(done)
			if err := a.app.Run(actx, a.lis); err != nil {
				return fmt.Errorf("%s: %w", a.name, err)
			}
			return nil
		})
		stopping.AddFunc(a.name, func() { stop(); <-done })
	}
	g.Go(func() error { ready(gctx); return nil })
	g.Go(func() error {
		<-gctx.Done()
		return stopping.Close()
	})
	return g.Wait()
}

// demoOrigins are the web origins the demo client allows to capture its browser flows: the
// demo site's, as bound (its port may not be the default), under both loopback names a
// developer may type. No other client of make run allows them.
func demoOrigins(addr net.Addr) []string {
	_, port, err := net.SplitHostPort(browserAddr(addr))
	if err != nil {
		return nil
	}
	return []string{"http://127.0.0.1:" + port, "http://localhost:" + port}
}

// demoClient creates a demo client on first start, through the admin API like mnvctl would,
// and prints its credentials as export lines, this once. Later starts, while the client exists,
// point to where they are kept. caFile is MNV_GRPC_TLS_CA, for a developer who turned TLS on.
// Its web origins are set to origins whenever they differ: the demo site may have moved to
// another port since the last start.
func demoClient(ctx context.Context, cfg accounts.Config, caFile, state, apiURL string, origins []string) (devstate.Demo, error) {
	opts, err := grpcclient.CredentialOptions(cfg.AdminToken, caFile)
	if err != nil {
		return devstate.Demo{}, err
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, append(opts,
		// Accounts' listener is bound, but it may not serve yet: wait for it rather than fail.
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))...)
	if err != nil {
		return devstate.Demo{}, err
	}
	defer conn.Close()
	admin := accountsv1.NewAccountsAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	d, err := devstate.ReadDemo(state)
	if err == nil {
		resp, err := admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: d.ClientID})
		if err == nil {
			if !sameOrigins(resp.GetDetails().GetWebOrigins(), origins) {
				if _, err := admin.SetClientWebOrigins(ctx, &accountsv1.SetClientWebOriginsRequest{ClientId: d.ClientID, Origins: origins}); err != nil {
					return devstate.Demo{}, err
				}
			}
			fmt.Printf("\nDemo client %s: its credentials are in %s; in a shell,\n  eval \"$(./bin/mnvctl demo -o env)\"\nsets MNV_API_URL, MNV_CLIENT_ID, MNV_API_KEY and MNV_CLIENT_SECRET.\n",
				d.ClientID, filepath.Join(state, devstate.DemoFile))
			return d, nil
		}
		if status.Code(err) != codes.NotFound {
			return devstate.Demo{}, err
		}
		// The database was reset: make a new demo client.
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return devstate.Demo{}, err
	}
	resp, err := admin.CreateClient(ctx, &accountsv1.CreateClientRequest{
		ClientName: "Demo client", ContactPersonName: "Dev Eloper", ContactPersonEmail: "dev@example.com",
		ContactPhoneNumber: "0123456789", InitialBalance: 1000,
		Features: []accountsv1.Feature{accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_CONNECT,
			accountsv1.Feature_FEATURE_STUCK_PLUS, accountsv1.Feature_FEATURE_SANDBOX},
	})
	if err != nil {
		return devstate.Demo{}, err
	}
	d = devstate.Demo{ClientID: resp.GetClient().GetId(), ClientSecret: resp.GetClientSecret(), APIKey: resp.GetApiKey()}
	if _, err := admin.SetClientWebOrigins(ctx, &accountsv1.SetClientWebOriginsRequest{ClientId: d.ClientID, Origins: origins}); err != nil {
		return devstate.Demo{}, err
	}
	if err := devstate.WriteDemo(state, d); err != nil {
		return devstate.Demo{}, err
	}
	// Shown in full this once; later starts point to the file.
	fmt.Printf("\nCreated a demo client with VERIFY, CONNECT, STUCK_PLUS and SANDBOX, allowing web origins %s.\n"+
		"Its credentials, shown only now, are kept in %s:\n\n%s",
		strings.Join(origins, ", "), filepath.Join(state, devstate.DemoFile),
		shellenv.Lines(shellenv.Var{Name: "MNV_API_URL", Value: apiURL}, shellenv.Var{Name: "MNV_CLIENT_ID", Value: d.ClientID},
			shellenv.Var{Name: "MNV_API_KEY", Value: d.APIKey}, shellenv.Var{Name: "MNV_CLIENT_SECRET", Value: d.ClientSecret}))
	return d, nil
}

// consoleLink prints the console's address and an invitation of the demo client's person
// (dev@example.com, ADMIN): the first start's link creates their passkey, a later one adds
// another (a recovery), so a newcomer is in the console one click after start.
func consoleLink(ctx context.Context, cfg accounts.Config, caFile, clientID string, log *zap.Logger) {
	opts, err := grpcclient.CredentialOptions(cfg.AdminToken, caFile)
	if err != nil {
		log.Error("console invitation", zap.Error(err))
		return
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, append(opts, grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))...)
	if err != nil {
		log.Error("console invitation", zap.Error(err))
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := accountsv1.NewAccountsAdminServiceClient(conn).InviteUser(ctx, &accountsv1.InviteUserRequest{
		ClientId: clientID, Email: demoPerson, Role: accountsv1.Role_ROLE_ADMIN,
	})
	if err != nil {
		log.Error("console invitation", zap.Error(err))
		return
	}
	fmt.Printf("\nConsole: %s/console\n  sign in as %s with a new passkey: %s\n", cfg.Console.Origin, demoPerson, resp.GetLink())
}

// demoPerson is the demo client's person in the console.
const demoPerson = "dev@example.com"

// sameOrigins reports whether the client's origins are want, in any order.
func sameOrigins(have, want []string) bool {
	return len(have) == len(want) && !slices.ContainsFunc(want, func(o string) bool { return !slices.Contains(have, o) })
}

// freeIfTaken returns addr when it can be listened on, else the same host with a port the
// system chose (moved). The port is released again before the app binds it: another program
// could take it in between, and the app's listen then fails with the variable's name.
func freeIfTaken(addr string) (_ string, moved bool, err error) {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return addr, false, l.Close()
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return "", false, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, err
	}
	l, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", false, err
	}
	free := l.Addr().String()
	return free, true, l.Close()
}
