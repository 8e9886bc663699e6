package k8s_test

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// manifests is one kustomization, rendered in-process and decoded strictly into typed objects.
type manifests struct {
	dir string
	// env selects the rules that depend on the environment: "base", "dev" or "prod".
	env string

	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	serviceAccounts []*corev1.ServiceAccount
	namespaces      []*corev1.Namespace
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	policies        []*networkingv1.NetworkPolicy
	// peerServices are the Services of the rest of the suite, for a render of one component:
	// the addresses it is configured with must name one of them.
	peerServices []*corev1.Service
	// others are the decoded objects of any other kind.
	others []runtime.Object
	// yaml is each object as kustomize printed it, keyed "Kind namespace/name".
	yaml map[string]string
}

// strictDecoder decodes with the client-go scheme and fails on unknown fields, duplicate
// fields, wrong types and kinds the scheme does not know.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// render runs kustomize on dir, as `kubectl apply -k dir` would, and decodes every object.
func render(dir, env string) (*manifests, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	m := &manifests{dir: dir, env: env, yaml: map[string]string{}}
	for _, r := range resMap.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		obj, _, err := strictDecoder.Decode(y, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode %s %s: %w", r.GetKind(), r.GetName(), err)
		}
		m.yaml[fmt.Sprintf("%s %s/%s", r.GetKind(), r.GetNamespace(), r.GetName())] = string(y)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, o)
		case *corev1.Service:
			m.services = append(m.services, o)
		case *corev1.ConfigMap:
			m.configMaps = append(m.configMaps, o)
		case *corev1.Secret:
			m.secrets = append(m.secrets, o)
		case *corev1.ServiceAccount:
			m.serviceAccounts = append(m.serviceAccounts, o)
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpas = append(m.hpas, o)
		case *networkingv1.NetworkPolicy:
			m.policies = append(m.policies, o)
		default:
			m.others = append(m.others, obj)
		}
	}
	return m, nil
}

// keys returns the sorted keys of the rendered objects.
func (m *manifests) keys() []string {
	out := make([]string, 0, len(m.yaml))
	for k := range m.yaml {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// configMap returns the ConfigMap ns/name of the render, or nil.
func (m *manifests) configMap(ns, name string) *corev1.ConfigMap {
	for _, c := range m.configMaps {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

// deployment returns the Deployment named name, or nil.
func (m *manifests) deployment(name string) *appsv1.Deployment {
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// allContainers lists the init containers then the containers of a pod.
func allContainers(spec *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range spec.InitContainers {
		out = append(out, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		out = append(out, &spec.Containers[i])
	}
	return out
}
