package k8s_test

import (
	"fmt"
	"strconv"
	"strings"
)

// checkCredentials: every caller presents its own internal token (no two Deployments read it
// from the same Secret key: connect, which talks to the internet, must not hold the gateway's),
// and every server gets its callers' digests (MNV_INTERNAL_CALLERS). In prod the gRPC hops are
// TLS, with the files on mounted Secrets: servers serve a certificate (MNV_GRPC_TLS_CERT,
// MNV_GRPC_TLS_KEY), callers verify it (MNV_GRPC_TLS_CA); and the sandbox operator, which
// trusts loopback, is off (MNV_SANDBOX), and so is gRPC server reflection (MNV_GRPC_REFLECTION).
// The probes of a TLS server are checkProbes'.
func checkCredentials(m *manifests) []string {
	var p []string
	tokenOf := map[string]string{} // namespace/Secret/key of an internal token -> its Deployment
	for _, sv := range servingContainers(m) {
		d, c, ctr, env := sv.d, sv.c, sv.ctr, sv.env
		spec := &d.Spec.Template.Spec
		where := "Deployment " + d.Name
		// A missing token is the secrets check's; here, whose it is.
		if v, ok := env["MNV_INTERNAL_TOKEN_FILE"]; ok && c.caller && v.literal {
			if src, err := secretMount(spec, ctr, v.value); err == nil {
				key := d.Namespace + "/" + src
				if other, shared := tokenOf[key]; shared {
					p = append(p, fmt.Sprintf("%s: presents the internal token of %s (%s); every caller needs its own", where, other, src))
				}
				tokenOf[key] = d.Name
			}
		}
		if v, ok := env["MNV_INTERNAL_CALLERS"]; c.server && (!ok || v.literal && strings.TrimSpace(v.value) == "") {
			p = append(p, where+": MNV_INTERNAL_CALLERS is not set; the service would refuse to start")
		}
		if m.env != "prod" {
			continue
		}
		if v, ok := env["MNV_SANDBOX"]; ok {
			if on, err := strconv.ParseBool(v.value); !v.literal || err != nil || on {
				p = append(p, where+": MNV_SANDBOX must be unset or false in prod: the sandbox operator trusts loopback, so a same-host proxy or sidecar would let any SANDBOX client assert any number")
			}
		}
		if c.server {
			// Reflection describes every method to anyone who can reach the port.
			if v, ok := env["MNV_GRPC_REFLECTION"]; !ok || !v.literal {
				p = append(p, where+": MNV_GRPC_REFLECTION must be set to false in prod (it is on by default)")
			} else if on, err := strconv.ParseBool(v.value); err != nil || on {
				p = append(p, where+": MNV_GRPC_REFLECTION must be false in prod")
			}
		}
		var files []string
		if c.server {
			files = append(files, "MNV_GRPC_TLS_CERT", "MNV_GRPC_TLS_KEY")
		}
		if c.caller {
			files = append(files, "MNV_GRPC_TLS_CA")
		}
		for _, name := range files {
			v, ok := env[name]
			switch {
			case !ok:
				p = append(p, fmt.Sprintf("%s: %s must be set in prod: the gRPC between the services is TLS", where, name))
			case !v.literal:
				p = append(p, fmt.Sprintf("%s: %s must be a literal path", where, name))
			default:
				if _, err := secretMount(spec, ctr, v.value); err != nil {
					p = append(p, fmt.Sprintf("%s: %s: %v", where, name, err))
				}
			}
		}
	}
	return p
}
