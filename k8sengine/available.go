package k8sengine

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// WaitAvailable waits, watching it, until the Deployment name of the cluster's namespace has a pod that is ready
// (kewplan's egress proxy: a node's pod that starts before it finds nothing behind the Service and fails). After
// timeout it says why not, from the Deployment's pods: an image that cannot be pulled, a container that crashes.
func (c *Cluster) WaitAvailable(ctx context.Context, name string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d appsv1.Deployment
	for {
		if err := c.API.Get(wctx, Deployments, c.Namespace, name, &d); err != nil {
			if wctx.Err() != nil {
				break
			}
			return fmt.Errorf("read the Deployment %s/%s: %w", c.Namespace, name, err)
		}
		if available(&d) {
			return nil
		}
		w, err := c.API.Watch(wctx, Deployments, c.Namespace, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: d.ResourceVersion})
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			return fmt.Errorf("watch the Deployment %s/%s: %w", c.Namespace, name, err)
		}
		ok := waitEvents(w, &d)
		w.Stop()
		if ok {
			return nil
		}
		if wctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the Deployment %s/%s has no ready pod after %s%s", c.Namespace, name, timeout, c.whyNotReady(ctx, &d))
}

// waitEvents reads w until the Deployment is available (true) or the watch ends (false).
func waitEvents(w watch.Interface, d *appsv1.Deployment) bool {
	for ev := range w.ResultChan() {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		switch o := ev.Object.(type) {
		case *unstructured.Unstructured:
			var got appsv1.Deployment
			if fromUnstructured(o.UnstructuredContent(), &got) == nil {
				*d = got
			}
		case *appsv1.Deployment:
			*d = *o
		}
		if available(d) {
			return true
		}
	}
	return false
}

func available(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas > 0 && d.Status.AvailableReplicas > 0
}

// whyNotReady is ": " and what the Deployment's pods wait for, "" when nothing says.
func (c *Cluster) whyNotReady(ctx context.Context, d *appsv1.Deployment) string {
	if d.Spec.Selector == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var pods corev1.PodList
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	if err := c.API.List(ctx, Pods, c.Namespace, metav1.ListOptions{LabelSelector: sel}, &pods); err != nil {
		return ""
	}
	var why []string
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			switch {
			case st.State.Waiting != nil:
				why = append(why, fmt.Sprintf("pod %s: %s %s", p.Name, st.State.Waiting.Reason, st.State.Waiting.Message))
			case st.State.Terminated != nil:
				why = append(why, fmt.Sprintf("pod %s: exited %d %s", p.Name, st.State.Terminated.ExitCode, st.State.Terminated.Message))
			case !st.Ready:
				why = append(why, fmt.Sprintf("pod %s: running, not ready (its readiness probe fails)", p.Name))
			}
		}
		if len(p.Status.ContainerStatuses) == 0 {
			for _, cond := range p.Status.Conditions {
				if cond.Status != corev1.ConditionTrue && cond.Message != "" {
					why = append(why, fmt.Sprintf("pod %s: %s", p.Name, cond.Message))
				}
			}
		}
	}
	if len(pods.Items) == 0 {
		for _, cond := range d.Status.Conditions {
			if cond.Message != "" {
				why = append(why, cond.Message)
			}
		}
	}
	if len(why) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(strings.Join(why, "; "))
}
