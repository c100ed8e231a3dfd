package views

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
)

// kubernetesPlanDoc is the plan document of the Kubernetes example on the kubernetes engine.
func kubernetesPlanDoc(t *testing.T) *jsonplan.Document {
	t.Helper()
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("the Kubernetes example does not plan cleanly")
	}
	e := k8stest.Engine(cfg, "agents")
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	doc := jsonplan.NewDocument(p, "test")
	doc.SetEngine(config.EngineKubernetes, m, e)
	return doc
}

func TestPlanKubernetesHuman(t *testing.T) {
	doc := kubernetesPlanDoc(t)
	var b bytes.Buffer
	if err := WritePlanHuman(&b, doc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	k := planKubernetes(doc)
	if k == nil || len(k.Differences) == 0 || len(k.Nodes) != len(doc.Nodes) {
		t.Fatalf("kubernetes object = %+v; want every node and the differences", k)
	}
	for _, want := range []string{"Engine kubernetes: namespace agents", "  job          kew-fix in namespace agents",
		"Credential exposure", "Differences from Docker", "\nShared Kubernetes objects\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("human plan lacks %q:\n%s", want, out)
		}
	}
	for _, d := range k.Differences {
		if !strings.Contains(out, "\n  "+d.ID+"\n") {
			t.Errorf("difference %s is not listed", d.ID)
		}
	}
	for _, absent := range []string{"docker run", "  argv", "isolation"} {
		if strings.Contains(out, absent) {
			t.Errorf("human plan on kubernetes shows %q:\n%s", absent, out)
		}
	}
}

// TestPlanKubernetesMarkdown: the pull-request comment names the engine, shows the pod's runtime class where the
// Docker plan shows its runtime, and lists the differences.
func TestPlanKubernetesMarkdown(t *testing.T) {
	doc := kubernetesPlanDoc(t)
	var b bytes.Buffer
	if err := WritePlanMarkdown(&b, doc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Engine: kubernetes, namespace `agents`", "| allowlist | runtimeClassName gvisor |", "Differences from Docker"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "runc (engine default)") {
		t.Errorf("markdown plan on kubernetes names a Docker runtime:\n%s", out)
	}
}

func TestPlanKubernetesJSONRoundTrip(t *testing.T) {
	doc := kubernetesPlanDoc(t)
	var b bytes.Buffer
	if err := WritePlanJSON(&b, doc); err != nil {
		t.Fatal(err)
	}
	var back jsonplan.Document
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.EngineName() != config.EngineKubernetes {
		t.Fatalf("engine = %q", back.Engine)
	}
	k := planKubernetes(&back)
	if k.Settings.GitSecret != "kewplan-git" || k.Settings.Engine().CredentialsSecret != "agent-keys" {
		t.Fatalf("settings = %+v", k.Settings)
	}
	// A document from before engines is a Docker plan.
	back.Engine, back.Kubernetes = "", nil
	if back.EngineName() != config.EngineDocker || planKubernetes(&back) != nil {
		t.Fatal("a document without engine is not docker")
	}
}

// A hand-edited plan file whose kubernetes object is damaged or hostile is still shown, escaped, without a panic.
func TestPlanKubernetesHostile(t *testing.T) {
	doc := kubernetesPlanDoc(t)
	for _, raw := range []string{`{"nodes": 3}`, `{"namespace": "a\u001b[31mred", "nodes": [{"node": "fix", "steps": [{"name": "x\u0007"}], "objects": [{"kind": "Job", "name": "j\u001b]0;t\u0007"}]}], "differences": [{"id": "x\u001b[2J"}]}`} {
		doc.Kubernetes = &jsonplan.Kubernetes{}
		if err := json.Unmarshal([]byte(raw), doc.Kubernetes); err != nil {
			t.Fatal(err)
		}
		for _, w := range []planRenderer{WritePlanHuman, WritePlanMarkdown} {
			var b bytes.Buffer
			if err := w(&b, doc); err != nil {
				t.Fatal(err)
			}
			if strings.ContainsAny(b.String(), "\x1b\x07") {
				t.Errorf("control characters printed for %s:\n%q", raw, b.String())
			}
		}
	}
}
