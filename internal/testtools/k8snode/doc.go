// Package k8snode runs a single-node Kubernetes cluster on this machine for the tests and for people trying kewplan
// by hand (make k8s-node-up): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a second containerd with
// its CRI plugin, the kubelet, kube-proxy and CoreDNS, every one built from source by
// internal/testtools/k8stools/build-binaries.sh and nothing pulled.
//
// The whole node lives in a network namespace of its own, entered with `nsenter --net` (the mount namespace stays
// the host's, so runc sees the kubelet's Secret and emptyDir mounts). One veth pair joins it to the host: the host
// end is where test servers listen (the git server, the model API stand-in), the node end is where the API server
// answers. The node namespace has no default route, and the host namespace gets `unreachable` routes for the pod
// and service ranges before any pod starts, so no packet for or from a pod reaches any other network.
//
// Every process, mount, cgroup, route, namespace and host sysctl a node changes is written to its state file as it
// is made, so Stop (or the next Start of the same slot, after a killed run) undoes exactly that, in reverse order.
package k8snode
