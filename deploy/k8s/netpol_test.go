package k8s_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// endpoint is one end of a connection: a pod (of an mnv Deployment or elsewhere) or an address
// outside the cluster.
type endpoint struct {
	name      string
	namespace string            // "" outside the cluster
	nsLabels  map[string]string // the namespace's labels
	podLabels map[string]string // nil outside the cluster
	ip        netip.Addr
	// deployment is set for the pods of the render, whose policies apply to them.
	deployment *appsv1.Deployment
	// absent marks the pods of a component the render does not hold: its policies are not
	// known, so a connection to or from it can be held to be allowed, not to be refused.
	absent bool
}

// connection is one expectation: whether from may open to:port/protocol.
type connection struct {
	from, to string
	port     int32
	protocol corev1.Protocol
	want     bool
}

// The expected connections. Each mnv pair must be allowed by the sender's egress rules and the
// receiver's ingress rules; outside peers are judged by the mnv side's rules alone.
var connections = []connection{
	// Only the gateway takes traffic from outside the namespace, on its HTTP port.
	{"internet", "gateway", 8080, corev1.ProtocolTCP, true},
	{"ingress-controller", "gateway", 8080, corev1.ProtocolTCP, true},
	{"internet", "accounts", 9091, corev1.ProtocolTCP, false},
	{"internet", "verification", 9092, corev1.ProtocolTCP, false},
	{"internet", "connect", 9093, corev1.ProtocolTCP, false},
	{"ingress-controller", "accounts", 9091, corev1.ProtocolTCP, false},
	{"other-namespace", "connect", 9093, corev1.ProtocolTCP, false},
	{"unlabelled-pod", "accounts", 9091, corev1.ProtocolTCP, false},
	// accounts: from the gateway, verification and connect.
	{"gateway", "accounts", 9091, corev1.ProtocolTCP, true},
	{"verification", "accounts", 9091, corev1.ProtocolTCP, true},
	{"connect", "accounts", 9091, corev1.ProtocolTCP, true},
	// verification: from the gateway only, gRPC and the CAMARA facade.
	{"gateway", "verification", 9092, corev1.ProtocolTCP, true},
	{"connect", "verification", 9092, corev1.ProtocolTCP, false},
	{"accounts", "verification", 9092, corev1.ProtocolTCP, false},
	{"gateway", "verification", facadePort, corev1.ProtocolTCP, true},
	{"connect", "verification", facadePort, corev1.ProtocolTCP, false},
	{"accounts", "verification", facadePort, corev1.ProtocolTCP, false},
	{"internet", "verification", facadePort, corev1.ProtocolTCP, false},
	{"ingress-controller", "verification", facadePort, corev1.ProtocolTCP, false},
	{"prometheus", "verification", facadePort, corev1.ProtocolTCP, false},
	// connect: from the gateway, verification and accounts (its events).
	{"gateway", "connect", 9093, corev1.ProtocolTCP, true},
	{"verification", "connect", 9093, corev1.ProtocolTCP, true},
	{"accounts", "connect", 9093, corev1.ProtocolTCP, true},
	// Nobody inside calls the gateway.
	{"accounts", "gateway", 8080, corev1.ProtocolTCP, false},
	// Metrics: from the monitoring namespace only, and only the metrics port.
	{"prometheus", "gateway", metricsPort, corev1.ProtocolTCP, true},
	{"prometheus", "accounts", metricsPort, corev1.ProtocolTCP, true},
	{"prometheus", "verification", metricsPort, corev1.ProtocolTCP, true},
	{"prometheus", "connect", metricsPort, corev1.ProtocolTCP, true},
	{"internet", "gateway", metricsPort, corev1.ProtocolTCP, false},
	{"other-namespace", "accounts", metricsPort, corev1.ProtocolTCP, false},
	{"prometheus", "accounts", 9091, corev1.ProtocolTCP, false},
	// PostgreSQL for the database services, not for the gateway.
	{"accounts", "postgres", 5432, corev1.ProtocolTCP, true},
	{"verification", "postgres", 5432, corev1.ProtocolTCP, true},
	{"connect", "postgres", 5432, corev1.ProtocolTCP, true},
	{"gateway", "postgres", 5432, corev1.ProtocolTCP, false},
	// DNS for everyone.
	{"gateway", "kube-dns", 53, corev1.ProtocolUDP, true},
	{"accounts", "kube-dns", 53, corev1.ProtocolUDP, true},
	{"verification", "kube-dns", 53, corev1.ProtocolTCP, true},
	{"connect", "kube-dns", 53, corev1.ProtocolUDP, true},
	// The internet: connect's CRM webhooks only, and never private or metadata addresses.
	{"connect", "internet", 443, corev1.ProtocolTCP, true},
	{"connect", "internet", 8443, corev1.ProtocolTCP, true},
	{"connect", "internet-v6", 443, corev1.ProtocolTCP, true},
	{"connect", "private-host", 443, corev1.ProtocolTCP, false},
	{"connect", "metadata-service", 80, corev1.ProtocolTCP, false},
	{"connect", "other-namespace", 443, corev1.ProtocolTCP, false},
	{"gateway", "internet", 443, corev1.ProtocolTCP, false},
	{"accounts", "internet", 443, corev1.ProtocolTCP, false},
	{"verification", "internet", 443, corev1.ProtocolTCP, false},
}

// prodConnections hold in the prod overlay, whose components share the rate limits through
// Redis (MNV_REDIS_URL_FILE); base and dev keep them per replica and reach no Redis.
var prodConnections = []connection{
	{"gateway", "redis", 6379, corev1.ProtocolTCP, true},
	{"accounts", "redis", 6379, corev1.ProtocolTCP, true},
	{"verification", "redis", 6379, corev1.ProtocolTCP, true},
	{"connect", "redis", 6379, corev1.ProtocolTCP, true},
	{"gateway", "redis", 5432, corev1.ProtocolTCP, false},
}

func nsLabels(ns string) map[string]string {
	return map[string]string{"kubernetes.io/metadata.name": ns}
}

// endpoints are the mnv pods of the render, the pods of the components it does not hold (as
// they would run beside it, with their labels but without their policies, so that a render of
// one component is judged on its own side of every connection it must allow), and a fixed cast
// of outsiders.
func endpoints(m *manifests) map[string]*endpoint {
	ns := overlayNamespace[m.env]
	if len(m.deployments) > 0 {
		ns = m.deployments[0].Namespace
	}
	out := map[string]*endpoint{
		"internet":           {name: "internet", ip: netip.MustParseAddr("203.0.113.7")},
		"internet-v6":        {name: "internet-v6", ip: netip.MustParseAddr("2001:db8::7")},
		"private-host":       {name: "private-host", ip: netip.MustParseAddr("10.1.2.3")},
		"metadata-service":   {name: "metadata-service", ip: netip.MustParseAddr("169.254.169.254")},
		"postgres":           {name: "postgres", ip: netip.MustParseAddr("10.20.0.5")},
		"redis":              {name: "redis", ip: netip.MustParseAddr("10.20.0.6")},
		"ingress-controller": {name: "ingress-controller", namespace: "ingress-nginx", nsLabels: nsLabels("ingress-nginx"), podLabels: map[string]string{"app.kubernetes.io/name": "ingress-nginx"}, ip: netip.MustParseAddr("10.244.9.1")},
		"prometheus":         {name: "prometheus", namespace: "monitoring", nsLabels: nsLabels("monitoring"), podLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}, ip: netip.MustParseAddr("10.244.9.2")},
		"other-namespace":    {name: "other-namespace", namespace: "other", nsLabels: nsLabels("other"), podLabels: map[string]string{"app.kubernetes.io/name": "gateway", "app.kubernetes.io/part-of": "mnv"}, ip: netip.MustParseAddr("10.244.9.3")},
		"kube-dns":           {name: "kube-dns", namespace: "kube-system", nsLabels: nsLabels("kube-system"), podLabels: map[string]string{"k8s-app": "kube-dns"}, ip: netip.MustParseAddr("10.244.9.4")},
		"unlabelled-pod":     {name: "unlabelled-pod", namespace: ns, nsLabels: nsLabels(ns), podLabels: map[string]string{"run": "debug"}, ip: netip.MustParseAddr("10.244.9.5")},
	}
	for i, d := range m.deployments {
		c, ok := deploymentComponent(d)
		if !ok {
			continue
		}
		out[c.name] = &endpoint{
			name: c.name, namespace: d.Namespace, nsLabels: nsLabels(d.Namespace), podLabels: d.Spec.Template.Labels,
			ip: netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)}), deployment: d,
		}
	}
	for i, c := range components {
		if out[c.name] == nil {
			out[c.name] = &endpoint{
				name: c.name, namespace: ns, nsLabels: nsLabels(ns),
				podLabels: map[string]string{"app.kubernetes.io/name": c.name, "app.kubernetes.io/part-of": "mnv"},
				ip:        netip.AddrFrom4([4]byte{10, 244, 2, byte(10 + i)}), absent: true,
			}
		}
	}
	return out
}

// selectorMatch applies a label selector; nil matches nothing here (callers handle absence).
func selectorMatch(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(set))
}

// peerMatches reports whether a policy peer of a policy in namespace ns covers e.
func peerMatches(peer networkingv1.NetworkPolicyPeer, ns string, e *endpoint) bool {
	if peer.IPBlock != nil {
		cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
		if err != nil || !cidr.Contains(e.ip) {
			return false
		}
		for _, ex := range peer.IPBlock.Except {
			if p, err := netip.ParsePrefix(ex); err == nil && p.Contains(e.ip) {
				return false
			}
		}
		return true
	}
	if e.podLabels == nil {
		return false // selectors choose pods, and this is no pod
	}
	if peer.NamespaceSelector != nil {
		if !selectorMatch(peer.NamespaceSelector, e.nsLabels) {
			return false
		}
	} else if e.namespace != ns {
		return false
	}
	return peer.PodSelector == nil || selectorMatch(peer.PodSelector, e.podLabels)
}

// portMatches reports whether a rule's ports cover port/protocol on the pod dst (named ports
// resolve against dst's containers).
func portMatches(ports []networkingv1.NetworkPolicyPort, port int32, protocol corev1.Protocol, dst *endpoint) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		n := p.Port.IntVal
		if p.Port.StrVal != "" {
			n = 0
			if dst != nil && dst.deployment != nil {
				for i := range dst.deployment.Spec.Template.Spec.Containers {
					if cn := portNumber(&dst.deployment.Spec.Template.Spec.Containers[i], *p.Port); cn != 0 {
						n = cn
					}
				}
			}
		}
		if n == port || (p.EndPort != nil && n <= port && port <= *p.EndPort) {
			return true
		}
	}
	return false
}

// policiesFor returns the policies selecting the pod e with the given type.
func policiesFor(m *manifests, e *endpoint, t networkingv1.PolicyType) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, np := range m.policies {
		if np.Namespace != e.namespace || !selectorMatch(&np.Spec.PodSelector, e.podLabels) {
			continue
		}
		types := np.Spec.PolicyTypes
		if len(types) == 0 {
			types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			if len(np.Spec.Egress) > 0 {
				types = append(types, networkingv1.PolicyTypeEgress)
			}
		}
		for _, pt := range types {
			if pt == t {
				out = append(out, np)
			}
		}
	}
	return out
}

// directionAllowed judges one side of a connection: for PolicyTypeIngress the receiver's
// ingress rules, whose peers are senders; for PolicyTypeEgress the sender's egress rules, whose
// peers are receivers. A pod no policy of that type selects allows everything.
func directionAllowed(m *manifests, dir networkingv1.PolicyType, from, to *endpoint, port int32, protocol corev1.Protocol) bool {
	subject, other := to, from
	if dir == networkingv1.PolicyTypeEgress {
		subject, other = from, to
	}
	pols := policiesFor(m, subject, dir)
	if len(pols) == 0 {
		return true
	}
	type rule struct {
		ports []networkingv1.NetworkPolicyPort
		peers []networkingv1.NetworkPolicyPeer
	}
	for _, np := range pols {
		var rules []rule
		if dir == networkingv1.PolicyTypeEgress {
			for _, r := range np.Spec.Egress {
				rules = append(rules, rule{r.Ports, r.To})
			}
		} else {
			for _, r := range np.Spec.Ingress {
				rules = append(rules, rule{r.Ports, r.From})
			}
		}
		for _, r := range rules {
			if !portMatches(r.ports, port, protocol, to) {
				continue
			}
			if len(r.peers) == 0 {
				return true
			}
			for _, peer := range r.peers {
				if peerMatches(peer, np.Namespace, other) {
					return true
				}
			}
		}
	}
	return false
}

// allowed judges one connection: the sender's egress (when it is a pod of the render) and the
// receiver's ingress (likewise).
func allowed(m *manifests, from, to *endpoint, port int32, protocol corev1.Protocol) bool {
	if from.deployment != nil && !directionAllowed(m, networkingv1.PolicyTypeEgress, from, to, port, protocol) {
		return false
	}
	if to.deployment != nil && !directionAllowed(m, networkingv1.PolicyTypeIngress, from, to, port, protocol) {
		return false
	}
	return true
}

// checkNetworkPolicies: every mnv pod is isolated both ways (a policy of each type selects it),
// and the policies allow exactly the expected connections of the table above, for the
// components the render holds; a component of the suite the render lacks must still be let in
// and out where the table allows it.
func checkNetworkPolicies(m *manifests) []string {
	var p []string
	eps := endpoints(m)
	for _, e := range eps {
		if e.deployment == nil {
			continue
		}
		for _, t := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
			if len(policiesFor(m, e, t)) == 0 {
				p = append(p, fmt.Sprintf("Deployment %s: no NetworkPolicy of type %s selects its pods", e.deployment.Name, t))
			}
		}
	}
	expected := connections
	if m.env == "prod" {
		expected = append(slices.Clone(connections), prodConnections...)
	}
	for _, c := range expected {
		from, to := eps[c.from], eps[c.to]
		if from == nil || to == nil {
			continue // a component this render does not hold
		}
		if from.deployment == nil && to.deployment == nil {
			continue
		}
		if (from.absent || to.absent) && !c.want {
			continue // the absent side's policy may be what refuses it
		}
		if got := allowed(m, from, to, c.port, c.protocol); got != c.want {
			verb := "allowed"
			if !got {
				verb = "refused"
			}
			p = append(p, fmt.Sprintf("%s -> %s:%d/%s is %s, want the opposite", c.from, c.to, c.port, strings.ToLower(string(c.protocol)), verb))
		}
	}
	return p
}
