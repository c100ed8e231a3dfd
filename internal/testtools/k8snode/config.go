package k8snode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// writeConfigs writes containerd's, the CNI's, the kubelet's, kube-proxy's and CoreDNS's configuration.
func (n *Node) writeConfigs() error {
	n.PauseImage = binaryImageRef(n.bin, "pause")
	d := n.Dir
	files := map[string]string{
		// A second containerd, all of whose paths are the node's: Docker's own containerd is never touched. The
		// CRI plugin is on; runc cannot set a sandbox's oom_score_adj where root lacks CAP_SYS_RESOURCE, so that
		// is restricted; there is no AppArmor on this kernel.
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(d, "containerd/root"), filepath.Join(d, "containerd/state"), n.ContainerdSocket, n.ContainerdSocket+".ttrpc",
			n.PauseImage, filepath.Join(d, "cni/net.d")),

		// One bridge in the node's namespace; pods' traffic to anything outside their range is masqueraded to the
		// node's address, so the host end of the veth answers pods without a route to them.
		"cni/net.d/10-kewplan.conflist": fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kewplan-pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.PodCIDR, filepath.Join(d, "cni/ipam")),

		// failCgroupV1: this host is cgroup v1. Nothing is garbage-collected (images cannot be pulled back) and
		// nothing is evicted for disk. The kubelet's API takes client certificates of the node's CA only.
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[4]s/kubelet.crt
tlsPrivateKeyFile: %[4]s/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s/ca.crt}
authorization:
  mode: AlwaysAllow
failSwapOn: false
oomScoreAdj: 0
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
clusterDomain: cluster.local
clusterDNS: [%[6]s]
resolvConf: %[5]s
podPidsLimit: 1024
maxPods: 110
serializeImagePulls: false
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
`, n.cgroupName(), n.ContainerdSocket, n.NodeIP, filepath.Join(d, "pki"), filepath.Join(d, "resolv.conf"), n.DNSServiceIP()),

		// The node's resolver for pods with dnsPolicy Default (the cluster DNS's own): none that answers.
		"resolv.conf": "nameserver 127.0.0.1\n",

		// conntrack: leave the host-wide limits alone. masqueradeAll: service traffic is masqueraded, so replies
		// between pods on the one bridge always come back through the node.
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
mode: iptables
clusterCIDR: %[2]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  masqueradeAll: true
`, n.Kubeconfig, n.PodCIDR),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func hostsFile(ip string, names []string) string {
	names = slices.Sorted(slices.Values(names))
	var b strings.Builder
	for _, h := range names {
		fmt.Fprintf(&b, "%s %s\n", ip, h)
	}
	return b.String()
}

// binaryImageRef names the image of the node's binary name (pause, coredns) by the binary's hash, so a rebuilt
// binary gets a new image.
func binaryImageRef(binDir, name string) string {
	data, err := os.ReadFile(filepath.Join(binDir, name))
	if err != nil {
		return "kewplan-test/" + name + ":missing"
	}
	sum := sha256.Sum256(data)
	return "kewplan-test/" + name + ":" + hex.EncodeToString(sum[:6])
}

// importBinaryImage builds the image of the node's binary name (FROM scratch, the static binary as its entrypoint,
// running as user) with Docker unless it has it, and imports it into the node's containerd.
func (n *Node) importBinaryImage(ctx context.Context, name, user string) error {
	ref := binaryImageRef(n.bin, name)
	if exec.CommandContext(ctx, "docker", "image", "inspect", ref).Run() != nil {
		dir, err := os.MkdirTemp("", "kewplan-"+name+"-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin, err := os.ReadFile(n.binPath(name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), bin, 0o755); err != nil {
			return err
		}
		dockerfile := fmt.Sprintf("FROM scratch\nCOPY %[1]s /%[1]s\nUSER %[2]s\nENTRYPOINT [\"/%[1]s\"]\n", name, user)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", ref, dir)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the %s image: %v: %s", name, err, out)
		}
	}
	return n.ImportImages(ctx, ref)
}

// ImportImages copies images from the Docker engine into the node's containerd (`docker save | ctr images import`),
// where the kubelet finds them: nothing can be pulled.
func (n *Node) ImportImages(ctx context.Context, refs ...string) error {
	if len(refs) == 0 {
		return nil
	}
	save := exec.CommandContext(ctx, "docker", append([]string{"save"}, refs...)...)
	imp := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdSocket, "-n", "k8s.io", "images", "import", "-")
	pr, pw := io.Pipe()
	save.Stdout = pw
	imp.Stdin = pr
	var saveErr, impOut bytes.Buffer
	save.Stderr = &saveErr
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := imp.Start(); err != nil {
		return err
	}
	serr := save.Run()
	pw.CloseWithError(serr)
	ierr := imp.Wait()
	if serr != nil {
		return fmt.Errorf("docker save %s: %v: %s", strings.Join(refs, " "), serr, saveErr.String())
	}
	if ierr != nil {
		return fmt.Errorf("ctr images import: %v: %s", ierr, impOut.String())
	}
	return nil
}

// RestConfig is the cluster-admin client configuration of the node's API server.
func (n *Node) RestConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
}

func (n *Node) client() (kubernetes.Interface, error) {
	cfg, err := n.RestConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (n *Node) waitAPI(ctx context.Context) error {
	cs, err := n.client()
	if err != nil {
		return err
	}
	return n.waitFor(ctx, "the API server", func() bool {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
}

// waitReady waits for the node to register and report Ready, and for the default ServiceAccount to exist.
func (n *Node) waitReady(ctx context.Context) error {
	cs, err := n.client()
	if err != nil {
		return err
	}
	return n.waitFor(ctx, "node "+n.Name+" Ready", func() bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}
