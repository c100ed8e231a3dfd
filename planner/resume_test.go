package planner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

const resumeConfig = `
sandbox {
  memory = "4g"
  images = { claude-code = "ghcr.io/acme/agent@sha256:%IMAGE%" }
}
node "a" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/w.git"
  prompt = "%PROMPT%"
}
node "b" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/w.git"
  ref    = node.a.commit
  prompt = "Build on ${node.a.commit}."
}
node "c" {
  runner     = "claude-code"
  model      = "m"
  repo       = "https://github.com/acme/w.git"
  prompt     = "Document it."
  depends_on = [node.b]
}
`

// resumeSetup plans the configuration with the given first prompt and image, and returns a renderer that
// re-plans a node with known outputs, as the executor and `apply --resume` do.
func resumeSetup(t *testing.T, prompt, image string) (*planner.Plan, planner.NodeRenderer) {
	t.Helper()
	dir := t.TempDir()
	src := strings.NewReplacer("%PROMPT%", prompt, "%IMAGE%", image).Replace(resumeConfig)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := planner.Inputs{FS: os.DirFS(dir)}
	p, diags := planner.Build(cfg, in)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	render := func(name string, outputs map[string]map[string]cty.Value) (*planner.NodePlan, error) {
		np, diags := planner.RenderNode(cfg, in, name, outputs)
		if diags.HasErrors() {
			return nil, diags
		}
		return np, nil
	}
	return p, render
}

func outputsOf(commit, branch string) map[string]string {
	return map[string]string{"commit": commit, "branch": branch, "status": "succeeded", "verdict": "", "session_id": "s"}
}

func ctyOutputs(o map[string]string) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range o {
		out[k] = cty.StringVal(v)
	}
	return out
}

// recorded runs the configuration "as the executor would" and records each node with the given status.
func recorded(t *testing.T, render planner.NodeRenderer, statuses map[string]string) *planner.PreviousRun {
	t.Helper()
	prev := &planner.PreviousRun{ID: "RUN1", Nodes: map[string]*planner.PreviousNode{}}
	outputs := map[string]map[string]cty.Value{}
	for _, name := range []string{"a", "b", "c"} {
		status, ok := statuses[name]
		if !ok {
			continue
		}
		np, err := render(name, outputs)
		if err != nil {
			t.Fatal(err)
		}
		fp, ok := planner.Fingerprint(np, outputs, "sha256:img")
		if !ok {
			t.Fatalf("node %s has no fingerprint at apply time", name)
		}
		outs := outputsOf("c0ffee"+name, "kew/"+name)
		prev.Nodes[name] = &planner.PreviousNode{Status: status, Fingerprint: &fp, Outputs: outs, Pushed: true}
		outputs[name] = ctyOutputs(outs)
	}
	return prev
}

type decision struct{ Node, Action, Reason string }

func decisions(rp *planner.ResumePlan) []decision {
	var out []decision
	for _, d := range rp.Decisions {
		out = append(out, decision{d.Node, d.Action, d.Reason})
	}
	return out
}

func TestResume(t *testing.T) {
	const prompt, image = "Fix it.", "aa"
	tests := []struct {
		name          string
		prompt, image string
		statuses      map[string]string
		edit          func(prev *planner.PreviousRun)
		want          []decision
	}{
		{"middle node failed", prompt, image, map[string]string{"a": "succeeded", "b": "failed", "c": "skipped"}, nil, []decision{
			{"a", "reuse", "reused from RUN1"}, {"b", "run", "failed in RUN1"}, {"c", "run", "upstream b will run"}}},
		{"everything succeeded and nothing changed", prompt, image, map[string]string{"a": "succeeded", "b": "succeeded", "c": "approved"}, nil, []decision{
			{"a", "reuse", "reused from RUN1"}, {"b", "reuse", "reused from RUN1"}, {"c", "reuse", "reused from RUN1"}}},
		{"prompt changed", "Fix it properly.", image, map[string]string{"a": "succeeded", "b": "succeeded", "c": "succeeded"}, nil, []decision{
			{"a", "run", "prompt changed"}, {"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
		{"image changed", prompt, "bb", map[string]string{"a": "succeeded", "b": "timed_out"}, nil, []decision{
			{"a", "run", "image changed"}, {"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
		{"not in the run", prompt, image, map[string]string{"a": "succeeded", "b": "succeeded"}, nil, []decision{
			{"a", "reuse", "reused from RUN1"}, {"b", "reuse", "reused from RUN1"}, {"c", "run", "not in RUN1"}}},
		{"upstream commit changed", prompt, image, map[string]string{"a": "succeeded", "b": "succeeded", "c": "succeeded"}, func(prev *planner.PreviousRun) {
			prev.Nodes["b"].Outputs = outputsOf("f00d", "kew/b") // b's recorded output is not what c saw
		}, []decision{{"a", "reuse", "reused from RUN1"}, {"b", "reuse", "reused from RUN1"}, {"c", "run", "upstream commit changed"}}},
		{"a pushed branch moved", prompt, image, map[string]string{"a": "succeeded", "b": "succeeded"}, func(prev *planner.PreviousRun) {
			prev.Nodes["a"].BranchChecked, prev.Nodes["a"].BranchHead = true, "beefbeefbeefbeef"
		}, []decision{{"a", "run", "branch kew/a moved from the recorded commit c0ffeea to beefbeefbeef"},
			{"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
		{"a pushed branch deleted", prompt, image, map[string]string{"a": "succeeded"}, func(prev *planner.PreviousRun) {
			prev.Nodes["a"].BranchChecked = true
		}, []decision{{"a", "run", "branch kew/a no longer exists on the remote"},
			{"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
		{"no fingerprint recorded", prompt, image, map[string]string{"a": "succeeded"}, func(prev *planner.PreviousRun) {
			prev.Nodes["a"].Fingerprint = nil
		}, []decision{{"a", "run", "no input fingerprint recorded in RUN1"},
			{"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
		{"reused twice names the original run", prompt, image, map[string]string{"a": "reused", "b": "held"}, func(prev *planner.PreviousRun) {
			prev.Nodes["a"].ReusedFrom = "RUN0"
		}, []decision{{"a", "reuse", "reused from RUN0"}, {"b", "run", "held in RUN1"}, {"c", "run", "upstream b will run"}}},
		{"other statuses", prompt, image, map[string]string{"a": "cancelled"}, nil, []decision{
			{"a", "run", "cancelled in RUN1"}, {"b", "run", "upstream a will run"}, {"c", "run", "upstream b will run"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, oldRender := resumeSetup(t, prompt, image)
			prev := recorded(t, oldRender, tc.statuses)
			if tc.edit != nil {
				tc.edit(prev)
			}
			p, render := resumeSetup(t, tc.prompt, tc.image)
			rp := planner.Resume(p, prev, render)
			if diff := cmp.Diff(tc.want, decisions(rp)); diff != "" {
				t.Errorf("Resume() mismatch (-want +got):\n%s", diff)
			}
			for _, d := range rp.Decisions {
				if d.Action == "reuse" && (d.Outputs["commit"] == "" || d.FromRun == "") {
					t.Errorf("%s reused without outputs or a run: %+v", d.Node, d)
				}
			}
		})
	}
}

func TestFingerprintStable(t *testing.T) {
	p, _ := resumeSetup(t, "Fix it.", "aa")
	a := p.Node("a")
	f1, ok := planner.Fingerprint(a, nil, "")
	f2, _ := planner.Fingerprint(a, nil, "")
	if !ok || f1 != f2 || f1.Digest() != f2.Digest() || !strings.HasPrefix(f1.Digest(), "sha256:") {
		t.Errorf("Fingerprint is not stable: %+v %+v", f1, f2)
	}
	// b's ref and prompt are known only after a ran.
	if _, ok := planner.Fingerprint(p.Node("b"), nil, ""); ok {
		t.Error("a node with values known only after apply has a fingerprint")
	}
	// The run id and checkout filled in by the executor do not change it.
	c := *a.Container
	c.RunID, c.Checkout = "RUN9", "/state/checkouts/RUN9/a"
	filled := *a
	filled.Container = &c
	if f3, _ := planner.Fingerprint(&filled, nil, ""); f3 != f1 {
		t.Errorf("filling the placeholders changed the fingerprint: %+v", f3)
	}
}
