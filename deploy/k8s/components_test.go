package k8s_test

// component is what the manifests must say about one mnv process, taken from its code.
type component struct {
	// name is the app.kubernetes.io/name label, the Dockerfile's and the binary's name.
	name string
	// deployment is the name of its Deployment (and of its Service, PDB, HPA, NetworkPolicy).
	deployment string
	// cmd is the main package, from the repository root.
	cmd string
	// app is the file whose LoadConfig reads the configuration (with serviceConfig for a
	// service).
	app string
	// database: the process owns a schema, so the binary takes `migrate` and the pod runs it
	// before serving.
	database bool
	// port is the serving port: HTTP for the gateway, gRPC (with grpc.health.v1) for the others.
	port int32
	// listenVar sets the serving address; its default is loopback, useless in a pod.
	listenVar string
	// listens are the process's other listeners beyond metrics (variable → port): each must be
	// set off loopback, declared by the container and exposed by the component's Service.
	listens map[string]int32
	// backends are the address variables the process needs set (backendAddrs says where each
	// must point); the others are optional.
	backends []string
	// secrets are the secrets LoadConfig requires (env.Require). "DATABASE_URL" is also
	// satisfied by the service's own MNV_<SVC>_DATABASE_URL.
	secrets []string
	// dbVar is the service's own database URL variable.
	dbVar string
	// batchConns is the pool of its group-commit batches, beyond MNV_<SVC>_DB_MAX_CONNS
	// (verify.BatchConns in verification, billing.BatchConns in accounts).
	batchConns int
	// probes are the wanted probes: a path for HTTP, "" for gRPC health.
	probes map[string]string
	// caller: the process calls other services' internal methods with its own token
	// (MNV_INTERNAL_TOKEN), and dials them over TLS in prod (MNV_GRPC_TLS_CA).
	caller bool
	// server: the process serves gRPC with internal methods: it needs its callers' digests
	// (MNV_INTERNAL_CALLERS), and serves TLS in prod (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY).
	server bool
}

var components = []component{
	{
		name: "gateway", deployment: "mnv-gateway", cmd: "gateway/cmd/gateway", app: "gateway/app/app.go",
		port: 8080, listenVar: "MNV_HTTP_ADDR",
		backends: []string{"MNV_ACCOUNTS_ADDR", "MNV_VERIFICATION_ADDR", "MNV_CONNECT_ADDR", "MNV_CAMARA_ADDR"},
		secrets:  []string{"MNV_INTERNAL_TOKEN"}, caller: true,
		// /healthz: alive; /readyz: the gateway serves, backends listed, not followed (gateway/app).
		probes: map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": "/healthz"},
	},
	{
		name: "accounts", deployment: "mnv-accounts", cmd: "services/accounts/cmd/accounts", app: "services/accounts/app/app.go",
		database: true, port: 9091, listenVar: "MNV_ACCOUNTS_GRPC_ADDR", dbVar: "MNV_ACCOUNTS_DATABASE_URL", batchConns: 1,
		secrets: []string{"DATABASE_URL", "MNV_PEPPER", "MNV_DATA_KEYS", "MNV_ADMIN_TOKEN", "MNV_INTERNAL_TOKEN"},
		probes:  map[string]string{"liveness": "", "readiness": "", "startup": ""},
		caller:  true, server: true,
	},
	{
		name: "verification", deployment: "mnv-verification", cmd: "services/verification/cmd/verification", app: "services/verification/app/app.go",
		database: true, port: 9092, listenVar: "MNV_VERIFICATION_GRPC_ADDR", dbVar: "MNV_VERIFICATION_DATABASE_URL", batchConns: 2,
		listens: map[string]int32{facadeListenVar: facadePort},
		secrets: []string{"DATABASE_URL", "MNV_INTERNAL_TOKEN", "MNV_DATA_KEYS", "MNV_NUMBER_HASH_KEY"},
		probes:  map[string]string{"liveness": "", "readiness": "", "startup": ""},
		caller:  true, server: true,
	},
	{
		name: "connect", deployment: "mnv-connect", cmd: "services/connect/cmd/connect", app: "services/connect/app/app.go",
		database: true, port: 9093, listenVar: "MNV_CONNECT_GRPC_ADDR", dbVar: "MNV_CONNECT_DATABASE_URL",
		secrets: []string{"DATABASE_URL", "MNV_INTERNAL_TOKEN", "MNV_DATA_KEYS", "MNV_NUMBER_HASH_KEY"},
		probes:  map[string]string{"liveness": "", "readiness": "", "startup": ""},
		caller:  true, server: true,
	},
}

// serviceConfig is the file of the part of the configuration every service (a component with a
// database) reads the same way, platform/service's Config: its LoadConfig reads it too.
const serviceConfig = "services/platform/service/config.go"

// secretVars are the variables that hold secrets. The value says whether the code also reads
// NAME_FILE (config.Env.Secret); the database URLs are read with env.String, so for them a
// _FILE variable would be silently ignored. TestSecretListMatchesCode keeps this list true.
var secretVars = map[string]bool{
	"DATABASE_URL":                  false,
	"MNV_ACCOUNTS_DATABASE_URL":     false,
	"MNV_VERIFICATION_DATABASE_URL": false,
	"MNV_CONNECT_DATABASE_URL":      false,
	"MNV_INTERNAL_TOKEN":            true,
	"MNV_ADMIN_TOKEN":               true,
	"MNV_PEPPER":                    true,
	"MNV_DATA_KEYS":                 true,
	"MNV_NUMBER_HASH_KEY":           true,
	"MNV_REDIS_URL":                 true,
	"MNV_SMPP_PASSWORD":             true,
}

// facadePort is verification's CAMARA facade (plain HTTP, for the gateway alone), set by
// facadeListenVar; the gateway reaches it through MNV_CAMARA_ADDR.
const (
	facadePort      = 9095
	facadeListenVar = "MNV_VERIFICATION_CAMARA_ADDR"
)

// backendAddrs are where a process reaches another: each variable, when set, must name this
// Service (of the render, or of the rest of the suite) and port.
var backendAddrs = map[string]struct {
	service string
	port    int32
}{
	"MNV_ACCOUNTS_ADDR":     {"mnv-accounts", 9091},
	"MNV_VERIFICATION_ADDR": {"mnv-verification", 9092},
	"MNV_CONNECT_ADDR":      {"mnv-connect", 9093},
	"MNV_CAMARA_ADDR":       {"mnv-verification", facadePort},
}

// metricsPort is where every process serves Prometheus (MNV_METRICS_ADDR).
const metricsPort = 9100

// postgresConnectionBudget bounds, in prod, the sum over the database services of HPA
// maxReplicas times the pool size (MNV_<SVC>_DB_MAX_CONNS) plus the batches' pool and the
// migration step's connections. PostgreSQL's max_connections must exceed it (deploy/k8s/README.md).
const postgresConnectionBudget = 300

// migrateConns is the pool of the `migrate` command (app.Migrate opens MaxConns 2).
const migrateConns = 2

// overlayNamespace is the namespace each environment deploys into.
var overlayNamespace = map[string]string{"dev": "mnv-dev", "prod": "mnv"}

// componentByLabel returns the component whose name is the pod's app.kubernetes.io/name.
func componentByLabel(name string) (component, bool) {
	for _, c := range components {
		if c.name == name {
			return c, true
		}
	}
	return component{}, false
}
