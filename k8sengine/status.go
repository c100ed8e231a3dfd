package k8sengine

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kewplan/kewplan/k8srender"
)

// Phase is a node's state as the cluster shows it.
type Phase string

// Phases of a node's Job.
const (
	PhasePending   Phase = "pending"   // no pod yet, or the pod is not scheduled or still pulling
	PhaseRunning   Phase = "running"   // a step runs
	PhaseSucceeded Phase = "succeeded" // every step exited 0
	PhaseFailed    Phase = "failed"
)

// Outcome is what the Job, its pod and its events say about a node.
type Outcome struct {
	Phase Phase
	// Step is the container that runs, or that failed: clone, agent, push or verdict.
	Step     string
	ExitCode int32
	// Reason is a short machine word (DeadlineExceeded, FailedCreate, ImagePullBackOff, Error, ...); Message
	// says it for people.
	Reason  string
	Message string
	// Commit and Branch come from the push step's termination message.
	Commit, Branch string
	// Pod is the newest pod of the Job ("" before the Job controller made one) and AgentExit the agent step's
	// exit status once it ended (nil before): Observe fills them and AgentImageID, JobOutcome does not.
	Pod       string
	AgentExit *int32
	// AgentImageID is the image the agent step ran, as the container runtime resolved it ("" before it started):
	// what the ledger records as the node's image id, which on Docker is read from the engine before the run.
	AgentImageID string
}

// JobOutcome reads a node's state from its Job, its pods (those the Job controller created) and the Job's events.
// It holds the logic of status only, so it is tested against recorded API objects: no kubelet runs in the tests.
//
// Pod Security admission refuses a pod the Job controller tries to create; that shows only as FailedCreate
// events on the Job, never as a failed condition, so the events are read too, and such a Job fails at once
// instead of waiting for its deadline.
func JobOutcome(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) Outcome {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			// FailureTarget comes first: the Job controller sets it (a deadline passed, say) before it stops the
			// pods, whose steps then end with the signal's exit status.
			o := Outcome{Phase: PhaseFailed, Reason: c.Reason, Message: c.Message}
			if st := failedStep(pods); st != nil {
				o.Step, o.ExitCode = st.Name, st.State.Terminated.ExitCode
				if o.Reason == "" || o.Reason == "BackoffLimitExceeded" {
					o.Reason = st.State.Terminated.Reason
				}
			}
			return o
		case batchv1.JobComplete:
			o := Outcome{Phase: PhaseSucceeded, Reason: c.Reason}
			o.Commit, o.Branch = pushResult(pods)
			return o
		}
	}
	if len(pods) == 0 {
		if ev := latestEvent(events, "FailedCreate"); ev != nil {
			return Outcome{Phase: PhaseFailed, Reason: "FailedCreate", Message: ev.Message}
		}
		return Outcome{Phase: PhasePending}
	}
	pod := newestPod(pods)
	if pod.DeletionTimestamp != nil {
		// The Job controller is stopping the pod (its deadline, say); the Job's condition says why, soon.
		return Outcome{Phase: PhaseRunning, Step: runningStep(pod)}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, st := range statuses {
		if w := st.State.Waiting; w != nil && waitingFailure[w.Reason] {
			return Outcome{Phase: PhaseFailed, Step: st.Name, Reason: w.Reason, Message: w.Message}
		}
	}
	for _, st := range statuses {
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			return Outcome{Phase: PhaseFailed, Step: st.Name, ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}
		}
	}
	for _, st := range statuses {
		if st.State.Running != nil {
			return Outcome{Phase: PhaseRunning, Step: st.Name}
		}
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		o := Outcome{Phase: PhaseSucceeded}
		o.Commit, o.Branch = pushResult(pods)
		return o
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return Outcome{Phase: PhasePending, Reason: c.Reason, Message: c.Message}
		}
	}
	return Outcome{Phase: PhasePending}
}

// waitingFailure are waiting reasons that do not resolve by themselves: the node fails rather than burn its
// deadline.
var waitingFailure = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

func failedStep(pods []corev1.Pod) *corev1.ContainerStatus {
	if len(pods) == 0 {
		return nil
	}
	pod := newestPod(pods)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if t := list[i].State.Terminated; t != nil && t.ExitCode != 0 {
				return &list[i]
			}
		}
	}
	return nil
}

func newestPod(pods []corev1.Pod) *corev1.Pod {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return sorted[j].CreationTimestamp.Before(&sorted[i].CreationTimestamp)
	})
	return &sorted[0]
}

func latestEvent(events []corev1.Event, reason string) *corev1.Event {
	var best *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != reason {
			continue
		}
		if best == nil || eventTime(best).Before(eventTime(e)) {
			best = e
		}
	}
	return best
}

func eventTime(e *corev1.Event) *metav1.Time {
	if !e.LastTimestamp.IsZero() {
		return &e.LastTimestamp
	}
	return &metav1.Time{Time: e.EventTime.Time}
}

// pushResult reads the push step's termination message: {"commit": "...", "branch": "..."}.
func pushResult(pods []corev1.Pod) (commit, branch string) {
	if len(pods) == 0 {
		return "", ""
	}
	for _, st := range newestPod(pods).Status.ContainerStatuses {
		if st.Name != k8srender.StepPush || st.State.Terminated == nil {
			continue
		}
		var m struct{ Commit, Branch string }
		if json.Unmarshal([]byte(st.State.Terminated.Message), &m) == nil && isHex(m.Commit) {
			return m.Commit, m.Branch
		}
	}
	return "", ""
}

func isHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Observe fetches what JobOutcome reads for one node's Job.
func (c *Cluster) Observe(ctx context.Context, jobName string) (Outcome, error) {
	var job batchv1.Job
	if err := c.API.Get(ctx, Jobs, c.Namespace, jobName, &job); err != nil {
		return Outcome{}, fmt.Errorf("read Job %s: %w", jobName, err)
	}
	var pods corev1.PodList
	if err := c.API.List(ctx, Pods, c.Namespace, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobName}, &pods); err != nil {
		return Outcome{}, fmt.Errorf("list pods of Job %s: %w", jobName, err)
	}
	var events corev1.EventList
	if err := c.API.List(ctx, Events, c.Namespace, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Job,involvedObject.name=" + jobName}, &events); err != nil {
		return Outcome{}, fmt.Errorf("list events of Job %s: %w", jobName, err)
	}
	return observed(&job, pods.Items, events.Items), nil
}

// observed is JobOutcome with the newest pod's name and the agent step's image and exit status.
func observed(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) Outcome {
	o := JobOutcome(job, pods, events)
	if len(pods) > 0 {
		pod := newestPod(pods)
		o.Pod = pod.Name
		for _, st := range pod.Status.InitContainerStatuses {
			if st.Name != k8srender.StepAgent {
				continue
			}
			o.AgentImageID = st.ImageID
			if st.State.Terminated != nil {
				code := st.State.Terminated.ExitCode
				o.AgentExit = &code
			}
		}
	}
	return o
}

// FollowLog copies a step's log to w as it is written, until the step ends or ctx is cancelled. For the agent
// step that is its stdout, one JSON object per line (contract element 4): the apply loop hands w to the same
// meter and transcript as on Docker. The kubelet merges stdout and stderr into one log, which is why the meters'
// tolerance of unparseable lines matters more here.
func (c *Cluster) FollowLog(ctx context.Context, pod, step string, w io.Writer) error {
	rc, err := c.OpenLog(ctx, pod, step)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("follow the log of %s/%s: %w", pod, step, err)
	}
	return nil
}

// OpenLog opens a step's log, followed: the reader ends when the step ends. The apply loop passes it to
// runners.Feed with the node's meter and transcript.
func (c *Cluster) OpenLog(ctx context.Context, pod, step string) (io.ReadCloser, error) {
	if c.logs != nil {
		return c.logs(ctx, pod, step)
	}
	rc, err := c.API.Log(ctx, c.Namespace, pod, step)
	if err != nil {
		return nil, fmt.Errorf("follow the log of %s/%s: %w", pod, step, err)
	}
	return rc, nil
}

// ReadVerdict extracts the verdict sidecar from the verdict step's log: the bytes between the markers, base64
// decoded, at most k8srender.VerdictMaxBytes. found is false when the step reported no sidecar (missing, a
// symbolic link, not a regular file) or the log holds no complete block: fail-closed, the node is held. The bytes
// go to the same verdict parser as on Docker.
func ReadVerdict(log io.Reader) (data []byte, found bool, err error) {
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 64<<10), 4*k8srender.VerdictMaxBytes)
	var b64 strings.Builder
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == k8srender.VerdictMissing:
			return nil, false, nil
		case line == k8srender.VerdictBegin:
			in, b64 = true, strings.Builder{}
		case line == k8srender.VerdictEnd && in:
			data, err := base64.StdEncoding.DecodeString(b64.String())
			if err != nil {
				return nil, false, fmt.Errorf("the verdict block is not base64: %w", err)
			}
			if len(data) > k8srender.VerdictMaxBytes {
				return nil, false, fmt.Errorf("the verdict is larger than %d bytes", k8srender.VerdictMaxBytes)
			}
			return data, true, nil
		case in:
			if b64.Len()+len(line) > 2*k8srender.VerdictMaxBytes {
				return nil, false, fmt.Errorf("the verdict block is larger than %d bytes", k8srender.VerdictMaxBytes)
			}
			b64.WriteString(line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("read the verdict step's log: %w", err)
	}
	return nil, false, nil
}

// runningStep names the step of pod that runs, "" when none does.
func runningStep(pod *corev1.Pod) string {
	for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if st.State.Running != nil {
			return st.Name
		}
	}
	return ""
}
