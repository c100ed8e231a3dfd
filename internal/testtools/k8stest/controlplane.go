package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/k8sengine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Version is the Kubernetes release the control plane is built from; the cache directory is keyed by it.
const Version = "v1.37.2"

// Environment variables of the end-to-end tests.
const (
	// EnvBinaries names a directory holding etcd, kube-apiserver and kube-controller-manager.
	EnvBinaries = "KEWPLAN_K8S_BINARIES"
	// EnvCache is the cache root build-binaries.sh builds into (default $HOME/.cache/kewplan-k8s).
	EnvCache = "KEWPLAN_K8S_CACHE"
	// EnvRequire makes missing binaries a failure rather than a skip (make k8s-test sets it after building them).
	EnvRequire = "KEWPLAN_K8S_REQUIRE"
	// EnvContext runs the suite against a real cluster: the kubeconfig context to use (KUBECONFIG honoured).
	EnvContext = "KEWPLAN_K8S_E2E_CONTEXT"
)

// Cluster is a running API server the tests talk to.
type Cluster struct {
	Config *rest.Config
	Client kubernetes.Interface
	// Controllers is true when a controller manager runs the Job and garbage-collector controllers (always on a
	// real cluster).
	Controllers bool
	// Real is true for a cluster named by KEWPLAN_K8S_E2E_CONTEXT.
	Real bool
}

// BinaryDir returns the directory of the control plane binaries, or "" with the reason they are missing.
func BinaryDir() (string, string) {
	dir := os.Getenv(EnvBinaries)
	if dir == "" {
		root := os.Getenv(EnvCache)
		if root == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", "no home directory to find the cache in; set " + EnvBinaries
			}
			root = filepath.Join(home, ".cache", "kewplan-k8s")
		}
		dir = filepath.Join(root, Version)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Sprintf("%s is not built in %s; run `make k8s-test` (it builds etcd, kube-apiserver and kube-controller-manager %s once, into a cache outside the repository), set %s to a directory holding them, or set %s to a kubeconfig context", b, dir, Version, EnvBinaries, EnvContext)
		}
	}
	return dir, ""
}

var (
	shared     *Cluster
	sharedErr  error
	sharedOnce sync.Once
	stopShared func()
)

// Start returns the cluster of the package's tests, starting etcd, kube-apiserver and kube-controller-manager on
// loopback the first time (the package's TestMain calls Stop). Without binaries it skips, or fails under
// KEWPLAN_K8S_REQUIRE.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if ctxName := os.Getenv(EnvContext); ctxName != "" {
		sharedOnce.Do(func() { shared, sharedErr = realCluster(ctxName) })
	} else {
		dir, why := BinaryDir()
		if dir == "" {
			if os.Getenv(EnvRequire) != "" {
				t.Fatalf("Kubernetes end-to-end test: %s", why)
			}
			t.Skipf("Kubernetes end-to-end test skipped: %s", why)
		}
		sharedOnce.Do(func() { shared, stopShared, sharedErr = startLocal(dir) })
	}
	if sharedErr != nil {
		t.Fatalf("start the control plane: %v", sharedErr)
	}
	return shared
}

// Stop stops the local control plane if Start started one.
func Stop() {
	if stopShared != nil {
		stopShared()
	}
}

func realCluster(ctxName string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: ctxName}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", ctxName, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Config: cfg, Client: cs, Controllers: true, Real: true}, nil
}

func startLocal(dir string) (*Cluster, func(), error) {
	env := &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	api := env.ControlPlane.GetAPIServer()
	// v1.37 on loopback: no endpoint reconciler (it would publish 127.0.0.1 as the kubernetes Service's endpoint).
	api.Configure().Set("endpoint-reconciler-type", "none")
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	cm, err := startControllerManager(dir, env.KubeConfig)
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	stop := func() {
		cm()
		_ = env.Stop()
	}
	return &Cluster{Config: cfg, Client: cs, Controllers: true}, stop, nil
}

// startControllerManager runs the controllers the tests need: the Job controller creates the pods (and meets
// Pod Security admission), the garbage collector carries out foreground deletion.
func startControllerManager(dir string, kubeconfig []byte) (func(), error) {
	tmp, err := os.MkdirTemp("", "kewplan-kcm-")
	if err != nil {
		return nil, err
	}
	kc := filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(dir, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--controllers=job-controller,garbage-collector-controller,ttl-after-finished-controller",
		"--concurrent-job-syncs=2")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if os.Getenv("KEWPLAN_K8S_LOGS") != "" {
			fmt.Fprintf(os.Stderr, "kube-controller-manager:\n%s\n", logs.String())
		}
		_ = os.RemoveAll(tmp)
	}, nil
}

// Namespace creates a namespace with a unique name enforcing Pod Security "restricted", and deletes it at the
// end of the test.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := "kewplan-e2e-" + rand.String(8)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"app.kubernetes.io/managed-by":               "kewplan-e2e",
	}}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// The ServiceAccount controller does not run here; the Job controller's pods name the default account.
	if !c.Real {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
		if _, err := c.Client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create service account: %v", err)
		}
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Kewplan is kewplan's own client of namespace ns (k8sengine.New: client-go's dynamic client, as apply uses it).
func (c *Cluster) Kewplan(t testing.TB, ns string) *k8sengine.Cluster {
	t.Helper()
	cl, err := k8sengine.New(c.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// StandInDeploymentController marks every Deployment of namespace ns available as it appears, until the test ends:
// the local control plane runs neither the Deployment controller nor a kubelet, and apply waits for kewplan's
// egress proxy Deployment to have a ready pod. A real cluster's own controllers do this.
func (c *Cluster) StandInDeploymentController(t testing.TB, ns string) {
	t.Helper()
	if c.Real {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w, err := c.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch Deployments: %v", err)
	}
	go func() {
		defer close(done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type != watch.Added || d.Status.AvailableReplicas > 0 {
				continue
			}
			d = d.DeepCopy()
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
			_, _ = c.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	}()
}
