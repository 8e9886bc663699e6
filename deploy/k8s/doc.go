// Package k8s holds no code: its tests render the kustomize overlays beside it and check them.
package k8s
