package k8sengine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

// waitFor reads the watch at each change until cond holds.
func waitFor(t *testing.T, w *k8sengine.RunWatch, job string, cond func(k8sengine.Outcome, error) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		changed := w.Changed()
		if o, err := w.Observe(job); cond(o, err) {
			return
		}
		select {
		case <-ctx.Done():
			o, err := w.Observe(job)
			t.Fatalf("%s: %+v %v", job, o, err)
		case <-changed:
		}
	}
}

// TestRunWatch: the run's watch follows a Job from its creation (pending) through its pod's steps, ignores
// another run's pods, and reports a Job deleted under it as an error.
func TestRunWatch(t *testing.T) {
	fake := k8stest.Fake()
	c := &k8sengine.Cluster{API: fake, Namespace: "agents"}
	w, err := c.WatchRun(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if o, err := w.Observe("kew-fix-r1"); err != nil || o.Phase != k8sengine.PhasePending {
		t.Fatalf("a Job not yet created: %+v %v, want pending", o, err)
	}
	labels := func(run string) map[string]string {
		return map[string]string{k8srender.LabelRun: run, k8srender.LabelManagedBy: k8srender.ManagedBy, "batch.kubernetes.io/job-name": "kew-fix-r1"}
	}
	ctx := context.Background()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kew-fix-r1", Namespace: "agents", Labels: labels("r1")}}
	if _, err := fake.CS.BatchV1().Jobs("agents").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another run's pod that happens to name the same Job is not this run's.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "agents", Labels: labels("r2")},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: k8srender.StepClone,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}
	if _, err := fake.CS.CoreV1().Pods("agents").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kew-fix-r1-abcde", Namespace: "agents", Labels: labels("r1")},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: k8srender.StepClone, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
			{Name: k8srender.StepAgent, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	if _, err := fake.CS.CoreV1().Pods("agents").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "kew-fix-r1", func(o k8sengine.Outcome, err error) bool {
		return err == nil && o.Phase == k8sengine.PhaseRunning && o.Step == k8srender.StepAgent && o.Pod == pod.Name
	})
	if err := fake.CS.BatchV1().Jobs("agents").Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "kew-fix-r1", func(_ k8sengine.Outcome, err error) bool { return err != nil })
}

// TestRunWatchForbidden: a namespace where kewplan may not list pods refuses the run at once, naming the kind.
func TestRunWatchForbidden(t *testing.T) {
	fake := k8stest.Fake()
	fake.CS.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("RBAC: no list"))
	})
	c := &k8sengine.Cluster{API: fake, Namespace: "agents"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.WatchRun(ctx, "r1")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Pod") {
		t.Fatalf("WatchRun = %v, want the pods' refusal", err)
	}
}
