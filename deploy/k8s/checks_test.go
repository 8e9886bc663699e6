package k8s_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// check is one rule over a rendered kustomization; it returns every problem found.
type check struct {
	name string
	run  func(m *manifests) []string
}

// checks are every rule, in the order they are reported. The fixtures in testdata/ prove that
// each one fails when its rule is broken.
var checks = []check{
	{"components", checkComponents},
	{"probes", checkProbes},
	{"resources", checkResources},
	{"security", checkSecurity},
	{"images", checkImages},
	{"secrets", checkSecrets},
	{"credentials", checkCredentials},
	{"addresses", checkAddresses},
	{"services", checkServices},
	{"pdb", checkPDBs},
	{"hpa", checkHPAs},
	{"migration", checkMigration},
	{"networkpolicy", checkNetworkPolicies},
	{"namespace", checkNamespace},
}

// runChecks returns the problems of every check, by check name; checks without problems are
// absent.
func runChecks(m *manifests) map[string][]string {
	out := map[string][]string{}
	for _, c := range checks {
		if p := c.run(m); len(p) > 0 {
			out[c.name] = p
		}
	}
	return out
}

func deploymentComponent(d *appsv1.Deployment) (component, bool) {
	return componentByLabel(d.Spec.Template.Labels["app.kubernetes.io/name"])
}

// mainContainer is the container named like the component (the serving process).
func mainContainer(d *appsv1.Deployment, c component) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == c.name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// serving is a Deployment of a known component, with its serving container and that
// container's environment.
type serving struct {
	d   *appsv1.Deployment
	c   component
	ctr *corev1.Container
	env map[string]envVar
}

// servingContainers lists the Deployments of known components that have their serving
// container (checkComponents reports the others).
func servingContainers(m *manifests) []serving {
	var out []serving
	for _, d := range m.deployments {
		c, ok := deploymentComponent(d)
		if !ok {
			continue
		}
		ctr := mainContainer(d, c)
		if ctr == nil {
			continue
		}
		env, _ := containerEnv(m, d.Namespace, ctr)
		out = append(out, serving{d: d, c: c, ctr: ctr, env: env})
	}
	return out
}

// checkComponents: every Deployment is one of the known components, with its serving container.
func checkComponents(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		c, ok := deploymentComponent(d)
		if !ok {
			p = append(p, fmt.Sprintf("Deployment %s: pod label app.kubernetes.io/name %q is no mnv component", d.Name, d.Spec.Template.Labels["app.kubernetes.io/name"]))
			continue
		}
		if d.Name != c.deployment {
			p = append(p, fmt.Sprintf("Deployment %s: the %s Deployment is named %s", d.Name, c.name, c.deployment))
		}
		if mainContainer(d, c) == nil {
			p = append(p, fmt.Sprintf("Deployment %s: no container named %s", d.Name, c.name))
		}
	}
	return p
}

// portNumber resolves port against the container's ports (0 when it is not declared).
func portNumber(ctr *corev1.Container, port intstr.IntOrString) int32 {
	for _, cp := range ctr.Ports {
		if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// checkProbes: the serving container has liveness, readiness and startup probes on the real
// health endpoints (gRPC health for the services, /healthz and /readyz for the gateway), each
// on a port the container declares: the serving port, or the port of MNV_GRPC_HEALTH_ADDR where
// a service answers health checks alone in plaintext. A service that speaks TLS
// (MNV_GRPC_TLS_CERT) needs the latter: the kubelet's gRPC probes cannot speak TLS.
func checkProbes(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		c, ok := deploymentComponent(d)
		if !ok {
			continue
		}
		for _, ctr := range d.Spec.Template.Spec.Containers {
			where := fmt.Sprintf("Deployment %s container %s", d.Name, ctr.Name)
			probes := map[string]*corev1.Probe{"liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe, "startup": ctr.StartupProbe}
			for _, kind := range []string{"liveness", "readiness", "startup"} {
				pr := probes[kind]
				if pr == nil {
					p = append(p, fmt.Sprintf("%s: no %s probe", where, kind))
					continue
				}
				var port intstr.IntOrString
				switch {
				case pr.HTTPGet != nil:
					port = pr.HTTPGet.Port
				case pr.GRPC != nil:
					port = intstr.FromInt32(pr.GRPC.Port)
				case pr.TCPSocket != nil:
					port = pr.TCPSocket.Port
				default:
					p = append(p, fmt.Sprintf("%s: %s probe runs a command; the images have no shell", where, kind))
					continue
				}
				if portNumber(&ctr, port) == 0 {
					p = append(p, fmt.Sprintf("%s: %s probe on port %s, which the container does not declare", where, kind, port.String()))
					continue
				}
				if ctr.Name != c.name {
					continue
				}
				wantPath := c.probes[kind]
				wantPort, what, err := healthPort(m, d.Namespace, &ctr, c)
				if err != nil {
					p = append(p, fmt.Sprintf("%s: %s probe: %v", where, kind, err))
				} else if got := portNumber(&ctr, port); got != wantPort {
					p = append(p, fmt.Sprintf("%s: %s probe on port %d, want %s %d", where, kind, got, what, wantPort))
				}
				switch {
				case wantPath == "" && (pr.GRPC == nil || (pr.GRPC.Service != nil && *pr.GRPC.Service != "")):
					p = append(p, fmt.Sprintf("%s: %s probe must be a gRPC health check of the whole server", where, kind))
				case wantPath != "" && (pr.HTTPGet == nil || pr.HTTPGet.Path != wantPath):
					p = append(p, fmt.Sprintf("%s: %s probe must be HTTP GET %s", where, kind, wantPath))
				}
			}
		}
	}
	return p
}

// healthPort is the port a probe of the serving container must reach, and what it is: the port
// of MNV_GRPC_HEALTH_ADDR when set, else the serving port. A server that speaks TLS must set
// MNV_GRPC_HEALTH_ADDR: the kubelet's gRPC probes cannot speak TLS.
func healthPort(m *manifests, ns string, ctr *corev1.Container, c component) (int32, string, error) {
	env, _ := containerEnv(m, ns, ctr)
	if h, ok := env["MNV_GRPC_HEALTH_ADDR"]; ok {
		_, port, err := net.SplitHostPort(h.value)
		n, perr := strconv.ParseInt(port, 10, 32)
		if err != nil || perr != nil {
			return 0, "", fmt.Errorf("MNV_GRPC_HEALTH_ADDR %q is not an address with a port", h.value)
		}
		return int32(n), "the plaintext health port of MNV_GRPC_HEALTH_ADDR", nil
	}
	if _, tls := env["MNV_GRPC_TLS_CERT"]; tls {
		return 0, "", errors.New("the server speaks TLS (MNV_GRPC_TLS_CERT), which the kubelet's gRPC probes cannot: set MNV_GRPC_HEALTH_ADDR and probe its port")
	}
	return c.port, "the serving port", nil
}

// env is a container's environment as the kubelet builds it: envFrom, then env over it.
type envVar struct {
	name      string
	value     string // a literal value (env value, or a ConfigMap's data)
	literal   bool
	configMap string // the ConfigMap it came from through envFrom, if any
	from      *corev1.EnvVarSource
}

func containerEnv(m *manifests, ns string, ctr *corev1.Container) (map[string]envVar, []string) {
	var p []string
	out := map[string]envVar{}
	for _, ef := range ctr.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm := m.configMap(ns, ef.ConfigMapRef.Name)
			if cm == nil {
				if ef.ConfigMapRef.Optional == nil || !*ef.ConfigMapRef.Optional {
					p = append(p, fmt.Sprintf("container %s: envFrom ConfigMap %s is not in the render", ctr.Name, ef.ConfigMapRef.Name))
				}
				continue
			}
			for k, v := range cm.Data {
				out[ef.Prefix+k] = envVar{name: ef.Prefix + k, value: v, literal: true, configMap: cm.Name}
			}
		case ef.SecretRef != nil:
			p = append(p, fmt.Sprintf("container %s: envFrom Secret %s: name each secret variable (secretKeyRef or a *_FILE mount) so that it can be checked", ctr.Name, ef.SecretRef.Name))
		}
	}
	for _, e := range ctr.Env {
		out[e.Name] = envVar{name: e.Name, value: e.Value, literal: e.ValueFrom == nil, from: e.ValueFrom}
	}
	return out, p
}

// parseGoBytes parses a GOMEMLIMIT value: a number of bytes with an optional B, KiB, MiB, GiB or
// TiB suffix.
func parseGoBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a GOMEMLIMIT: %q", s)
	}
	return n * mult, nil
}

// checkResources: every container, init containers included, requests and limits CPU and
// memory, requests within limits; GOMEMLIMIT, when set, is below the memory limit; in prod the
// memory request equals the limit.
func checkResources(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		for _, ctr := range allContainers(&d.Spec.Template.Spec) {
			where := fmt.Sprintf("Deployment %s container %s", d.Name, ctr.Name)
			r := ctr.Resources
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := r.Requests[name]
				lim, hasLim := r.Limits[name]
				if !hasReq {
					p = append(p, fmt.Sprintf("%s: no %s request", where, name))
				}
				if !hasLim {
					p = append(p, fmt.Sprintf("%s: no %s limit", where, name))
				}
				if hasReq && hasLim && req.Cmp(lim) > 0 {
					p = append(p, fmt.Sprintf("%s: %s request %s above its limit %s", where, name, req.String(), lim.String()))
				}
				if hasReq && req.IsZero() {
					p = append(p, fmt.Sprintf("%s: %s request is zero", where, name))
				}
			}
			memLim, hasLim := r.Limits[corev1.ResourceMemory]
			if m.env == "prod" && hasLim {
				if req := r.Requests[corev1.ResourceMemory]; req.Cmp(memLim) != 0 {
					p = append(p, fmt.Sprintf("%s: in prod the memory request must equal the limit (%s, not %s)", where, memLim.String(), req.String()))
				}
			}
			env, _ := containerEnv(m, d.Namespace, ctr)
			if v, ok := env["GOMEMLIMIT"]; ok && hasLim {
				n, err := parseGoBytes(v.value)
				switch {
				case err != nil:
					p = append(p, fmt.Sprintf("%s: %v", where, err))
				case n >= memLim.Value():
					p = append(p, fmt.Sprintf("%s: GOMEMLIMIT %s is not below the memory limit %s", where, v.value, memLim.String()))
				case n < memLim.Value()/2:
					p = append(p, fmt.Sprintf("%s: GOMEMLIMIT %s is less than half the memory limit %s", where, v.value, memLim.String()))
				}
			}
		}
	}
	return p
}

func isFalse(b *bool) bool { return b != nil && !*b }
func isTrue(b *bool) bool  { return b != nil && *b }

// checkSecurity: pods run as user 65532, non-root, RuntimeDefault seccomp, no host namespaces,
// no API token, no service links; every container has a read-only root, no privilege
// escalation, every capability dropped and none added.
func checkSecurity(m *manifests) []string {
	var p []string
	const uid = 65532
	for _, d := range m.deployments {
		spec := &d.Spec.Template.Spec
		where := "Deployment " + d.Name
		psc := spec.SecurityContext
		switch {
		case psc == nil:
			p = append(p, where+": no pod securityContext")
		default:
			if !isTrue(psc.RunAsNonRoot) {
				p = append(p, where+": pod securityContext.runAsNonRoot is not true")
			}
			if psc.RunAsUser == nil || *psc.RunAsUser != uid {
				p = append(p, fmt.Sprintf("%s: pod securityContext.runAsUser is not %d", where, uid))
			}
			if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				p = append(p, where+": pod seccompProfile is not RuntimeDefault")
			}
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			p = append(p, where+": uses a host namespace")
		}
		if !isFalse(spec.AutomountServiceAccountToken) {
			p = append(p, where+": automountServiceAccountToken is not false (mnv never calls the API server)")
		}
		if !isFalse(spec.EnableServiceLinks) {
			p = append(p, where+": enableServiceLinks is not false (service links add variables named after each Service among mnv's own)")
		}
		for _, ctr := range allContainers(spec) {
			cw := fmt.Sprintf("%s container %s", where, ctr.Name)
			sc := ctr.SecurityContext
			if sc == nil {
				p = append(p, cw+": no securityContext")
				continue
			}
			if !isFalse(sc.AllowPrivilegeEscalation) {
				p = append(p, cw+": allowPrivilegeEscalation is not false")
			}
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				p = append(p, cw+": readOnlyRootFilesystem is not true")
			}
			if isTrue(sc.Privileged) {
				p = append(p, cw+": privileged")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				p = append(p, cw+": capabilities do not drop ALL")
			} else if len(sc.Capabilities.Add) > 0 {
				p = append(p, fmt.Sprintf("%s: adds capabilities %v", cw, sc.Capabilities.Add))
			}
			if sc.RunAsUser != nil && *sc.RunAsUser != uid {
				p = append(p, fmt.Sprintf("%s: runAsUser %d, not %d", cw, *sc.RunAsUser, uid))
			}
			if isFalse(sc.RunAsNonRoot) {
				p = append(p, cw+": runAsNonRoot is false")
			}
			if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				p = append(p, cw+": seccompProfile is not RuntimeDefault")
			}
		}
	}
	for _, sa := range m.serviceAccounts {
		if !isFalse(sa.AutomountServiceAccountToken) {
			p = append(p, "ServiceAccount "+sa.Name+": automountServiceAccountToken is not false")
		}
	}
	return p
}

// imageProblem says what is wrong with an image reference, or "".
func imageProblem(image string) string {
	if image == "" {
		return "no image"
	}
	if strings.Contains(image, "@sha256:") {
		return ""
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	if i < 0 {
		return "untagged (Kubernetes pulls latest)"
	}
	if tag := name[i+1:]; tag == "" || tag == "latest" {
		return "tag " + strconv.Quote(tag) + " is not a pinned version"
	}
	return ""
}

// checkImages: every image, init containers included, has a version tag other than latest, or
// a digest.
func checkImages(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		for _, ctr := range allContainers(&d.Spec.Template.Spec) {
			if why := imageProblem(ctr.Image); why != "" {
				p = append(p, fmt.Sprintf("Deployment %s container %s: image %q: %s", d.Name, ctr.Name, ctr.Image, why))
			}
		}
	}
	return p
}

// credentialInURL finds a password in a URL ("postgres://user:secret@host").
var credentialInURL = regexp.MustCompile(`://[^/@\s]*:[^/@\s]+@`)

// secretMount finds the Secret key mounted at file in the container: the names of the Secret
// and key, or an explanation of why the file is no Secret's.
func secretMount(spec *corev1.PodSpec, ctr *corev1.Container, file string) (string, error) {
	for _, vm := range ctr.VolumeMounts {
		dir := strings.TrimSuffix(vm.MountPath, "/")
		if !strings.HasPrefix(file, dir+"/") {
			continue
		}
		rel := strings.TrimPrefix(file, dir+"/")
		if vm.SubPath != "" {
			return "", fmt.Errorf("%s is mounted with subPath, which does not follow Secret updates", file)
		}
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == vm.Name {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil {
			return "", fmt.Errorf("%s: volume %s is not declared", file, vm.Name)
		}
		type source struct {
			name  string
			items []corev1.KeyToPath
		}
		var sources []source
		switch {
		case vol.Secret != nil:
			sources = append(sources, source{vol.Secret.SecretName, vol.Secret.Items})
		case vol.Projected != nil:
			for _, s := range vol.Projected.Sources {
				if s.Secret == nil {
					continue
				}
				sources = append(sources, source{s.Secret.Name, s.Secret.Items})
			}
		default:
			return "", fmt.Errorf("%s is on volume %s, which is not a Secret", file, vol.Name)
		}
		for _, s := range sources {
			if len(s.items) == 0 {
				return s.name + "/" + rel, nil // every key of the Secret is a file
			}
			for _, it := range s.items {
				if path.Clean(it.Path) == path.Clean(rel) {
					return s.name + "/" + it.Key, nil
				}
			}
		}
		return "", fmt.Errorf("%s is on volume %s, but no Secret key of it is projected there", file, vol.Name)
	}
	return "", fmt.Errorf("%s is on no volume of the container", file)
}

// checkSecrets: a secret variable never has a literal value or a ConfigMap as its source: it
// comes by secretKeyRef, or as NAME_FILE naming a file of a mounted Secret, and only where the
// code reads NAME_FILE. Every secret LoadConfig requires is provided. The render holds no
// Secret, and no ConfigMap holds a secret or a URL with a password.
func checkSecrets(m *manifests) []string {
	var p []string
	for _, s := range m.secrets {
		p = append(p, fmt.Sprintf("Secret %s: the repository must not contain Secrets; reference them", s.Name))
	}
	for _, cm := range m.configMaps {
		for k, v := range cm.Data {
			if _, ok := secretVars[k]; ok {
				p = append(p, fmt.Sprintf("ConfigMap %s: holds the secret %s", cm.Name, k))
			}
			if credentialInURL.MatchString(v) {
				p = append(p, fmt.Sprintf("ConfigMap %s: %s holds a URL with a password", cm.Name, k))
			}
		}
	}
	for _, d := range m.deployments {
		c, known := deploymentComponent(d)
		spec := &d.Spec.Template.Spec
		for _, ctr := range allContainers(spec) {
			where := fmt.Sprintf("Deployment %s container %s", d.Name, ctr.Name)
			env, problems := containerEnv(m, d.Namespace, ctr)
			for _, q := range problems {
				p = append(p, "Deployment "+d.Name+" "+q)
			}
			provided := map[string]bool{}
			for name, v := range env {
				if credentialInURL.MatchString(v.value) {
					p = append(p, fmt.Sprintf("%s: %s holds a URL with a password", where, name))
				}
				if _, ok := secretVars[name]; ok {
					switch {
					case v.configMap != "":
						p = append(p, fmt.Sprintf("%s: secret %s comes from ConfigMap %s", where, name, v.configMap))
					case v.literal:
						p = append(p, fmt.Sprintf("%s: secret %s has a literal value", where, name))
					case v.from == nil || v.from.SecretKeyRef == nil:
						p = append(p, fmt.Sprintf("%s: secret %s does not come from a secretKeyRef", where, name))
					default:
						provided[name] = true
					}
					continue
				}
				base, isFile := strings.CutSuffix(name, "_FILE")
				fileCapable, isSecret := secretVars[base]
				if !isFile || !isSecret {
					continue
				}
				if !fileCapable {
					p = append(p, fmt.Sprintf("%s: %s is not read by the code; %s must come by secretKeyRef", where, name, base))
					continue
				}
				if !v.literal {
					p = append(p, fmt.Sprintf("%s: %s must be a literal path", where, name))
					continue
				}
				if _, err := secretMount(spec, ctr, v.value); err != nil {
					p = append(p, fmt.Sprintf("%s: %s: %v", where, name, err))
					continue
				}
				if _, both := env[base]; both {
					p = append(p, fmt.Sprintf("%s: both %s and %s are set, which the code refuses", where, base, name))
				}
				provided[base] = true
			}
			if !known {
				continue
			}
			required := c.secrets
			if c.database && isMigration(ctr) {
				// migrate reads the database URL alone: the step that changes the schema holds
				// none of the service's keys.
				required = []string{"DATABASE_URL"}
				for name := range provided {
					if name != "DATABASE_URL" && name != c.dbVar {
						p = append(p, fmt.Sprintf("%s: holds the secret %s, which migrate does not read", where, name))
					}
				}
				for _, vm := range ctr.VolumeMounts {
					if secretVolume(spec, vm.Name) {
						p = append(p, fmt.Sprintf("%s: mounts the Secret volume %s, which migrate does not read", where, vm.Name))
					}
				}
			}
			for _, s := range required {
				ok := provided[s]
				if s == "DATABASE_URL" && c.dbVar != "" {
					ok = ok || provided[c.dbVar]
				}
				if !ok {
					p = append(p, fmt.Sprintf("%s: required secret %s is not provided", where, s))
				}
			}
		}
	}
	return p
}

// serviceFor finds the Service a host:port address reaches, as "name:port", or "".
func serviceFor(m *manifests, ns, addr string) string {
	addr = strings.TrimPrefix(addr, "dns:///")
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return ""
	}
	parts := strings.Split(host, ".")
	name, svcNS := parts[0], ns
	if len(parts) > 1 {
		svcNS = parts[1]
		if len(parts) > 2 && strings.Join(parts[2:], ".") != "svc" && strings.Join(parts[2:], ".") != "svc.cluster.local" {
			return ""
		}
	}
	for _, s := range append(slices.Clone(m.services), m.peerServices...) {
		if s.Name != name || s.Namespace != svcNS {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if int(sp.Port) == port {
				return fmt.Sprintf("%s:%d", name, port)
			}
		}
	}
	return ""
}

// checkAddresses: every process listens on its pod's addresses (the code's default is
// loopback) at the port its container declares, serves metrics on the metrics port, and
// reaches the other services through their Services (of the render or the rest of the suite)
// on the right port; the gateway sets every backend, the CAMARA facade included. The facade's
// issuer is set (the code's default is loopback), is the gateway's https URL in prod, and is
// MNV_PUBLIC_URL when both are set: both are the gateway's public base URL.
func checkAddresses(m *manifests) []string {
	var p []string
	for _, sv := range servingContainers(m) {
		d, c, ctr, env := sv.d, sv.c, sv.ctr, sv.env
		where := fmt.Sprintf("Deployment %s container %s", d.Name, ctr.Name)
		listen := func(name string, want int32) {
			v, ok := env[name]
			if !ok {
				p = append(p, fmt.Sprintf("%s: %s is not set (the default listens on loopback only)", where, name))
				return
			}
			host, port, err := net.SplitHostPort(v.value)
			if err != nil {
				p = append(p, fmt.Sprintf("%s: %s=%q: %v", where, name, v.value, err))
				return
			}
			if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
				p = append(p, fmt.Sprintf("%s: %s=%q listens on loopback: probes and Services cannot reach it", where, name, v.value))
			}
			if n, err := strconv.Atoi(port); err != nil || int32(n) != want {
				p = append(p, fmt.Sprintf("%s: %s=%q, want port %d", where, name, v.value, want))
			}
			if portNumber(ctr, intstr.FromInt32(want)) == 0 {
				p = append(p, fmt.Sprintf("%s: port %d (%s) is not declared", where, want, name))
			}
		}
		listen(c.listenVar, c.port)
		listen("MNV_METRICS_ADDR", metricsPort)
		for _, name := range slices.Sorted(maps.Keys(c.listens)) {
			listen(name, c.listens[name])
		}
		for _, name := range c.backends {
			if _, ok := env[name]; !ok {
				p = append(p, fmt.Sprintf("%s: %s is not set", where, name))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(backendAddrs)) {
			v, ok := env[name]
			if !ok {
				continue
			}
			want := fmt.Sprintf("%s:%d", backendAddrs[name].service, backendAddrs[name].port)
			switch got := serviceFor(m, d.Namespace, v.value); got {
			case want:
			case "":
				p = append(p, fmt.Sprintf("%s: %s=%q names no Service port of the suite", where, name, v.value))
			default:
				p = append(p, fmt.Sprintf("%s: %s=%q reaches %s, want %s", where, name, v.value, got, want))
			}
		}
		if _, ok := c.listens[facadeListenVar]; ok {
			p = append(p, issuerProblems(m.env, where, env)...)
		}
	}
	return p
}

// issuerProblems checks the CAMARA facade's issuer (MNV_CAMARA_ISSUER) in a container's env.
func issuerProblems(envName, where string, env map[string]envVar) []string {
	issuer, ok := env["MNV_CAMARA_ISSUER"]
	if !ok {
		return []string{where + ": MNV_CAMARA_ISSUER is not set: the default, http://127.0.0.1:8080, names no gateway a client reaches"}
	}
	var p []string
	u, err := url.Parse(issuer.value)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		p = append(p, fmt.Sprintf("%s: MNV_CAMARA_ISSUER=%q is not an absolute http(s) URL", where, issuer.value))
	case envName == "prod" && (u.Scheme != "https" || u.Hostname() == "localhost" || net.ParseIP(u.Hostname()) != nil && net.ParseIP(u.Hostname()).IsLoopback()):
		p = append(p, fmt.Sprintf("%s: MNV_CAMARA_ISSUER=%q: in prod the gateway's public https URL", where, issuer.value))
	}
	if pub, ok := env["MNV_PUBLIC_URL"]; ok && strings.TrimSuffix(pub.value, "/") != strings.TrimSuffix(issuer.value, "/") {
		p = append(p, fmt.Sprintf("%s: MNV_PUBLIC_URL=%q and MNV_CAMARA_ISSUER=%q differ: both are the gateway's public base URL", where, pub.value, issuer.value))
	}
	return p
}

func selectorMatches(sel map[string]string, podLabels map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(podLabels))
}

// checkServices: every Service selects the pods of exactly one Deployment and every port
// targets a port those pods declare; a component's own Service exposes its serving port and
// its other listeners (verification's CAMARA facade). A gRPC service's Service is headless, so
// its callers' round_robin balancer sees every pod; then the port is used as is on the pod
// (targetPort does not apply), so it must be the container's port number.
func checkServices(m *manifests) []string {
	var p []string
	for _, s := range m.services {
		var matched []*appsv1.Deployment
		for _, d := range m.deployments {
			if d.Namespace == s.Namespace && selectorMatches(s.Spec.Selector, d.Spec.Template.Labels) {
				matched = append(matched, d)
			}
		}
		if len(matched) != 1 {
			p = append(p, fmt.Sprintf("Service %s: selects %d Deployments, want 1", s.Name, len(matched)))
			continue
		}
		c, known := deploymentComponent(matched[0])
		grpcBackend := known && c.name != "gateway"
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone
		if grpcBackend && !headless {
			p = append(p, fmt.Sprintf("Service %s: a gRPC backend's Service must be headless (clusterIP: None) for its callers to spread calls over the pods", s.Name))
		}
		targeted := map[int32]bool{}
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 || headless {
				target = intstr.FromInt32(sp.Port)
			}
			found := false
			for _, ctr := range matched[0].Spec.Template.Spec.Containers {
				if n := portNumber(&ctr, target); n != 0 {
					found, targeted[n] = true, true
				}
			}
			if !found {
				p = append(p, fmt.Sprintf("Service %s: port %s targets %s, which no container of %s declares", s.Name, sp.Name, target.String(), matched[0].Name))
			}
		}
		if !known || s.Name != c.deployment {
			continue
		}
		for _, port := range append([]int32{c.port}, slices.Sorted(maps.Values(c.listens))...) {
			if !targeted[port] {
				p = append(p, fmt.Sprintf("Service %s: exposes no port of %s's listener on %d", s.Name, c.name, port))
			}
		}
	}
	return p
}

// minReplicas is the fewest pods a Deployment runs: its HPA's minimum, else its replicas.
func minReplicas(m *manifests, d *appsv1.Deployment) int32 {
	for _, h := range m.hpas {
		if h.Namespace == d.Namespace && h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == d.Name && h.Spec.MinReplicas != nil {
			return *h.Spec.MinReplicas
		}
	}
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

// checkPDBs: every Deployment has a PodDisruptionBudget selecting its pods that still lets a
// node drain evict one of them.
func checkPDBs(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		var found bool
		for _, b := range m.pdbs {
			if b.Namespace != d.Namespace || b.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			found = true
			replicas := minReplicas(m, d)
			switch {
			case b.Spec.MaxUnavailable != nil:
				if n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(replicas), true); err != nil || n < 1 {
					p = append(p, fmt.Sprintf("PodDisruptionBudget %s: maxUnavailable %s lets no pod of %s be evicted", b.Name, b.Spec.MaxUnavailable.String(), d.Name))
				}
			case b.Spec.MinAvailable != nil:
				if n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(replicas), true); err != nil || n >= int(replicas) {
					p = append(p, fmt.Sprintf("PodDisruptionBudget %s: minAvailable %s of %d replicas blocks every drain", b.Name, b.Spec.MinAvailable.String(), replicas))
				}
			default:
				p = append(p, fmt.Sprintf("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", b.Name))
			}
		}
		if !found {
			p = append(p, fmt.Sprintf("Deployment %s: no PodDisruptionBudget selects its pods", d.Name))
		}
	}
	return p
}

// checkHPAs (prod): every Deployment has a HorizontalPodAutoscaler with at least two replicas
// and a CPU target, and leaves spec.replicas to it (an apply would scale it back down); every
// HPA targets a Deployment of the render. The database services' pools, at maxReplicas, fit
// the PostgreSQL connection budget.
func checkHPAs(m *manifests) []string {
	if m.env != "prod" {
		return nil
	}
	var p []string
	conns := 0
	for _, d := range m.deployments {
		var found bool
		for _, h := range m.hpas {
			ref := h.Spec.ScaleTargetRef
			if h.Namespace != d.Namespace || ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
				continue
			}
			found = true
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
				p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: minReplicas below 2", h.Name))
			}
			if h.Spec.MinReplicas != nil && h.Spec.MaxReplicas < *h.Spec.MinReplicas {
				p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: maxReplicas below minReplicas", h.Name))
			}
			hasCPU := false
			for _, mt := range h.Spec.Metrics {
				if mt.Resource != nil && mt.Resource.Name == corev1.ResourceCPU {
					hasCPU = true
				}
			}
			if !hasCPU {
				p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: no CPU metric", h.Name))
			}
			if c, ok := deploymentComponent(d); ok && c.database {
				if ctr := mainContainer(d, c); ctr != nil {
					env, _ := containerEnv(m, d.Namespace, ctr)
					v := env["MNV_"+strings.ToUpper(c.name)+"_DB_MAX_CONNS"]
					pool, err := strconv.Atoi(v.value)
					if err != nil {
						p = append(p, fmt.Sprintf("Deployment %s: MNV_%s_DB_MAX_CONNS must be set in prod (the default, 32, is per replica)", d.Name, strings.ToUpper(c.name)))
					}
					conns += int(h.Spec.MaxReplicas) * (pool + c.batchConns + migrateConns)
				}
			}
		}
		if !found {
			p = append(p, fmt.Sprintf("Deployment %s: no HorizontalPodAutoscaler in prod", d.Name))
		}
		if d.Spec.Replicas != nil {
			p = append(p, fmt.Sprintf("Deployment %s: sets replicas (%d) although an HPA scales it", d.Name, *d.Spec.Replicas))
		}
	}
	for _, h := range m.hpas {
		if m.deployment(h.Spec.ScaleTargetRef.Name) == nil {
			p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: targets %s %s, not in the render", h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name))
		}
	}
	if conns > postgresConnectionBudget {
		p = append(p, fmt.Sprintf("at maxReplicas the database pools take %d connections, over the budget of %d", conns, postgresConnectionBudget))
	}
	return p
}

// checkMigration: each database service's pod first runs `<binary> migrate` in an init
// container with the serving container's image and environment; the gateway has none (its
// binary has no migrate command and would serve forever as an init container).
func checkMigration(m *manifests) []string {
	var p []string
	for _, d := range m.deployments {
		c, ok := deploymentComponent(d)
		if !ok {
			continue
		}
		spec := &d.Spec.Template.Spec
		var mig *corev1.Container
		for i := range spec.InitContainers {
			if isMigration(&spec.InitContainers[i]) {
				mig = &spec.InitContainers[i]
			}
		}
		if !c.database {
			if mig != nil {
				p = append(p, fmt.Sprintf("Deployment %s: %s has no database and no migrate command", d.Name, c.name))
			}
			continue
		}
		if mig == nil {
			p = append(p, fmt.Sprintf("Deployment %s: no init container runs `%s migrate`", d.Name, c.name))
			continue
		}
		if len(mig.Command) > 0 || !slices.Equal(mig.Args, []string{"migrate"}) {
			p = append(p, fmt.Sprintf("Deployment %s: the migration must run the image's entrypoint with the single argument migrate, not %v %v", d.Name, mig.Command, mig.Args))
		}
		srv := mainContainer(d, c)
		if srv == nil {
			continue
		}
		if mig.Image != srv.Image {
			p = append(p, fmt.Sprintf("Deployment %s: migration image %s differs from the serving image %s", d.Name, mig.Image, srv.Image))
		}
	}
	return p
}

// isMigration tells the container that runs `migrate`.
func isMigration(ctr *corev1.Container) bool {
	return slices.Contains(append(slices.Clone(ctr.Command), ctr.Args...), "migrate")
}

// secretVolume tells whether the pod's volume name holds a Secret, whole or projected.
func secretVolume(spec *corev1.PodSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.Secret != nil {
			return true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					return true
				}
			}
		}
	}
	return false
}

// checkNamespace: in an overlay every namespaced object is in the environment's namespace, and
// the namespace enforces the restricted Pod Security Standard when the render holds it.
func checkNamespace(m *manifests) []string {
	want, ok := overlayNamespace[m.env]
	if !ok {
		return nil
	}
	var p []string
	for _, k := range m.keys() {
		kind, rest, _ := strings.Cut(k, " ")
		ns, _, _ := strings.Cut(rest, "/")
		if kind != "Namespace" && ns != want {
			p = append(p, fmt.Sprintf("%s: namespace %q, want %q", k, ns, want))
		}
	}
	for _, n := range m.namespaces {
		if n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			p = append(p, "Namespace "+n.Name+": does not enforce the restricted Pod Security Standard")
		}
	}
	return p
}
