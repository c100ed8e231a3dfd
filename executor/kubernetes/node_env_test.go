package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
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

	"github.com/kewplan/kewplan/egress"
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
	gitHost   = "git.kewplan.test"
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
func env(t *testing.T) *nodeEnv {
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

func startEnv(t *testing.T, eng *engine.Engine) (*nodeEnv, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := &nodeEnv{eng: eng}
	start := time.Now()
	var err error
	if e.agentImage, err = scratchImage(ctx, eng, "fakeagent", "../testdata/fakeagent"); err != nil {
		return nil, err
	}
	if e.proxyImage, err = proxyImage(ctx, eng); err != nil {
		return nil, err
	}
	caPEM, certPEM, keyPEM := testkit.TLS(t, gitHost, modelHost)
	base, err := testkit.EnsureTestBase(t.Logf, eng)
	if err != nil {
		return nil, err
	}
	if e.gitImage, err = gitImage(ctx, eng, base, caPEM); err != nil {
		return nil, err
	}
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
	if err := n.ImportImages(ctx, e.agentImage, e.gitImage, e.proxyImage); err != nil {
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

// serve listens on the host end of the node's veth, port 443: git.kewplan.test is git's smart HTTP protocol
// (git http-backend) over the bare repositories in gitRoot, api.anthropic.com the model stand-in.
func (e *nodeEnv) serve(certPEM, keyPEM []byte) error {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	if e.gitRoot, err = os.MkdirTemp("", "kewplan-node-git-"); err != nil {
		return err
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return err
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + e.gitRoot, "GIT_HTTP_EXPORT_ALL=1"}}
	ln, err := net.Listen("tcp", net.JoinHostPort(e.node.HostIP, "443"))
	if err != nil {
		return err
	}
	e.srv = &http.Server{ReadHeaderTimeout: 30 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.Host)
			if host == "" {
				host = r.Host
			}
			switch host {
			case gitHost:
				backend.ServeHTTP(w, r)
			case modelHost:
				e.modelMu.Lock()
				h := e.model
				e.modelMu.Unlock()
				if h == nil {
					http.NotFound(w, r)
					return
				}
				h.ServeHTTP(w, r)
			default:
				http.Error(w, "no such host here", http.StatusMisdirectedRequest)
			}
		})}
	go func() { _ = e.srv.ServeTLS(ln, "", "") }()
	return nil
}

// repo makes a bare repository NAME.git with one commit on main and returns its https URL.
func (e *nodeEnv) repo(t *testing.T) (url, dir string) {
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

// scratchImage builds the Go package pkg static into an image FROM scratch running as 1001:1001 in /work, tagged by
// the binary's hash.
func scratchImage(ctx context.Context, eng *engine.Engine, name, pkg string) (string, error) {
	bin, err := goBuild(pkg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	tag := "kewplan-test/" + name + ":" + hex.EncodeToString(sum[:6])
	if _, err := eng.InspectImage(ctx, tag); err == nil {
		return tag, nil
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %[1]s /%[1]s\nUSER 1001:1001\nWORKDIR /work\nENTRYPOINT [\"/%[1]s\"]\n", name)
	return tag, eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), name: bin}, map[string]bool{name: true})
}

func goBuild(pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kewplan-node-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}

// proxyImage is kewplan's egress proxy image as make proxy-image builds it: the static binary FROM scratch.
func proxyImage(ctx context.Context, eng *engine.Engine) (string, error) {
	bin, err := goBuild("../../cmd/kewplan")
	if err != nil {
		return "", err
	}
	ic, err := egress.NewImageContext(bin, nil)
	if err != nil {
		return "", err
	}
	if _, err := eng.InspectImage(ctx, ic.Tag); err == nil {
		return ic.Tag, nil
	}
	return ic.Tag, eng.BuildImage(ctx, ic.Tag, ic.Files, ic.Executables)
}

// gitImage is the test base (sh, git, coreutils) with the test CA added to its trust store, for the git steps.
func gitImage(ctx context.Context, eng *engine.Engine, base string, caPEM []byte) (string, error) {
	sum := sha256.Sum256(append([]byte(base), caPEM...))
	tag := "kewplan-test/node-git:" + hex.EncodeToString(sum[:6])
	if _, err := eng.InspectImage(ctx, tag); err == nil {
		return tag, nil
	}
	dockerfile := "FROM " + base + "\nCOPY test-ca.pem /tmp/test-ca.pem\nRUN cat /tmp/test-ca.pem >> /etc/ssl/certs/ca-certificates.crt && rm /tmp/test-ca.pem\n"
	return tag, eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), "test-ca.pem": caPEM}, nil)
}

// namespace creates a namespace enforcing Pod Security "restricted" with the git and credentials Secrets, deleted
// when the test ends.
func (e *nodeEnv) namespace(t *testing.T, credentials map[string]string) string {
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
func (e *nodeEnv) dump(t *testing.T, ns string) {
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
