package k8sengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/k8srender"
)

// FieldManager is kewplan's name in server-side apply's managed fields.
const FieldManager = "kewplan"

// Cluster is one namespace of one cluster, as kewplan uses it.
type Cluster struct {
	Client    kubernetes.Interface
	Namespace string
	// logs replaces the API server's pods/log in tests (client-go's fake clientset answers every log request with
	// "fake logs"); nil reads the API server's.
	logs LogOpener
}

// LogOpener opens a step's log, followed: the reader ends when the step ends, or when ctx is cancelled.
type LogOpener func(ctx context.Context, pod, step string) (io.ReadCloser, error)

// WithLogs returns a copy of c that reads the steps' logs from open instead of the API server: for tests that
// drive the apply loop against client-go's fake clientset, whose pods never write a log.
func (c *Cluster) WithLogs(open LogOpener) *Cluster {
	cp := *c
	cp.logs = open
	return &cp
}

// RESTConfig reads the kubeconfig (KUBECONFIG honoured) for the engine block's context ("" is the current one).
func RESTConfig(e *config.KubernetesEngine) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: e.Context}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no kubeconfig was found (KUBECONFIG, else ~/.kube/config): point KUBECONFIG at the cluster's kubeconfig file, or run kewplan in a pod of the cluster")
	}
	if err != nil {
		if e.Context != "" {
			return nil, fmt.Errorf("kubeconfig context %q: %w", e.Context, err)
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kewplan"
	return cfg, nil
}

// New connects to the cluster of cfg.
func New(cfg *rest.Config, namespace string) (*Cluster, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{Client: cs, Namespace: namespace}, nil
}

// Apply sends every object with server-side apply, in order (shared objects, then each node's prompt Secret
// before its Job). The API server's warnings (a Job whose pod template violates the namespace's Pod Security
// level is admitted with a 299 warning) are returned, not dropped.
func (c *Cluster) Apply(ctx context.Context, objs []k8srender.Object) error {
	for _, o := range objs {
		if err := c.applyOne(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) applyOne(ctx context.Context, o k8srender.Object) error {
	data, err := applyBody(o)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}
	ns, name := o.GetNamespace(), o.GetName()
	if ns == "" {
		ns = c.Namespace
	}
	kind := o.GetObjectKind().GroupVersionKind().Kind
	switch o.(type) {
	case *corev1.Secret:
		_, err = c.Client.CoreV1().Secrets(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *batchv1.Job:
		_, err = c.Client.BatchV1().Jobs(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *networkingv1.NetworkPolicy:
		_, err = c.Client.NetworkingV1().NetworkPolicies(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *corev1.Pod:
		_, err = c.Client.CoreV1().Pods(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *corev1.ConfigMap:
		_, err = c.Client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *corev1.Service:
		_, err = c.Client.CoreV1().Services(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *appsv1.Deployment:
		_, err = c.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	default:
		return fmt.Errorf("apply %s %s: kewplan does not apply this kind", kind, name)
	}
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}

// applyBody is the object as JSON without the fields the server owns.
func applyBody(o k8srender.Object) ([]byte, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return json.Marshal(m)
}

// runSelector selects every object of one run.
func runSelector(run string) string {
	return k8srender.LabelManagedBy + "=" + k8srender.ManagedBy + "," + k8srender.LabelRun + "=" + run
}

// managedKind is one kind of object kewplan makes: how to list it by labels and delete it by name.
type managedKind struct {
	kind   string
	list   func(ctx context.Context, c *Cluster, opts metav1.ListOptions) ([]metav1.Object, error)
	delete func(ctx context.Context, c *Cluster, name string, opts metav1.DeleteOptions) error
}

// managedKinds are listed and deleted in this order: Jobs first (foreground: their pods go with them), then the
// pods a crash left without an owner, the Secrets, and the run's shared objects (the egress NetworkPolicy and, when
// kewplan runs the proxy, its Deployment, Service and ConfigMap).
var managedKinds = []managedKind{
	{"Job", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.BatchV1().Jobs(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.BatchV1().Jobs(c.Namespace).Delete(ctx, n, o)
	}},
	{"Pod", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.CoreV1().Pods(c.Namespace).Delete(ctx, n, o)
	}},
	{"Secret", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.CoreV1().Secrets(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.CoreV1().Secrets(c.Namespace).Delete(ctx, n, o)
	}},
	{"NetworkPolicy", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.NetworkingV1().NetworkPolicies(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.NetworkingV1().NetworkPolicies(c.Namespace).Delete(ctx, n, o)
	}},
	{"Deployment", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.AppsV1().Deployments(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.AppsV1().Deployments(c.Namespace).Delete(ctx, n, o)
	}},
	{"Service", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.CoreV1().Services(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.CoreV1().Services(c.Namespace).Delete(ctx, n, o)
	}},
	{"ConfigMap", func(ctx context.Context, c *Cluster, o metav1.ListOptions) ([]metav1.Object, error) {
		l, err := c.Client.CoreV1().ConfigMaps(c.Namespace).List(ctx, o)
		if err != nil {
			return nil, err
		}
		return metaList(l.Items), nil
	}, func(ctx context.Context, c *Cluster, n string, o metav1.DeleteOptions) error {
		return c.Client.CoreV1().ConfigMaps(c.Namespace).Delete(ctx, n, o)
	}},
}

// DeleteRun deletes every object of the run with foreground propagation: the garbage collector deletes a Job's
// pods before the Job itself disappears. Pods are deleted too, in case the Job controller's owner reference never
// made it (a crash between creation and adoption). Cancellation calls it; so does the orphan sweep. Objects are
// listed by the run's labels and deleted one by one, so a partial failure names what is left.
func (c *Cluster) DeleteRun(ctx context.Context, run string) error {
	fg := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &fg}
	opts := metav1.ListOptions{LabelSelector: runSelector(run)}
	var errs []error
	for _, k := range managedKinds {
		items, err := k.list(ctx, c, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete run %s: list %ss: %w", run, k.kind, err))
			continue
		}
		for _, o := range items {
			if err := k.delete(ctx, c, o.GetName(), del); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s/%s of run %s: %w", k.kind, o.GetName(), run, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Delete deletes the given objects (one node's prompt Secret and Job) with foreground propagation, so a Job's
// pod goes before the Job: the apply loop calls it when a node's attempt ends, and at once when a budget, the
// output limit or the local deadline stops the agent. An object already gone is no error.
func (c *Cluster) Delete(ctx context.Context, objs []k8srender.Object) error {
	fg := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &fg}
	var errs []error
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		i := slices.IndexFunc(managedKinds, func(k managedKind) bool { return k.kind == kind })
		if i < 0 {
			errs = append(errs, fmt.Errorf("delete %s %s: kewplan does not delete this kind", kind, o.GetName()))
			continue
		}
		if err := managedKinds[i].delete(ctx, c, o.GetName(), del); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", kind, c.Namespace, o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// Remaining lists the objects of the run that still exist, as "Kind/name"; empty once DeleteRun has finished.
func (c *Cluster) Remaining(ctx context.Context, run string) ([]string, error) {
	opts := metav1.ListOptions{LabelSelector: runSelector(run)}
	var out []string
	for _, k := range managedKinds {
		items, err := k.list(ctx, c, opts)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.kind, err)
		}
		for _, o := range items {
			out = append(out, k.kind+"/"+o.GetName())
		}
	}
	return out, nil
}

// Orphans returns the runs that have objects in the namespace, each with its objects: after a crash, what the
// sweep would delete. The caller decides which runs are still live (the ledger knows).
func (c *Cluster) Orphans(ctx context.Context) (map[string][]string, error) {
	opts := metav1.ListOptions{LabelSelector: k8srender.LabelManagedBy + "=" + k8srender.ManagedBy}
	out := map[string][]string{}
	for _, k := range managedKinds {
		items, err := k.list(ctx, c, opts)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.kind, err)
		}
		for _, o := range items {
			run := o.GetLabels()[k8srender.LabelRun]
			out[run] = append(out[run], k.kind+"/"+o.GetName())
		}
	}
	return out, nil
}

// Sweep deletes the objects of every run that live does not name (live reports whether a run is still going).
func (c *Cluster) Sweep(ctx context.Context, live func(run string) bool) ([]string, error) {
	orphans, err := c.Orphans(ctx)
	if err != nil {
		return nil, err
	}
	var swept []string
	var errs []error
	for run, objs := range orphans {
		if run == "" || live(run) {
			continue
		}
		if err := c.DeleteRun(ctx, run); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			swept = append(swept, run+": "+o)
		}
	}
	return swept, errors.Join(errs...)
}

func metaList[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// quoteKeys renders names for messages.
func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
