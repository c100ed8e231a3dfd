// Command k8s-node starts and stops the single-node cluster of internal/testtools/k8snode for people trying kewplan
// by hand. `k8s-node up` (make k8s-node-up) leaves it running and prints the path of its cluster-admin kubeconfig;
// with it come the test images (the fake agent as kewplan-node/agent:latest, the git steps' image as
// kewplan-node/git:latest, kewplan's egress proxy as kewplan-node/egress-proxy:latest), the namespace "agents"
// (Pod Security restricted) with the Secrets kewplan-git and agent-keys, and a git server at
// https://git.kewplan.test/demo.git that the node's pods reach. `k8s-node down` (make k8s-node-down) tears it all
// down. A second `up` while one runs says so and reuses it.
//
// KEWPLAN_K8S_IMAGES names more Docker images (space-separated) to import into the node's containerd.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/k8snode"
)

// The names under which `up` imports the test images, the ones examples/kubernetes-node uses.
var stable = map[string]string{"agent": "kewplan-node/agent:latest", "git": "kewplan-node/git:latest", "proxy": "kewplan-node/egress-proxy:latest"}

func main() {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "k8s-node: "+format+"\n", args...) }
	var err error
	switch {
	case len(os.Args) == 2 && (os.Args[1] == "up" || os.Args[1] == "down"):
		err = run(os.Args[1], k8snode.Options{Slot: 0, Detach: true, Logf: logf, HostNames: []string{k8snode.GitHost}})
	case len(os.Args) == 6 && os.Args[1] == "serve-git":
		err = serveGit(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		fmt.Fprintln(os.Stderr, "usage: k8s-node up|down")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-node:", err)
		os.Exit(1)
	}
}

func run(verb string, opts k8snode.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n, err := k8snode.Running(opts)
	if err != nil {
		return err
	}
	if verb == "down" {
		if n == nil {
			if n, err = k8snode.Stale(opts); err != nil || n == nil {
				opts.Logf("no node runs in slot %d", opts.Slot)
				return err
			}
		}
		if err := n.Stop(); err != nil {
			return err
		}
		opts.Logf("node %s stopped; nothing of it is left", n.Name)
		return nil
	}
	images := strings.Fields(os.Getenv("KEWPLAN_K8S_IMAGES"))
	if n != nil {
		opts.Logf("node %s already runs (started %s); reusing it", n.Name, n.StartedAt())
	} else {
		opts.Logf("starting the node (make k8s-node-down stops it)")
		if n, err = k8snode.Start(ctx, opts); err != nil {
			return err
		}
		if err := extras(ctx, n, opts.Logf); err != nil {
			return errors.Join(err, n.Stop())
		}
		images = append(images, stable["agent"], stable["git"], stable["proxy"])
	}
	if len(images) > 0 {
		opts.Logf("importing %s", strings.Join(images, " "))
		if err := n.ImportImages(ctx, images...); err != nil {
			return err
		}
	}
	fmt.Println(n.Kubeconfig)
	return nil
}

// extras builds and tags the test images, makes the namespace and its Secrets, and starts the git server.
func extras(ctx context.Context, n *k8snode.Node, logf func(string, ...any)) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run k8s-node up from kewplan's repository (make k8s-node-up): %w", err)
	}
	eng, err := engine.Connect(ctx, os.Environ())
	if err != nil {
		return err
	}
	defer eng.Close()
	ca, err := os.ReadFile(n.CACertPath())
	if err != nil {
		return err
	}
	logf("building the test images")
	im, err := k8snode.BuildImages(ctx, eng, root, ca, logf)
	if err != nil {
		return err
	}
	for key, from := range map[string]string{"agent": im.Agent, "git": im.Git, "proxy": im.Proxy} {
		if out, err := exec.CommandContext(ctx, "docker", "tag", from, stable[key]).CombinedOutput(); err != nil {
			return fmt.Errorf("docker tag %s %s: %v: %s", from, stable[key], err, out)
		}
	}
	if err := namespace(ctx, n); err != nil {
		return err
	}
	gitRoot := filepath.Join(n.Dir, "git")
	if err := demoRepo(filepath.Join(gitRoot, "demo.git")); err != nil {
		return err
	}
	cert, key, err := n.ServingCert(k8snode.GitHost)
	if err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(n.Dir, "git-server.crt"), filepath.Join(n.Dir, "git-server.key")
	if err := os.WriteFile(certPath, cert, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf("git server: https://%s/demo.git (%s:443)", k8snode.GitHost, n.HostIP)
	return n.RunOnHost("git-server", self, "serve-git", gitRoot, net.JoinHostPort(n.HostIP, "443"), certPath, keyPath)
}

// namespace makes "agents", enforcing Pod Security restricted, with the git Secret (a token the local server does
// not check) and the credentials Secret (ANTHROPIC_API_KEY from this environment, else a placeholder).
func namespace(ctx context.Context, n *k8snode.Node) error {
	cfg, err := n.RestConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		key = "sk-ant-local-placeholder"
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-git", Namespace: "agents"}, Data: map[string][]byte{"token": []byte("local")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "agent-keys", Namespace: "agents"}, Data: map[string][]byte{"ANTHROPIC_API_KEY": []byte(key)}},
	} {
		if _, err := cs.CoreV1().Secrets("agents").Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// demoRepo makes a bare repository with one commit (README.md on main) that accepts pushes.
func demoRepo(dir string) error {
	work, err := os.MkdirTemp("", "kewplan-node-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# demo\n\nA repository for kewplan's local Kubernetes node.\n"), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=kewplan", "GIT_AUTHOR_EMAIL=kewplan@localhost", "GIT_COMMITTER_NAME=kewplan", "GIT_COMMITTER_EMAIL=kewplan@localhost")
	for _, args := range [][]string{
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "add", "README.md"},
		{"-C", work, "commit", "-q", "-m", "demo"},
		{"clone", "-q", "--bare", work, dir},
		{"-C", dir, "config", "http.receivepack", "true"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// serveGit is the git server process `up` leaves running with the node.
func serveGit(root, addr, certPath, keyPath string) error {
	cert, err := os.ReadFile(certPath)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	h, err := k8snode.GitServer(root, nil)
	if err != nil {
		return err
	}
	if _, err := k8snode.ServeTLS(addr, cert, key, h); err != nil {
		return err
	}
	select {}
}
