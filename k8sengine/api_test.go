package k8sengine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

// apiServer is a small in-memory Kubernetes API over HTTP: enough of its REST paths for client-go's dynamic
// client as k8sengine.New uses it (server-side apply as a whole-object replace, get, list by label selector,
// delete, /version and a pod's log). It checks what a real server requires of an apply: the content type, a field
// manager and force.
type apiServer struct {
	t       *testing.T
	mu      sync.Mutex
	objects map[string]map[string]any // by path: /api/v1/namespaces/ns/secrets/name
	log     string
	applies []string
}

func newAPIServer(t *testing.T) (*apiServer, *rest.Config) {
	s := &apiServer{t: t, objects: map[string]map[string]any{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, &rest.Config{Host: srv.URL}
}

func (s *apiServer) put(path string, obj map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[path] = obj
}

func (s *apiServer) status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": msg, "reason": reason, "code": code})
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/version":
		_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": "v1.37.2"})
		return
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/log"):
		if q := r.URL.Query(); q.Get("follow") != "true" || q.Get("container") != "agent" {
			s.status(w, http.StatusBadRequest, "BadRequest", "log query "+r.URL.RawQuery)
			return
		}
		_, _ = io.WriteString(w, s.log)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPatch:
		q := r.URL.Query()
		if ct := r.Header.Get("Content-Type"); ct != "application/apply-patch+yaml" || q.Get("fieldManager") != k8sengine.FieldManager || q.Get("force") != "true" {
			s.status(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("not a forced server-side apply by kewplan: %s %s", ct, r.URL.RawQuery))
			return
		}
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			s.status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		s.objects[path] = obj
		s.applies = append(s.applies, path)
		_ = json.NewEncoder(w).Encode(obj)
	case http.MethodGet:
		if obj, ok := s.objects[path]; ok {
			_ = json.NewEncoder(w).Encode(obj)
			return
		}
		// A collection: every object directly under path, filtered by the label selector.
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			s.status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		items := []any{}
		for p, obj := range s.objects {
			rest, ok := strings.CutPrefix(p, path+"/")
			if !ok || strings.Contains(rest, "/") {
				continue
			}
			md, _ := obj["metadata"].(map[string]any)
			set := labels.Set{}
			if l, ok := md["labels"].(map[string]any); ok {
				for k, v := range l {
					set[k], _ = v.(string)
				}
			}
			if sel.Matches(set) {
				items = append(items, obj)
			}
		}
		if !collections[path[strings.LastIndex(path, "/")+1:]] {
			s.status(w, http.StatusNotFound, "NotFound", path+" not found")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "List", "apiVersion": "v1", "metadata": map[string]any{}, "items": items})
	case http.MethodDelete:
		if _, ok := s.objects[path]; !ok {
			s.status(w, http.StatusNotFound, "NotFound", path+" not found")
			return
		}
		delete(s.objects, path)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	default:
		s.status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

// collections are the resources kewplan lists: a GET of a path ending in one is a list, any other a single object.
var collections = map[string]bool{"jobs": true, "pods": true, "secrets": true, "events": true, "networkpolicies": true,
	"deployments": true, "services": true, "configmaps": true}

func object(kind, name string, extra map[string]any) map[string]any {
	o := map[string]any{"kind": kind, "metadata": map[string]any{"name": name, "namespace": "agents"}}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

// TestDynamicAPI drives a Cluster made by k8sengine.New over HTTP: the paths, verbs and query client-go's dynamic
// client sends for each of kewplan's calls, and the answers decoded into the typed objects the apply loop reads.
func TestDynamicAPI(t *testing.T) {
	ctx := context.Background()
	srv, cfg := newAPIServer(t)
	c, err := k8sengine.New(cfg, "agents")
	if err != nil {
		t.Fatal(err)
	}

	srv.put("/api/v1/namespaces/agents", map[string]any{"kind": "Namespace", "metadata": map[string]any{"name": "agents",
		"labels": map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}}})
	srv.put("/api/v1/namespaces/agents/secrets/kewplan-git", object("Secret", "kewplan-git", map[string]any{"data": map[string]any{"token": "czNjcmV0LWtleQ=="}}))
	srv.put("/api/v1/namespaces/agents/secrets/agent-keys", object("Secret", "agent-keys", map[string]any{"data": map[string]any{"ANTHROPIC_API_KEY": "czNjcmV0LWtleQ=="}}))
	e := k8stest.TestEngine("agents")
	e.RuntimeClass = "gvisor"
	r, err := c.Preflight(ctx, e, []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ServerVersion != "v1.37.2" {
		t.Errorf("ServerVersion = %q", r.ServerVersion)
	}
	wantErrs := []string{`The RuntimeClass "gvisor" does not exist`}
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], wantErrs[0]) {
		t.Errorf("Errors = %q, want one containing %q", r.Errors, wantErrs[0])
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `no key "OPENAI_API_KEY"`) || strings.Contains(r.Warnings[0], "s3cret") {
		t.Errorf("Warnings = %q, want one naming the missing OPENAI_API_KEY and no value", r.Warnings)
	}
	keys, found, err := c.SecretKeys(ctx, "agent-keys")
	if err != nil || !found || !cmp.Equal(keys, []string{"ANTHROPIC_API_KEY"}) {
		t.Errorf("SecretKeys = %q, %v, %v", keys, found, err)
	}
	if _, found, err := c.SecretKeys(ctx, "absent"); found || err != nil {
		t.Errorf("SecretKeys(absent) = found %v, err %v; want not found and no error", found, err)
	}

	m := manifests(t, "r1")
	if err := c.Apply(ctx, m.All()); err != nil {
		t.Fatal(err)
	}
	sort.Strings(srv.applies)
	want := []string{
		"/api/v1/namespaces/agents/secrets/kew-fix-r1-prompt",
		"/api/v1/namespaces/agents/secrets/kew-review-r1-prompt",
		"/apis/batch/v1/namespaces/agents/jobs/kew-fix-r1",
		"/apis/batch/v1/namespaces/agents/jobs/kew-review-r1",
		"/apis/networking.k8s.io/v1/namespaces/agents/networkpolicies/kewplan-egress-r1",
	}
	if diff := cmp.Diff(want, srv.applies); diff != "" {
		t.Errorf("applied paths (-want +got):\n%s", diff)
	}
	left, err := c.Remaining(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(left)
	if diff := cmp.Diff([]string{"Job/kew-fix-r1", "Job/kew-review-r1", "NetworkPolicy/kewplan-egress-r1", "Secret/kew-fix-r1-prompt", "Secret/kew-review-r1-prompt"}, left); diff != "" {
		t.Errorf("Remaining (-want +got):\n%s", diff)
	}

	// A Job that succeeded, with its pod and the pushed commit in the push step's termination message.
	job := srv.objects["/apis/batch/v1/namespaces/agents/jobs/kew-fix-r1"]
	job["status"] = map[string]any{"succeeded": 1, "conditions": []any{map[string]any{"type": string(batchv1.JobComplete), "status": string(corev1.ConditionTrue)}}}
	srv.put("/api/v1/namespaces/agents/pods/kew-fix-r1-abcde", object("Pod", "kew-fix-r1-abcde", map[string]any{
		"metadata": map[string]any{"name": "kew-fix-r1-abcde", "namespace": "agents", "labels": map[string]any{"batch.kubernetes.io/job-name": "kew-fix-r1"}},
		"status": map[string]any{"initContainerStatuses": []any{map[string]any{"name": k8srender.StepAgent,
			"state": map[string]any{"terminated": map[string]any{"exitCode": 3}}}}},
	}))
	o, err := c.Observe(ctx, "kew-fix-r1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Phase != k8sengine.PhaseSucceeded || o.Pod != "kew-fix-r1-abcde" || o.AgentExit == nil || *o.AgentExit != 3 {
		t.Errorf("Observe = %+v, want succeeded, pod kew-fix-r1-abcde, agent exit 3", o)
	}
	srv.log = "{\"type\":\"result\"}\n"
	rc, err := c.OpenLog(ctx, "kew-fix-r1-abcde", k8srender.StepAgent)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != srv.log {
		t.Errorf("OpenLog read %q, want %q", got, srv.log)
	}

	if err := c.DeleteRun(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Remaining(ctx, "r1"); err != nil || len(left) != 0 {
		t.Errorf("after DeleteRun: %v, %v", left, err)
	}
	if _, err := c.Observe(ctx, "kew-fix-r1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Observe(deleted Job) = %v, want not found", err)
	}
}
