package k8sengine_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
)

// requestCounter counts the requests kewplan's client sends, watches apart.
type requestCounter struct {
	next           http.RoundTripper
	reads, watches atomic.Int64
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		c.watches.Add(1)
	case r.Method == http.MethodGet:
		c.reads.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestE2EWatchRun: the run's watch sees, on a real API server, the pods the Job controller creates for a fan-out
// of Jobs, and while the nodes wait (no kubelet runs their pods) the client sends no read at all: what waiting costs
// the API server does not grow with nodes × seconds.
func TestE2EWatchRun(t *testing.T) {
	cl := k8stest.Start(t)
	if !cl.Controllers {
		t.Skip("no Job controller creates pods here")
	}
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	counter := &requestCounter{}
	cfg := rest.CopyConfig(cl.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	c, err := k8sengine.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	const run, copies = "watch", 10
	w, err := c.WatchRun(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var jobs []string
	for i := 0; i < copies; i++ {
		m := renderExample(t, ns, run)
		for _, n := range m.Nodes {
			n.Job.Name = fmt.Sprintf("%s-%d", n.Job.Name, i)
			n.Prompt.Name = fmt.Sprintf("%s-%d", n.Prompt.Name, i)
			n.Job.Spec.Template.Spec.Volumes[4].Secret.SecretName = n.Prompt.Name
			if err := c.Apply(ctx, n.Objects()); err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, n.Job.Name)
		}
	}
	// Each Job's pod appears in the watch.
	for _, job := range jobs {
		for {
			changed := w.Changed()
			o, err := w.Observe(job)
			if err != nil {
				t.Fatal(err)
			}
			if o.Pod != "" {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the pod of %s never appeared in the watch: %+v", job, o)
			case <-changed:
			}
		}
	}
	before := counter.reads.Load()
	time.Sleep(3 * time.Second)
	for _, job := range jobs {
		if o, err := w.Observe(job); err != nil || o.Phase != k8sengine.PhasePending {
			t.Errorf("%s: %+v %v, want pending", job, o, err)
		}
	}
	if during := counter.reads.Load() - before; during != 0 {
		t.Errorf("%d reads in 3 s while %d nodes waited, want none", during, len(jobs))
	}
	if n := counter.watches.Load(); n < 3 || n > 6 {
		t.Errorf("%d watches, want one per kind (a few more if one expired)", n)
	}
	t.Logf("%d Jobs watched: %d watches, %d reads in all (the initial lists and the applies' none), 0 while waiting", len(jobs), counter.watches.Load(), counter.reads.Load())
	if err := c.DeleteRun(ctx, run); err != nil {
		t.Error(err)
	}
}
