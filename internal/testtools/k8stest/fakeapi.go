package k8stest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/k8sengine"
)

// FakeAPI serves k8sengine.API from client-go's fake clientset: its object tracker keeps objects and server-side
// apply's field managers, and every call goes through the clientset's reactors, so a test's PrependReactor sees
// k8sengine's requests as it would see a typed client's. Like the typed fake, List filters by labels and ignores
// field selectors.
type FakeAPI struct {
	CS *fake.Clientset
	// Services answers ServiceProxy, as the API server's service proxy would reach the Service's pod: the request
	// arrives with the path after .../proxy and the headers given (the fake clientset has no proxy of its own).
	// nil answers 503, as an API server with no ready endpoint does.
	Services http.Handler
}

var _ k8sengine.API = FakeAPI{}

// Fake returns a FakeAPI over a new fake clientset holding objs.
func Fake(objs ...runtime.Object) FakeAPI { return FakeAPI{CS: fake.NewClientset(objs...)} }

func (f FakeAPI) Version(context.Context) (string, error) {
	v, err := f.CS.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

func (f FakeAPI) Apply(_ context.Context, r k8sengine.Resource, ns, name string, body []byte) error {
	force := true
	_, err := f.CS.Invokes(k8stesting.NewPatchActionWithOptions(r.GroupVersionResource, ns, name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: k8sengine.FieldManager, Force: &force}), nil)
	if err == nil && r.Kind == k8sengine.Deployments.Kind {
		err = MarkAvailable(f.CS.Tracker(), ns, name)
	}
	return err
}

// MarkAvailable gives a Deployment of a fake clientset's tracker the status the Deployment controller and a kubelet
// would give it once its one pod is ready: the fake runs no controller.
func MarkAvailable(tr k8stesting.ObjectTracker, ns, name string) error {
	gvr := k8sengine.Deployments.GroupVersionResource
	obj, err := tr.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return fmt.Errorf("deployment %s/%s is a %T", ns, name, obj)
	}
	d = d.DeepCopy()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	return tr.Update(gvr, d, ns)
}

func (f FakeAPI) Get(_ context.Context, r k8sengine.Resource, ns, name string, into runtime.Object) error {
	obj, err := f.CS.Invokes(k8stesting.NewGetAction(r.GroupVersionResource, ns, name), nil)
	if err != nil {
		return err
	}
	return convert(obj, into)
}

func (f FakeAPI) List(_ context.Context, r k8sengine.Resource, ns string, opts metav1.ListOptions, into runtime.Object) error {
	obj, err := f.CS.Invokes(k8stesting.NewListActionWithOptions(r.GroupVersionResource, r.GroupVersion().WithKind(r.Kind), ns, opts), nil)
	if err != nil {
		return err
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return err
	}
	var kept []runtime.Object
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return err
		}
		if sel.Matches(labels.Set(m.GetLabels())) {
			kept = append(kept, it)
		}
	}
	if err := meta.SetList(obj, kept); err != nil {
		return err
	}
	return convert(obj, into)
}

func (f FakeAPI) Delete(_ context.Context, r k8sengine.Resource, ns, name string, opts metav1.DeleteOptions) error {
	_, err := f.CS.Invokes(k8stesting.NewDeleteActionWithOptions(r.GroupVersionResource, ns, name, opts), nil)
	return err
}

func (f FakeAPI) Watch(_ context.Context, r k8sengine.Resource, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	return f.CS.InvokesWatch(k8stesting.NewWatchActionWithOptions(r.GroupVersionResource, ns, opts))
}

func (f FakeAPI) Log(ctx context.Context, ns, pod, container string) (io.ReadCloser, error) {
	return f.CS.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
}

func (f FakeAPI) ServiceProxy(ctx context.Context, ns, name, port, path string, header http.Header) (int, []byte, error) {
	if f.Services == nil {
		return http.StatusServiceUnavailable, []byte(`no endpoints available for service "` + name + `"`), nil
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/"+strings.TrimPrefix(path, "/"), nil)
	req.Header = header.Clone()
	req.Host = name + "." + ns + ".svc:" + port
	rec := httptest.NewRecorder()
	f.Services.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), nil
}

// convert copies a typed object into what the caller asked for (the same type, or its metadata) through JSON,
// as the API server's answer would arrive.
func convert(from, into runtime.Object) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decode %T as %T: %w", from, into, err)
	}
	return nil
}
