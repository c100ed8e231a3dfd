package k8sengine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/runners"
)

func terminated(name string, code int32, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: reason + " for " + name}}}
}

func pod(phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kew-fix-abcde"},
		Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main}}
}

func jobWith(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kew-fix"}, Status: batchv1.JobStatus{Conditions: conds}}
}

const sha = "0123456789abcdef0123456789abcdef01234567"

// TestJobOutcome reads recorded API objects (the Job, its pods, its events) the way apply does: no kubelet runs
// in the tests, so every pod state is recorded here.
func TestJobOutcome(t *testing.T) {
	cloned := terminated(k8srender.StepClone, 0, "Completed", "")
	agentDone := terminated(k8srender.StepAgent, 0, "Completed", "")
	for _, tc := range []struct {
		name   string
		job    *batchv1.Job
		pods   []corev1.Pod
		events []corev1.Event
		want   k8sengine.Outcome
	}{
		{name: "no pod yet", job: jobWith(), want: k8sengine.Outcome{Phase: k8sengine.PhasePending}},
		// A deadline: the Job controller sets FailureTarget, then stops the pod, whose agent exits on the signal.
		{name: "deadline, pod stopped", job: jobWith(batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}),
			pods: []corev1.Pod{pod(corev1.PodFailed, []corev1.ContainerStatus{cloned, terminated(k8srender.StepAgent, 2, "Error", "")})},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Step: k8srender.StepAgent, ExitCode: 2, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}},
		{name: "pod being stopped, no condition yet", job: jobWith(),
			pods: []corev1.Pod{func() corev1.Pod {
				p := pod(corev1.PodRunning, []corev1.ContainerStatus{cloned, terminated(k8srender.StepAgent, 2, "Error", "")})
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				return p
			}()},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseRunning}},
		{name: "refused by Pod Security: FailedCreate events, no condition", job: jobWith(),
			events: []corev1.Event{{Reason: "FailedCreate", Message: `Error creating: pods "kew-fix-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`}},
			want:   k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Reason: "FailedCreate", Message: `Error creating: pods "kew-fix-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`}},
		{name: "unschedulable", job: jobWith(), pods: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes have 4Gi"}}}}},
			want: k8sengine.Outcome{Phase: k8sengine.PhasePending, Reason: "Unschedulable", Message: "0/3 nodes have 4Gi"}},
		{name: "cloning", job: jobWith(), pods: []corev1.Pod{pod(corev1.PodPending, []corev1.ContainerStatus{running(k8srender.StepClone), waiting(k8srender.StepAgent, "PodInitializing")}, waiting(k8srender.StepPush, "PodInitializing"))},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseRunning, Step: k8srender.StepClone}},
		{name: "agent runs", job: jobWith(), pods: []corev1.Pod{pod(corev1.PodPending, []corev1.ContainerStatus{cloned, running(k8srender.StepAgent)})},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseRunning, Step: k8srender.StepAgent}},
		{name: "image cannot be pulled", job: jobWith(), pods: []corev1.Pod{pod(corev1.PodPending, []corev1.ContainerStatus{cloned, waiting(k8srender.StepAgent, "ImagePullBackOff")})},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Step: k8srender.StepAgent, Reason: "ImagePullBackOff", Message: "ImagePullBackOff for agent"}},
		{name: "agent exits 64 before the Job controller notices", job: jobWith(), pods: []corev1.Pod{pod(corev1.PodFailed, []corev1.ContainerStatus{cloned, terminated(k8srender.StepAgent, 64, "Error", "prompt file missing")})},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Step: k8srender.StepAgent, ExitCode: 64, Reason: "Error", Message: "prompt file missing"}},
		{name: "deadline exceeded", job: jobWith(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}),
			want: k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}},
		{name: "failed: the step that failed is named", job: jobWith(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}),
			pods: []corev1.Pod{pod(corev1.PodFailed, []corev1.ContainerStatus{cloned, agentDone}, terminated(k8srender.StepPush, 65, "Error", ""))},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseFailed, Step: k8srender.StepPush, ExitCode: 65, Reason: "Error"}},
		{name: "complete: the commit comes from the push step's termination message", job: jobWith(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
			pods: []corev1.Pod{pod(corev1.PodSucceeded, []corev1.ContainerStatus{cloned, agentDone}, terminated(k8srender.StepPush, 0, "Completed", `{"commit":"`+sha+`","branch":"kew/fix"}`))},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseSucceeded, Commit: sha, Branch: "kew/fix"}},
		{name: "complete: a forged termination message is not a commit", job: jobWith(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
			pods: []corev1.Pod{pod(corev1.PodSucceeded, nil, terminated(k8srender.StepPush, 0, "Completed", `{"commit":"main; rm -rf /"}`))},
			want: k8sengine.Outcome{Phase: k8sengine.PhaseSucceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := k8sengine.JobOutcome(tc.job, tc.pods, tc.events)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobOutcome() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadVerdict(t *testing.T) {
	verdict := `{"verdict":"approve","summary":"ok","findings":[]}`
	enc := base64.StdEncoding.EncodeToString([]byte(verdict))
	for _, tc := range []struct {
		name, log string
		want      string
		found     bool
		err       bool
	}{
		{name: "present", log: "noise\n" + k8srender.VerdictBegin + "\n" + enc[:10] + "\n" + enc[10:] + "\n\n" + k8srender.VerdictEnd + "\n", want: verdict, found: true},
		{name: "missing", log: k8srender.VerdictMissing + "\n"},
		{name: "truncated log: held", log: k8srender.VerdictBegin + "\n" + enc + "\n"},
		{name: "not base64", log: k8srender.VerdictBegin + "\n!!!\n" + k8srender.VerdictEnd + "\n", err: true},
		{name: "empty log", log: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, found, err := k8sengine.ReadVerdict(strings.NewReader(tc.log))
			if (err != nil) != tc.err || found != tc.found || string(data) != tc.want {
				t.Errorf("ReadVerdict() = %q, %v, %v; want %q, %v, error %v", data, found, err, tc.want, tc.found, tc.err)
			}
		})
	}
}

// TestFollowLogMeters serves a recorded agent stream as the API server's pod log endpoint (follow=true, chunked)
// and checks that the agent's stdout reaches the same meter as on Docker with the same totals.
func TestFollowLogMeters(t *testing.T) {
	stream, err := os.ReadFile("../runners/testdata/streams/claude-code/tool.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var gotPath, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
		w.Header().Set("Content-Type", "text/plain")
		fl := w.(http.Flusher)
		for _, line := range bytes.SplitAfter(stream, []byte("\n")) {
			_, _ = w.Write(line)
			fl.Flush()
		}
	}))
	defer srv.Close()
	c, err := k8sengine.New(&rest.Config{Host: srv.URL}, "agents")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := c.OpenLog(ctx, "kew-fix-abcde", k8srender.StepAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	viaLog, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
	var transcript bytes.Buffer
	if err := runners.Feed(rc, viaLog, &transcript); err != nil {
		t.Fatal(err)
	}
	direct, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
	if err := runners.Feed(bytes.NewReader(stream), direct, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(direct.Totals(), viaLog.Totals()); diff != "" {
		t.Errorf("totals via the pod log mismatch (-direct +log):\n%s", diff)
	}
	if !bytes.Equal(stream, transcript.Bytes()) {
		t.Errorf("the transcript differs from the stream (%d vs %d bytes)", transcript.Len(), len(stream))
	}
	if gotPath != "/api/v1/namespaces/agents/pods/kew-fix-abcde/log" || !strings.Contains(gotQuery, "follow=true") || !strings.Contains(gotQuery, "container=agent") {
		t.Errorf("request = %s?%s", gotPath, gotQuery)
	}
}
