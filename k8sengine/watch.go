package k8sengine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kewplan/kewplan/k8srender"
)

// RunWatch keeps what JobOutcome reads for every node of one run, the run's Jobs and pods (by its label) and the
// namespace's Job events, in caches fed by one watch per kind: what a node's wait reads costs the API server
// nothing per node and per second, so a wide fan-out does not poll it. It is client-go's informer machinery
// (list, then watch from that list's resource version, relisting when the watch expires) over kewplan's API.
type RunWatch struct {
	ns                 string
	jobs, pods, events cache.Indexer
	informers          []cache.SharedIndexInformer
	lastErr            error // the last list or watch error
	stop               context.CancelFunc
	done               sync.WaitGroup
	mu                 sync.Mutex
	changed            chan struct{} // closed and replaced on every change
	deleted            map[string]bool
}

// Indexes of the caches: a Job's pods by the Job controller's label, its events by the involved object.
const (
	byJob = "job"
)

// WatchRun starts the caches of run's objects and returns once each holds the API server's initial list, or with
// the error that kept one from it. Stop ends it.
func (c *Cluster) WatchRun(ctx context.Context, run string) (*RunWatch, error) {
	wctx, stop := context.WithCancel(context.Background())
	w := &RunWatch{ns: c.Namespace, stop: stop, changed: make(chan struct{}), deleted: map[string]bool{}}
	runLabel := metav1.ListOptions{LabelSelector: runSelector(run)}
	jobEvents := metav1.ListOptions{FieldSelector: "involvedObject.kind=Job"}
	w.jobs = w.start(wctx, c.API, Jobs, runLabel, &batchv1.Job{}, func() runtime.Object { return &batchv1.JobList{} }, nil)
	w.pods = w.start(wctx, c.API, Pods, runLabel, &corev1.Pod{}, func() runtime.Object { return &corev1.PodList{} },
		func(obj any) ([]string, error) {
			return []string{obj.(*corev1.Pod).Labels["batch.kubernetes.io/job-name"]}, nil
		})
	w.events = w.start(wctx, c.API, Events, jobEvents, &corev1.Event{}, func() runtime.Object { return &corev1.EventList{} },
		func(obj any) ([]string, error) {
			ev := obj.(*corev1.Event)
			if ev.InvolvedObject.Kind != "Job" {
				return nil, nil
			}
			return []string{ev.InvolvedObject.Name}, nil
		})
	if err := w.waitSynced(ctx); err != nil {
		w.Stop()
		return nil, fmt.Errorf("watch the run's Jobs, pods and events in %s: %w", c.Namespace, err)
	}
	return w, nil
}

// waitSynced waits until every cache holds its initial list. A refusal (forbidden, unauthorized) ends the wait at
// once; another error is retried for up to two minutes.
func (w *RunWatch) waitSynced(ctx context.Context) error {
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		synced := true
		for _, inf := range w.informers {
			synced = synced && inf.HasSynced()
		}
		if synced {
			return nil
		}
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if err != nil {
				return fmt.Errorf("the initial lists did not arrive: %w", err)
			}
			return errors.New("the initial lists did not arrive")
		case <-tick.C:
		}
	}
}

// start runs one kind's informer. index, when set, indexes its objects by the Job they belong to.
func (w *RunWatch) start(ctx context.Context, api API, r Resource, sel metav1.ListOptions, obj runtime.Object,
	newList func() runtime.Object, index cache.IndexFunc) cache.Indexer {
	lw := &listWatch{api: api, r: r, ns: w.ns, sel: sel, newList: newList, newObj: func() runtime.Object { return obj.DeepCopyObject() }}
	indexers := cache.Indexers{}
	if index != nil {
		indexers[byJob] = index
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{Indexers: indexers})
	// A list or watch that fails is retried by the reflector; its error is kept for WatchRun's answer rather
	// than logged (kewplan's packages never print).
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = fmt.Errorf("%s: %w", r.Kind, err)
		w.mu.Unlock()
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.notify("") },
		UpdateFunc: func(any, any) { w.notify("") },
		DeleteFunc: func(o any) {
			if gone, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = gone.Obj // deleted while the watch was down: the relist noticed
			}
			if job, ok := o.(*batchv1.Job); ok {
				w.notify(job.Name)
				return
			}
			w.notify("")
		},
	})
	w.informers = append(w.informers, inf)
	w.done.Add(1)
	go func() { defer w.done.Done(); inf.RunWithContext(ctx) }()
	return inf.GetIndexer()
}

func (w *RunWatch) notify(deletedJob string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deletedJob != "" {
		w.deleted[deletedJob] = true
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// Stop ends the watches and waits for them.
func (w *RunWatch) Stop() {
	w.stop()
	w.done.Wait()
}

// Changed is closed at the next change of any cached object: read it before Observe, then wait on it.
func (w *RunWatch) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Observe is Cluster.Observe from the caches. A Job not yet in the cache is pending (its creation is on its way);
// one deleted after it was seen is an error.
func (w *RunWatch) Observe(jobName string) (Outcome, error) {
	obj, ok, _ := w.jobs.GetByKey(w.ns + "/" + jobName)
	if !ok {
		w.mu.Lock()
		gone := w.deleted[jobName]
		w.mu.Unlock()
		if gone {
			return Outcome{}, fmt.Errorf("read Job %s: it was deleted", jobName)
		}
		return Outcome{Phase: PhasePending}, nil
	}
	var pods []corev1.Pod
	if items, err := w.pods.ByIndex(byJob, jobName); err == nil {
		for _, it := range items {
			pods = append(pods, *it.(*corev1.Pod))
		}
	}
	var events []corev1.Event
	if items, err := w.events.ByIndex(byJob, jobName); err == nil {
		for _, it := range items {
			events = append(events, *it.(*corev1.Event))
		}
	}
	return observed(obj.(*batchv1.Job), pods, events), nil
}

// listWatch lists and watches one kind through kewplan's API, typed: the dynamic client's objects are converted
// to the informer's type. It does not offer the streaming list (watch-list) semantics, so the reflector lists.
type listWatch struct {
	api     API
	r       Resource
	ns      string
	sel     metav1.ListOptions
	newList func() runtime.Object
	newObj  func() runtime.Object
}

func (l *listWatch) options(o metav1.ListOptions) metav1.ListOptions {
	o.LabelSelector, o.FieldSelector = l.sel.LabelSelector, l.sel.FieldSelector
	return o
}

func (l *listWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

func (l *listWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}

func (l *listWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list := l.newList()
	if err := l.api.List(ctx, l.r, l.ns, l.options(o), list); err != nil {
		return nil, err
	}
	return list, nil
}

func (l *listWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.api.Watch(ctx, l.r, l.ns, l.options(o))
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(l.sel.LabelSelector)
	if err != nil {
		w.Stop()
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Error {
			return ev, true
		}
		if u, ok := ev.Object.(*unstructured.Unstructured); ok {
			obj := l.newObj()
			if err := fromUnstructured(u.UnstructuredContent(), obj); err != nil {
				return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}, true
			}
			ev.Object = obj
		}
		if ev.Type == watch.Bookmark {
			return ev, true
		}
		// The selector again, on this side: an API that does not filter a watch by labels (a fake) adds nothing.
		if m, err := meta.Accessor(ev.Object); err == nil && !sel.Matches(labels.Set(m.GetLabels())) {
			return ev, false
		}
		return ev, true
	}), nil
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, then watch.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// Running is a container of one of the run's pods that runs: its pod and how often it restarted, which together
// name the one log it writes.
type Running struct {
	Pod      string
	Restarts int32
}

// RunningContainers are the run's pods of step (their kewplan.step label) whose container of that name runs, by
// pod name: kewplan's egress proxy, whose decision log apply follows.
func (w *RunWatch) RunningContainers(step, container string) []Running {
	var out []Running
	for _, it := range w.pods.List() {
		p := it.(*corev1.Pod)
		if p.Labels[k8srender.LabelStep] != step {
			continue
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == container && st.State.Running != nil {
				out = append(out, Running{Pod: p.Name, Restarts: st.RestartCount})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}
