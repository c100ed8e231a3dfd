package k8sengine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// API is the part of the Kubernetes API kewplan uses: the server's version, server-side apply, get, list and
// delete of the few kinds it makes and reads, and a container's log, followed. New serves it with client-go's
// dynamic client, which needs no generated client per API group: kewplan links the types of the four groups it
// renders (k8s.io/api) and nothing of the fifty others, so every command starts and plans with a binary half the
// size (README, Dependencies). Tests serve it from client-go's fake clientset (k8stest.FakeAPI).
//
// Errors are the API server's (k8s.io/apimachinery/pkg/api/errors): IsNotFound and IsForbidden work on them.
type API interface {
	// Version is the API server's git version, e.g. "v1.37.2".
	Version(ctx context.Context) (string, error)
	// Apply sends body (an object as JSON) with server-side apply, as kewplan's field manager, forcing conflicts.
	Apply(ctx context.Context, r Resource, ns, name string, body []byte) error
	// Get reads one object into into: a typed object (*batchv1.Job) or *metav1.PartialObjectMetadata.
	Get(ctx context.Context, r Resource, ns, name string, into runtime.Object) error
	// List reads the objects opts selects into into: a typed list (*corev1.PodList) or
	// *metav1.PartialObjectMetadataList.
	List(ctx context.Context, r Resource, ns string, opts metav1.ListOptions, into runtime.Object) error
	// Delete deletes one object.
	Delete(ctx context.Context, r Resource, ns, name string, opts metav1.DeleteOptions) error
	// Log opens a container's log, followed: the reader ends when the container ends.
	Log(ctx context.Context, ns, pod, container string) (io.ReadCloser, error)
	// Watch watches the objects opts selects from opts.ResourceVersion on: the objects of its events are typed or
	// *unstructured.Unstructured.
	Watch(ctx context.Context, r Resource, ns string, opts metav1.ListOptions) (watch.Interface, error)
	// ServiceProxy POSTs to path on port (a port's name or number) of the Service name, through the API server's
	// service proxy (services/proxy, RBAC verb create), with header. It returns the answer's status and the first
	// 4 KiB of its body, whoever answered (the Service's pod, or the API server when it could not reach one);
	// err is a request that got no answer.
	ServiceProxy(ctx context.Context, ns, name, port, path string, header http.Header) (int, []byte, error)
}

// Resource is one kind kewplan uses, by the names the API knows it by. Namespaces and RuntimeClasses are
// cluster-scoped; the rest live in the run's namespace.
type Resource struct {
	schema.GroupVersionResource
	Kind string
}

// The kinds kewplan applies, reads or deletes.
var (
	Jobs            = Resource{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job"}
	Pods            = Resource{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod"}
	Secrets         = Resource{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret"}
	ConfigMaps      = Resource{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap"}
	Services        = Resource{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service"}
	Events          = Resource{schema.GroupVersionResource{Version: "v1", Resource: "events"}, "Event"}
	Namespaces      = Resource{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace"}
	Deployments     = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment"}
	NetworkPolicies = Resource{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, "NetworkPolicy"}
	RuntimeClasses  = Resource{schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}, "RuntimeClass"}
)

// resourceOf is the Resource of a kind kewplan renders, by its Kind.
func resourceOf(kind string) (Resource, bool) {
	for _, r := range []Resource{Jobs, Pods, Secrets, ConfigMaps, Services, Deployments, NetworkPolicies} {
		if r.Kind == kind {
			return r, true
		}
	}
	return Resource{}, false
}

// dynamicAPI is API over client-go's dynamic client and the REST client under it (for /version and pods/log,
// which are not objects).
type dynamicAPI struct {
	rest rest.Interface
	dyn  dynamic.Interface
	hc   *http.Client
}

// NewAPI connects to the cluster of cfg. Unless cfg sets its own, the client's rate limit is kubectl's (50
// requests a second, bursts of 300) rather than client-go's default of 5: a wide fan-out applies, deletes and
// opens logs for many nodes at once (their waits read the run's watch, not the API), and the API server's priority
// and fairness is the real limit.
func NewAPI(cfg *rest.Config) (API, error) {
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 50, 300
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return newDynamicAPI(cfg, hc)
}

func newDynamicAPI(cfg *rest.Config, hc *http.Client) (*dynamicAPI, error) {
	// The same settings dynamic.NewForConfig uses: JSON, and a client that builds each path itself.
	rc, err := rest.UnversionedRESTClientForConfigAndClient(dynamic.ConfigFor(cfg), hc)
	if err != nil {
		return nil, err
	}
	return &dynamicAPI{rest: rc, dyn: dynamic.New(rc), hc: hc}, nil
}

func (a *dynamicAPI) resource(r Resource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return a.dyn.Resource(r.GroupVersionResource)
	}
	return a.dyn.Resource(r.GroupVersionResource).Namespace(ns)
}

func (a *dynamicAPI) Version(ctx context.Context) (string, error) {
	raw, err := a.rest.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("the API server's /version is not JSON: %w", err)
	}
	return v.GitVersion, nil
}

func (a *dynamicAPI) Apply(ctx context.Context, r Resource, ns, name string, body []byte) error {
	force := true
	_, err := a.resource(r, ns).Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}

func (a *dynamicAPI) Get(ctx context.Context, r Resource, ns, name string, into runtime.Object) error {
	u, err := a.resource(r, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return fromUnstructured(u.UnstructuredContent(), into)
}

func (a *dynamicAPI) List(ctx context.Context, r Resource, ns string, opts metav1.ListOptions, into runtime.Object) error {
	l, err := a.resource(r, ns).List(ctx, opts)
	if err != nil {
		return err
	}
	return fromUnstructured(l.UnstructuredContent(), into)
}

func (a *dynamicAPI) Delete(ctx context.Context, r Resource, ns, name string, opts metav1.DeleteOptions) error {
	return a.resource(r, ns).Delete(ctx, name, opts)
}

func (a *dynamicAPI) Watch(ctx context.Context, r Resource, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	return a.resource(r, ns).Watch(ctx, opts)
}

func (a *dynamicAPI) Log(ctx context.Context, ns, pod, container string) (io.ReadCloser, error) {
	return a.rest.Get().AbsPath("/api/v1/namespaces", ns, "pods", pod, "log").
		Param("container", container).Param("follow", "true").Stream(ctx)
}

func (a *dynamicAPI) ServiceProxy(ctx context.Context, ns, name, port, path string, header http.Header) (int, []byte, error) {
	// The REST client builds the URL; its HTTP client (the kubeconfig's credentials and TLS) sends it, so that any
	// answer, the proxy's or the API server's, arrives with its status.
	u := a.rest.Post().AbsPath("/api/v1/namespaces", ns, "services", name+":"+port, "proxy", path).URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, body, nil
}

// fromUnstructured fills a typed object, or a list of them, from the dynamic client's maps.
func fromUnstructured(obj map[string]any, into runtime.Object) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into); err != nil {
		return fmt.Errorf("decode %s: %w", (&unstructured.Unstructured{Object: obj}).GetKind(), err)
	}
	return nil
}
