// Package k8stest is test support for the Kubernetes engine: it plans configuration files the way the commands do,
// and starts a real control plane (etcd, kube-apiserver and, when asked, kube-controller-manager) on loopback from
// binaries built by internal/testtools/k8stools/build-binaries.sh, or connects to a real cluster named by
// KEWPLAN_K8S_E2E_CONTEXT. It is imported only by tests.
package k8stest
