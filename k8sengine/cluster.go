package k8sengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/k8srender"
)

// FieldManager is kewplan's name in server-side apply's managed fields.
const FieldManager = "kewplan"

// Cluster is one namespace of one cluster, as kewplan uses it.
type Cluster struct {
	API       API
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
	api, err := NewAPI(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{API: api, Namespace: namespace}, nil
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
	ns, name := o.GetNamespace(), o.GetName()
	if ns == "" {
		ns = c.Namespace
	}
	kind := o.GetObjectKind().GroupVersionKind().Kind
	r, ok := resourceOf(kind)
	if !ok {
		return fmt.Errorf("apply %s %s: kewplan does not apply this kind", kind, name)
	}
	data, err := applyBody(o)
	if err != nil {
		return err
	}
	if err := c.API.Apply(ctx, r, ns, name, data); err != nil {
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

// managedKinds are listed and deleted in this order: the owners of pods first, Jobs and (when kewplan runs the
// proxy) its Deployment, foreground, so their pods go with them and no controller makes a new one for a pod deleted
// under it; then the pods a crash left without an owner, the Secrets, and the run's other shared objects (the
// egress NetworkPolicy, the proxy's Service and ConfigMap).
var managedKinds = []Resource{Jobs, Deployments, Pods, Secrets, NetworkPolicies, Services, ConfigMaps}

// list returns the names and labels of the objects of one kind that opts selects.
func (c *Cluster) list(ctx context.Context, r Resource, opts metav1.ListOptions) ([]metav1.PartialObjectMetadata, error) {
	var l metav1.PartialObjectMetadataList
	if err := c.API.List(ctx, r, c.Namespace, opts, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
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
		items, err := c.list(ctx, k, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete run %s: list %ss: %w", run, k.Kind, err))
			continue
		}
		for _, o := range items {
			if err := c.API.Delete(ctx, k, c.Namespace, o.Name, del); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s/%s of run %s: %w", k.Kind, o.Name, run, err))
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
		r, ok := resourceOf(kind)
		if !ok {
			errs = append(errs, fmt.Errorf("delete %s %s: kewplan does not delete this kind", kind, o.GetName()))
			continue
		}
		if err := c.API.Delete(ctx, r, c.Namespace, o.GetName(), del); err != nil && !apierrors.IsNotFound(err) {
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
		items, err := c.list(ctx, k, opts)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.Kind, err)
		}
		for _, o := range items {
			out = append(out, k.Kind+"/"+o.Name)
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
		items, err := c.list(ctx, k, opts)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.Kind, err)
		}
		for _, o := range items {
			run := o.Labels[k8srender.LabelRun]
			out[run] = append(out[run], k.Kind+"/"+o.Name)
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

// quoteKeys renders names for messages.
func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// ServiceClusterIP is the cluster IP of the Service name in namespace: the address a proxied pod, which has no
// DNS, reaches its egress proxy by. A Service without one (headless, or not a ClusterIP Service) is an error.
func (c *Cluster) ServiceClusterIP(ctx context.Context, namespace, name string) (string, error) {
	var svc corev1.Service
	if err := c.API.Get(ctx, Services, namespace, name, &svc); err != nil {
		return "", fmt.Errorf("read the egress proxy's Service %s/%s (its cluster IP is the proxied pods' HTTPS_PROXY: they have no DNS): %w", namespace, name, err)
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || net.ParseIP(ip) == nil {
		return "", fmt.Errorf("the egress proxy's Service %s/%s has no cluster IP (%q): the proxied pods, which have no DNS, reach the proxy by it; make it a ClusterIP Service", namespace, name, ip)
	}
	return ip, nil
}

// ProxyControl POSTs to path (its own path, e.g. /control/nodes/fix/end) on the port port of kewplan's egress
// proxy Service name, through the API server's service proxy: apply's way to the proxy's control endpoint from
// outside the cluster, with no port of the proxy exposed. The API server keeps no Authorization header of a
// request it authenticated, so the secret travels in header's own field. An answer other than 204 is an error
// that quotes it.
func (c *Cluster) ProxyControl(ctx context.Context, name string, port int, path string, header http.Header) error {
	code, body, err := c.API.ServiceProxy(ctx, c.Namespace, name, strconv.Itoa(port), path, header)
	if err != nil {
		return fmt.Errorf("reach the egress proxy's control endpoint through the API server's service proxy (services/proxy on %s/%s): %w", c.Namespace, name, err)
	}
	if code != http.StatusNoContent {
		return fmt.Errorf("the egress proxy's control endpoint, through the API server's service proxy (services/proxy on %s/%s), answered %d: %s",
			c.Namespace, name, code, strings.TrimSpace(strings.ToValidUTF8(string(body), "?")))
	}
	return nil
}
