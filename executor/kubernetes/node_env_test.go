package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/k8snode"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// The tests of this file run kewplan's Kubernetes engine on a real single-node cluster (internal/testtools/k8snode:
// a kubelet on a second containerd, in a network namespace of its own), with pods that clone from and push to a
// git server of the test's and call a model API stand-in. make k8s-node-test builds the binaries and runs them;
// make test runs them when the binaries are cached and skips them, saying why, when they are not.

// EnvNodeRequire makes a missing node binary a failure instead of a skip (make k8s-node-test sets it).
const envNodeRequire = "KEWPLAN_K8S_NODE_REQUIRE"

// nodeSlot is the test suite's node slot (make k8s-node-up uses slot 0).
const nodeSlot = 1

// Names the cluster DNS answers with the host end of the node's veth, where this process serves them.
const (
	gitHost   = k8snode.GitHost
	modelHost = "api.anthropic.com"
)

// nodeEnv is the running node and what the tests share on it.
type nodeEnv struct {
	node       *k8snode.Node
	cfg        *rest.Config
	cs         kubernetes.Interface
	eng        *engine.Engine
	agentImage string // executor/testdata/fakeagent FROM scratch
	gitImage   string // the debootstrap test base with the test CA trusted
	proxyImage string // kewplan's egress proxy image
	gitRoot    string // bare repositories the git server serves
	srv        *http.Server
	model      http.Handler // the model API stand-in; nil answers 404
	modelMu    sync.Mutex
	caPEM      []byte // the test CA: the git server's and the model stand-in's certificates
	// wrap, when set, wraps the transport of kewplan's clients (the benchmark counts requests with it).
	wrap func(http.RoundTripper) http.RoundTripper
}

// setModel makes h the model API stand-in for the rest of the test.
func (e *nodeEnv) setModel(t testing.TB, h http.Handler) {
	e.modelMu.Lock()
	e.model = h
	e.modelMu.Unlock()
	t.Cleanup(func() {
		e.modelMu.Lock()
		e.model = nil
		e.modelMu.Unlock()
	})
}

// restConfig is the configuration kewplan's client of the node uses.
func (e *nodeEnv) restConfig() *rest.Config {
	cfg := rest.CopyConfig(e.cfg)
	if e.wrap != nil {
		cfg.Wrap(e.wrap)
	}
	return cfg
}

var shared struct {
	once sync.Once
	env  *nodeEnv
	err  error
	skip string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil && os.Getenv("KEWPLAN_K8S_NODE_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "KEWPLAN_K8S_NODE_KEEP: node %s left running (kubeconfig %s)\n", shared.env.node.Name, shared.env.node.Kubeconfig)
	} else if shared.env != nil {
		if err := shared.env.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the test node:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env starts the node once for the package (skipping, or failing under KEWPLAN_K8S_NODE_REQUIRE or CI with
// the binaries cached, when it cannot run).
func env(t testing.TB) *nodeEnv {
	t.Helper()
	if missing, dir := k8snode.Missing(""); len(missing) > 0 {
		msg := fmt.Sprintf("the Kubernetes node tests need %s in %s: run `make k8s-node-test` (it builds them once, tens of minutes)", strings.Join(missing, ", "), dir)
		if os.Getenv(envNodeRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		testkit.Need(t, "the Kubernetes node tests need root (network namespaces, cgroups, containerd)")
	}
	eng := testkit.Engine(t)
	shared.once.Do(func() { shared.env, shared.err = startEnv(t, eng) })
	if shared.err != nil {
		var skip testkit.CannotBuildError
		if errors.As(shared.err, &skip) {
			t.Skip(skip.Msg)
		}
		t.Fatalf("the test node: %v", shared.err)
	}
	return shared.env
}

func startEnv(t testing.TB, eng *engine.Engine) (*nodeEnv, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := &nodeEnv{eng: eng}
	start := time.Now()
	var err error
	caPEM, certPEM, keyPEM := testkit.TLS(t, gitHost, modelHost)
	e.caPEM = caPEM
	im, err := k8snode.BuildImages(ctx, eng, "../..", caPEM, t.Logf)
	if err != nil {
		return nil, err
	}
	e.agentImage, e.gitImage, e.proxyImage = im.Agent, im.Git, im.Proxy
	t.Logf("test images ready in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	n, err := k8snode.Start(ctx, k8snode.Options{Slot: nodeSlot, Logf: t.Logf, HostNames: []string{gitHost, modelHost}})
	if err != nil {
		return nil, err
	}
	e.node = n
	if err := e.serve(certPEM, keyPEM); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	if err := n.ImportImages(ctx, im.List()...); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	if e.cfg, err = n.RestConfig(); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	if e.cs, err = kubernetes.NewForConfig(e.cfg); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	t.Logf("node %s ready in %s", n.Name, time.Since(start).Round(time.Millisecond))
	return e, nil
}

func (e *nodeEnv) stop() error {
	var errs []error
	if e.srv != nil {
		errs = append(errs, e.srv.Close())
	}
	if e.node != nil {
		errs = append(errs, e.node.Stop())
	}
	if e.gitRoot != "" {
		errs = append(errs, os.RemoveAll(e.gitRoot))
	}
	return errors.Join(errs...)
}

// serve listens on the host end of the node's veth, port 443: git.kewplan.test is the git server over the bare
// repositories in gitRoot, api.anthropic.com the model stand-in.
func (e *nodeEnv) serve(certPEM, keyPEM []byte) error {
	var err error
	if e.gitRoot, err = os.MkdirTemp("", "kewplan-node-git-"); err != nil {
		return err
	}
	h, err := k8snode.GitServer(e.gitRoot, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.modelMu.Lock()
		model := e.model
		e.modelMu.Unlock()
		if model == nil {
			http.NotFound(w, r)
			return
		}
		model.ServeHTTP(w, r)
	}))
	if err != nil {
		return err
	}
	e.srv, err = k8snode.ServeTLS(net.JoinHostPort(e.node.HostIP, "443"), certPEM, keyPEM, h)
	return err
}

// repo makes a bare repository NAME.git with one commit on main and returns its https URL.
func (e *nodeEnv) repo(t testing.TB) (url, dir string) {
	t.Helper()
	src := testkit.GitRepo(t)
	name := "r" + rand.String(8) + ".git"
	dir = filepath.Join(e.gitRoot, name)
	for _, args := range [][]string{
		{"clone", "-q", "--bare", src, dir},
		{"-C", dir, "config", "http.receivepack", "true"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return "https://" + gitHost + "/" + name, dir
}

// namespace creates a namespace enforcing Pod Security "restricted" with the git and credentials Secrets, deleted
// when the test ends.
func (e *nodeEnv) namespace(t testing.TB, credentials map[string]string) string {
	t.Helper()
	ctx := context.Background()
	name := "kewplan-node-" + rand.String(8)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	t.Cleanup(func() {
		if t.Failed() {
			e.dump(t, name)
		}
	})
	if credentials == nil {
		credentials = map[string]string{"ANTHROPIC_API_KEY": "sk-ant-node-test-key"}
	}
	data := map[string][]byte{}
	for k, v := range credentials {
		data[k] = []byte(v)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-git", Namespace: name}, Data: map[string][]byte{"token": []byte("git-token")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "agent-keys", Namespace: name}, Data: data},
	} {
		if _, err := e.cs.CoreV1().Secrets(name).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// dump logs what a failed test's namespace holds: its pods and their steps, its events, and the node's service
// rules for it.
func (e *nodeEnv) dump(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			var steps []string
			for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				steps = append(steps, fmt.Sprintf("%s ready=%v %+v", st.Name, st.Ready, st.State))
			}
			t.Logf("pod %s %s ip %s: %s", p.Name, p.Status.Phase, p.Status.PodIP, strings.Join(steps, "; "))
		}
	}
	if evs, err := e.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range evs.Items {
			t.Logf("event %s %s/%s: %s %s", ev.LastTimestamp.Format(time.TimeOnly), ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	if eps, err := e.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ep := range eps.Items {
			t.Logf("endpointslice %s: %+v", ep.Name, ep.Endpoints)
		}
	}
	if out, err := e.node.Command(ctx, "iptables-save", "-t", "nat").CombinedOutput(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, ns) {
				t.Logf("nat: %s", line)
			}
		}
	}
}
