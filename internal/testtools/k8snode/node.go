package k8snode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is the Kubernetes release the node's binaries are built from (the cache directory's name).
const Version = "v1.37.2"

// The binaries a node runs, all in one directory of the cache.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kube-router", "coredns", "pause"}

// Options configure a node.
type Options struct {
	// Slot numbers the node (0 to MaxSlot): its addresses, names and directory. make k8s-node-up uses slot 0, the
	// test suite slot 1; one slot holds one node at a time (a lock), different slots run side by side.
	Slot int
	// Cache is the cache root (default CacheRoot()); binaries are under Cache/Version, nodes under Cache/nodes.
	Cache string
	// HostNames are names the cluster DNS (CoreDNS) answers with HostIP, where the test's servers listen. Every
	// other name is NXDOMAIN; nothing is forwarded.
	HostNames []string
	// Detach leaves the node running when this process exits (make k8s-node-up); Stop still tears it down.
	Detach bool
	// Logf reports progress (default: nothing).
	Logf func(format string, args ...any)
}

// MaxSlot is the highest slot: every slot's ranges fit in 10.213.0.0/16.
const MaxSlot = 6

// Node is a running single-node cluster.
type Node struct {
	Slot int
	// Dir holds the node's certificates, configuration, logs and state (Cache/nodes/slot-N).
	Dir string
	// Name is the Kubernetes node's name and NetNS the network namespace (/run/netns/<NetNS>).
	Name, NetNS string
	// HostIP is the host end of the veth pair (where test servers listen), NodeIP the node end (the API server,
	// the kubelet, CoreDNS).
	HostIP, NodeIP string
	// PodCIDR and ServiceCIDR are the node's pod and service ranges.
	PodCIDR, ServiceCIDR string
	// Kubeconfig is the path of a cluster-admin kubeconfig for the API server.
	Kubeconfig string
	// ContainerdSocket is the node's own containerd (CRI enabled; images go to its "k8s.io" namespace).
	ContainerdSocket string
	// PauseImage is the pod sandbox image, built from the kubernetes module's pause.c.
	PauseImage string

	root, bin string
	pki       *pki // this process's, from Start
	opts      Options
	st        state
	lock      *os.File
}

// CacheRoot is $KEWPLAN_K8S_CACHE, else ~/.cache/kewplan-k8s.
func CacheRoot() string {
	if c := os.Getenv("KEWPLAN_K8S_CACHE"); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "kewplan-k8s")
}

// Missing names the node binaries not built yet in the cache (nil when all are there) and the directory they
// belong in.
func Missing(cache string) ([]string, string) {
	if cache == "" {
		cache = CacheRoot()
	}
	dir := filepath.Join(cache, Version)
	var missing []string
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing, dir
}

// Tools the node needs from the host, with the Debian package that has each.
var hostTools = [][2]string{{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"}, {"nsenter", "util-linux"},
	{"ip", "iproute2"}, {"iptables", "iptables"}, {"ipset", "ipset"}, {"docker", "docker.io"}}

// MissingTools names the host tools the node needs that are not installed, and the Debian packages that have them.
func MissingTools() (tools, packages []string) {
	for _, t := range hostTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			tools = append(tools, t[0])
			if !slices.Contains(packages, t[1]) {
				packages = append(packages, t[1])
			}
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		tools = append(tools, "/usr/lib/cni/bridge")
		packages = append(packages, "containernetworking-plugins")
	}
	return tools, packages
}

// layout is a slot's addresses: the host and node ends of its /30 link, its pod and service ranges.
func layout(slot int) (host, node, pods, services string) {
	host = fmt.Sprintf("10.213.255.%d", 4*slot+1)
	node = fmt.Sprintf("10.213.255.%d", 4*slot+2)
	pods = fmt.Sprintf("10.213.%d.0/20", 32*slot)
	services = fmt.Sprintf("10.213.%d.0/20", 32*slot+16)
	return
}

func newNode(opts Options) (*Node, error) {
	if opts.Slot < 0 || opts.Slot > MaxSlot {
		return nil, fmt.Errorf("slot %d: want 0 to %d", opts.Slot, MaxSlot)
	}
	if opts.Cache == "" {
		opts.Cache = CacheRoot()
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	root := filepath.Join(opts.Cache, "nodes")
	host, node, pods, services := layout(opts.Slot)
	n := &Node{Slot: opts.Slot, Dir: filepath.Join(root, slotDir(opts.Slot)), root: root, bin: filepath.Join(opts.Cache, Version), opts: opts,
		Name: "kewplan-node-" + strconv.Itoa(opts.Slot), NetNS: "kewplan-node-" + strconv.Itoa(opts.Slot),
		HostIP: host, NodeIP: node, PodCIDR: pods, ServiceCIDR: services}
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd.sock")
	return n, nil
}

// Lock takes the slot's lock, waiting for another holder (a test run of another package) to let go.
func (n *Node) takeLock() error {
	if err := os.MkdirAll(n.root, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(n.root, slotDir(n.Slot)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return err
	}
	n.lock = f
	return nil
}

func (n *Node) unlock() {
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
		n.lock = nil
	}
}

// Running returns the node of slot when one started with Detach is up (every process it started alive), else nil.
func Running(opts Options) (*Node, error) {
	n, err := newNode(opts)
	if err != nil {
		return nil, err
	}
	st, err := readState(n.statePath())
	if err != nil {
		return nil, nil
	}
	if !st.Detached || len(st.Procs) == 0 {
		return nil, nil
	}
	for _, p := range st.Procs {
		if !p.alive() {
			return nil, nil
		}
	}
	n.st = *st
	n.PauseImage = binaryImageRef(n.bin, "pause")
	return n, nil
}

// Start starts the node of opts.Slot, first clearing what a killed node of the same slot left behind. ctx bounds
// the start-up; on failure everything made so far is undone and the error quotes the failing component's log.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if missing, dir := Missing(opts.Cache); len(missing) > 0 {
		return nil, fmt.Errorf("%s not built in %s; run `make k8s-node-test` or internal/testtools/k8stools/build-binaries.sh all", strings.Join(missing, ", "), dir)
	}
	if tools, pkgs := MissingTools(); len(tools) > 0 {
		return nil, fmt.Errorf("%s missing on this machine: apt-get install %s", strings.Join(tools, ", "), strings.Join(pkgs, " "))
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the test node needs root (network namespaces, cgroups, containerd)")
	}
	n, err := newNode(opts)
	if err != nil {
		return nil, err
	}
	if !opts.Detach {
		if err := n.takeLock(); err != nil {
			return nil, err
		}
	}
	if err := n.clearStale(); err != nil {
		n.unlock()
		return nil, fmt.Errorf("clear the state a killed node of slot %d left: %w", n.Slot, err)
	}
	n.st = state{Slot: n.Slot, Detached: opts.Detach, StartedAt: time.Now().UTC().Format(time.RFC3339)}
	if err := n.start(ctx); err != nil {
		stopErr := n.Stop()
		return nil, errors.Join(err, stopErr)
	}
	return n, nil
}

// clearStale tears down what the state file of the slot records (a node whose process was killed).
func (n *Node) clearStale() error {
	st, err := readState(n.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(n.Dir)
	}
	if err != nil {
		return err
	}
	n.opts.Logf("clearing the state of a node of slot %d started %s that did not stop", n.Slot, st.StartedAt)
	n.st = *st
	if err := n.teardown(); err != nil {
		return err
	}
	return os.RemoveAll(n.Dir)
}

func (n *Node) start(ctx context.Context) error {
	logf := n.opts.Logf
	for _, d := range []string{"logs", "pki", "etcd", "kubelet", "containerd/root", "containerd/state", "cni/net.d", "cni/ipam"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := n.saveState(); err != nil {
		return err
	}
	if err := n.network(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := n.cgroup(); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if err := n.certificates(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := n.writeConfigs(); err != nil {
		return err
	}
	logf("node %s: network namespace %s, node %s, host %s, pods %s, services %s", n.Name, n.NetNS, n.NodeIP, n.HostIP, n.PodCIDR, n.ServiceCIDR)

	if err := n.run("etcd", n.binPath("etcd"), "--name=node", "--data-dir="+filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=node=http://127.0.0.1:2380", "--listen-metrics-urls=", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	pk := filepath.Join(n.Dir, "pki")
	if err := n.run("kube-apiserver", n.binPath("kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address="+n.NodeIP,
		"--service-cluster-ip-range="+n.ServiceCIDR,
		"--client-ca-file="+pk+"/ca.crt", "--tls-cert-file="+pk+"/apiserver.crt", "--tls-private-key-file="+pk+"/apiserver.key",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pk+"/sa.pub", "--service-account-signing-key-file="+pk+"/sa.key",
		"--kubelet-client-certificate="+pk+"/admin.crt", "--kubelet-client-key="+pk+"/admin.key",
		"--kubelet-preferred-address-types=InternalIP", "--authorization-mode=Node,RBAC", "--allow-privileged=false",
		"--profiling=false", "--cert-dir="+pk); err != nil {
		return err
	}
	if err := n.waitAPI(ctx); err != nil {
		return err
	}
	kc := n.Kubeconfig
	if err := n.run("kube-controller-manager", n.binPath("kube-controller-manager"), "--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=10257", "--service-account-private-key-file="+pk+"/sa.key",
		"--root-ca-file="+pk+"/ca.crt", "--use-service-account-credentials=false",
		// The node's spec.podCIDR, which kube-router reads: the whole pod range.
		"--allocate-node-cidrs=true", "--node-cidr-mask-size=20", "--cluster-cidr="+n.PodCIDR,
		"--service-cluster-ip-range="+n.ServiceCIDR, "--concurrent-job-syncs=10"); err != nil {
		return err
	}
	if err := n.run("kube-scheduler", n.binPath("kube-scheduler"), "--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=10259"); err != nil {
		return err
	}
	if err := n.run("containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml")); err != nil {
		return err
	}
	if err := n.waitSocket(ctx, n.ContainerdSocket); err != nil {
		return err
	}
	// The pod sandbox's pause and the cluster DNS: images of the node's own binaries, as nobody.
	if err := n.importBinaryImage(ctx, "pause", "65535:65535"); err != nil {
		return err
	}
	if err := n.importBinaryImage(ctx, "coredns", "65534:65534"); err != nil {
		return err
	}
	if err := saveSysctls(n.root); err != nil {
		return err
	}
	n.st.Sysctls = true
	if err := n.saveState(); err != nil {
		return err
	}
	if err := n.run("kubelet", n.binPath("kubelet"), "--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+kc, "--root-dir="+filepath.Join(n.Dir, "kubelet"), "--hostname-override="+n.Name,
		"--node-ip="+n.NodeIP, "--cert-dir="+pk); err != nil {
		return err
	}
	if err := n.run("kube-proxy", n.binPath("kube-proxy"), "--config="+filepath.Join(n.Dir, "kube-proxy.yaml"),
		"--hostname-override="+n.Name); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	// Once the node is registered (kube-router finds itself by it), before any pod of a test starts:
	// NetworkPolicy: kube-router's firewall alone (no routing, no service proxy, no CNI of its own), iptables and
	// ipset in the node's namespace.
	if err := n.run("kube-router", n.binPath("kube-router"), "--kubeconfig="+kc, "--hostname-override="+n.Name,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
		"--enable-pod-egress=false", "--health-port=0", "--metrics-port=0"); err != nil {
		return err
	}
	return n.startDNS(ctx)
}

func (n *Node) binPath(name string) string { return filepath.Join(n.bin, name) }

// nsenter is the command line that runs argv in the node's network namespace.
func (n *Node) nsenter(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + n.NetNS, "--"}, argv...)
}

// Command runs argv in the node's network namespace (the host's mount namespace).
func (n *Node) Command(ctx context.Context, argv ...string) *exec.Cmd {
	a := n.nsenter(argv...)
	return exec.CommandContext(ctx, a[0], a[1:]...)
}

// run starts one component in the node's network namespace and its cgroup, its output in logs/<name>.log.
func (n *Node) run(name string, argv ...string) error { return n.start1(name, n.nsenter(argv...)) }

// RunOnHost starts a process of the node's in the host's network namespace (a server on HostIP), in the node's
// cgroup: it is recorded and stopped with the node.
func (n *Node) RunOnHost(name string, argv ...string) error { return n.start1(name, argv) }

func (n *Node) start1(name string, argv []string) error {
	logPath := filepath.Join(n.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The shell joins the node's cgroup before it becomes the component, so the component and every process it
	// starts (containerd's shims, the pods) are in the tree that teardown kills and removes.
	join := `for d in "$@"; do case $d in --) break;; esac; echo $$ > "$d/cgroup.procs" || exit 1; shift; done; shift; exec "$@"`
	args := []string{"sh", "-c", join, "sh"}
	args = append(args, n.cgroupDirs("system")...)
	args = append(args, "--")
	args = append(args, argv...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	e := procEntry{Name: name, PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid)}
	n.st.Procs = append(n.st.Procs, e)
	if err := n.saveState(); err != nil {
		return err
	}
	if n.opts.Detach {
		_ = cmd.Process.Release()
	} else {
		go func() { _ = cmd.Wait() }()
	}
	return nil
}

// Log is the tail of a component's log, for failure messages.
func (n *Node) Log(name string, lines int) string {
	data, _ := os.ReadFile(filepath.Join(n.Dir, "logs", name+".log"))
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// exited names a component that is no longer running, "" when all run.
func (n *Node) exited() string {
	for _, p := range n.st.Procs {
		if !p.alive() {
			return p.Name
		}
	}
	return ""
}

// waitFor polls cond (the state is another process's: there is nothing to wait on but asking) until it holds, a
// component exits or ctx ends.
func (n *Node) waitFor(ctx context.Context, what string, cond func() bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return nil
		}
		if name := n.exited(); name != "" {
			return fmt.Errorf("%s exited while waiting for %s:\n%s", name, what, n.Log(name, 25))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

func (n *Node) waitSocket(ctx context.Context, path string) error {
	return n.waitFor(ctx, path, func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// runCmd runs a short command and returns its error with its output.
func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// network makes the namespace, the veth pair and the routes. The unreachable routes go in first: from then on a
// packet for a pod or service address in the host namespace is refused rather than sent to the default gateway.
func (n *Node) network() error {
	for _, dst := range []string{n.PodCIDR, n.ServiceCIDR} {
		n.st.Routes = append(n.st.Routes, dst)
		if err := n.saveState(); err != nil {
			return err
		}
		if err := runCmd("ip", "route", "add", "unreachable", dst); err != nil {
			return err
		}
	}
	n.st.NetNS = n.NetNS
	n.st.HostLink = fmt.Sprintf("kwn%d-h", n.Slot)
	if err := n.saveState(); err != nil {
		return err
	}
	nodeLink := fmt.Sprintf("kwn%d-n", n.Slot)
	for _, c := range [][]string{
		{"ip", "netns", "add", n.NetNS},
		{"ip", "link", "add", n.st.HostLink, "type", "veth", "peer", "name", nodeLink, "netns", n.NetNS},
		{"ip", "addr", "add", n.HostIP + "/30", "dev", n.st.HostLink},
		{"ip", "link", "set", n.st.HostLink, "up"},
		{"ip", "-n", n.NetNS, "link", "set", "lo", "up"},
		{"ip", "-n", n.NetNS, "addr", "add", n.NodeIP + "/30", "dev", nodeLink},
		{"ip", "-n", n.NetNS, "link", "set", nodeLink, "up"},
	} {
		if err := runCmd(c[0], c[1:]...); err != nil {
			return err
		}
	}
	// Pod-to-service traffic on one bridge is seen by iptables (kube-proxy's rules), as on a real node.
	for _, kv := range []string{"net.bridge.bridge-nf-call-iptables=1", "net.ipv4.ip_forward=1"} {
		a := n.nsenter("sysctl", "-q", "-w", kv)
		if err := runCmd(a[0], a[1:]...); err != nil && !strings.Contains(kv, "bridge") {
			return err
		}
	}
	return nil
}

// The v1 hierarchies that hold the node's cgroup: every one mounted under /sys/fs/cgroup (the kubelet checks them
// all, the named "systemd" one included), not the cgroup v2 "unified" mount of a hybrid host.
var controllers = func() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 && e.Name() != "unified" {
			out = append(out, e.Name())
		}
	}
	return out
}()

func (n *Node) cgroupName() string { return "kewplan-node-" + strconv.Itoa(n.Slot) }

func (n *Node) cgroupDirs(sub string) []string {
	var out []string
	for _, c := range controllers {
		out = append(out, filepath.Join("/sys/fs/cgroup", c, n.cgroupName(), sub))
	}
	return out
}

// cgroup makes the node's cgroup (the kubelet's cgroupRoot) and its "system" child, where the components run.
func (n *Node) cgroup() error {
	n.st.Cgroup = n.cgroupName()
	if err := n.saveState(); err != nil {
		return err
	}
	for _, c := range controllers {
		base := filepath.Join("/sys/fs/cgroup", c)
		if _, err := os.Stat(base); err != nil {
			return fmt.Errorf("cgroup v1 hierarchy %s: %w (the test node needs a cgroup v1 host)", base, err)
		}
		for _, d := range []string{filepath.Join(base, n.cgroupName()), filepath.Join(base, n.cgroupName(), "system")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if c == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (n *Node) certificates() error {
	p, err := newPKI(filepath.Join(n.Dir, "pki"))
	if err != nil {
		return err
	}
	n.pki = p
	_, svcNet, _ := net.ParseCIDR(n.ServiceCIDR)
	first := slices.Clone(svcNet.IP.To4())
	first[3]++
	if err := p.issue("apiserver", "kube-apiserver", nil, true,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		[]net.IP{net.ParseIP(n.NodeIP), net.ParseIP("127.0.0.1"), first}); err != nil {
		return err
	}
	if err := p.issue("kubelet", n.Name, nil, true, []string{n.Name}, []net.IP{net.ParseIP(n.NodeIP)}); err != nil {
		return err
	}
	if err := p.issue("admin", "kewplan-admin", []string{"system:masters"}, false, nil, nil); err != nil {
		return err
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	kc, err := p.kubeconfig("https://"+net.JoinHostPort(n.NodeIP, "6443"), "admin", n.Name)
	if err != nil {
		return err
	}
	return os.WriteFile(n.Kubeconfig, kc, 0o600)
}

// Stop tears the node down: every process of its cgroup, its mounts, cgroups, namespace and routes, and puts the
// host's sysctls back when no other node runs. It reports what it could not undo.
func (n *Node) Stop() error {
	err := n.teardown()
	if err == nil {
		err = os.Remove(n.statePath())
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if n.st.Sysctls || err == nil {
		err = errors.Join(err, restoreSysctls(n.root, n.Slot))
	}
	n.unlock()
	return err
}

// teardown undoes n.st in reverse order of making.
func (n *Node) teardown() error {
	var errs []error
	if n.st.Cgroup != "" {
		errs = append(errs, n.killCgroup())
	}
	for _, p := range n.st.Procs { // a process that had not joined the cgroup yet
		p.kill()
	}
	errs = append(errs, n.unmountAll())
	if n.st.Cgroup != "" {
		errs = append(errs, n.removeCgroups())
	}
	if n.st.NetNS != "" {
		if _, err := os.Stat("/run/netns/" + n.st.NetNS); err == nil {
			errs = append(errs, runCmd("ip", "netns", "delete", n.st.NetNS))
		}
	}
	if n.st.HostLink != "" {
		if _, err := net.InterfaceByName(n.st.HostLink); err == nil {
			errs = append(errs, runCmd("ip", "link", "delete", n.st.HostLink))
		}
	}
	for _, dst := range slices.Backward(n.st.Routes) {
		if err := runCmd("ip", "route", "del", "unreachable", dst); err != nil && !strings.Contains(err.Error(), "No such process") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killCgroup freezes the node's cgroup tree, SIGKILLs every process in it and waits until it is empty.
func (n *Node) killCgroup() error {
	freezer := filepath.Join("/sys/fs/cgroup/freezer", n.st.Cgroup)
	if _, err := os.Stat(freezer); err != nil {
		return nil
	}
	_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0o644)
	pids := func() []int {
		var out []int
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", n.st.Cgroup), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
			return nil
		})
		return out
	}
	for _, pid := range pids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0o644)
	deadline := time.Now().Add(time.Minute)
	for {
		left := pids()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of the node's cgroup did not exit", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond) // backstop poll: the kernel reaps them
	}
}

// unmountAll unmounts every mount under the node's directory and the node's namespace mount, deepest first.
func (n *Node) unmountAll() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := n.Dir + "/"
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, prefix) {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range slices.Compact(points) {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// removeCgroups removes the node's cgroup tree in every hierarchy, children first.
func (n *Node) removeCgroups() error {
	var errs []error
	for _, c := range controllers {
		root := filepath.Join("/sys/fs/cgroup", c, n.st.Cgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ServingCert issues a serving certificate for hosts from the node's CA (whose certificate is CACertPath), in
// PEM; only the process that started the node can.
func (n *Node) ServingCert(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if n.pki == nil {
		return nil, nil, errors.New("the node's CA is held by the process that started it")
	}
	name := "serving-" + strconv.Itoa(len(hosts))
	if err := n.pki.issue(name, hosts[0], nil, true, hosts, nil); err != nil {
		return nil, nil, err
	}
	if certPEM, err = os.ReadFile(n.pki.path(name + ".crt")); err != nil {
		return nil, nil, err
	}
	keyPEM, err = os.ReadFile(n.pki.path(name + ".key"))
	return certPEM, keyPEM, err
}

// Enforcing says whether the node runs a NetworkPolicy enforcer (kube-router's firewall).
func (n *Node) Enforcing() bool {
	for _, p := range n.st.Procs {
		if p.Name == "kube-router" {
			return true
		}
	}
	return false
}

// CACertPath is the node's CA certificate (PEM).
func (n *Node) CACertPath() string { return filepath.Join(n.Dir, "pki", "ca.crt") }

// StartedAt is when the node started (RFC 3339).
func (n *Node) StartedAt() string { return n.st.StartedAt }

// Stale returns the node of a slot whose state file remains without a running node (its processes killed, or
// some exited), so that Stop can clear it; nil when the slot has no state.
func Stale(opts Options) (*Node, error) {
	n, err := newNode(opts)
	if err != nil {
		return nil, err
	}
	st, err := readState(n.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n.st = *st
	return n, nil
}
