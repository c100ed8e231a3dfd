package plandiff

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

func TestCompareRuntime(t *testing.T) {
	fix := spec{name: "fix", memory: "4g", cpus: "2"}
	on := func(runtime string) jsonplan.NodeDocument { s := fix; s.runtime = runtime; return node(s) }
	tests := []struct {
		name       string
		base, head jsonplan.NodeDocument
		want       []brief
		message    string // a part of the finding's message
	}{
		{name: "gVisor to the engine's default", base: on("runsc"), head: on(""),
			want: []brief{{KindRuntimeWidened, "fix", "", true}}, message: "now shares the host's kernel while holding ANTHROPIC_API_KEY"},
		{name: "gVisor to runc named", base: on("runsc"), head: on("runc"),
			want: []brief{{KindRuntimeWidened, "fix", "", true}}, message: "from gVisor (runsc) to runc:"},
		{name: "gVisor to Kata", base: on("runsc"), head: on("kata-runtime"),
			want: []brief{{KindRuntimeWidened, "fix", "", true}}, message: "another kernel boundary"},
		{name: "between shared-kernel runtimes", base: on(""), head: on("crun"),
			want: []brief{{KindRuntimeWidened, "fix", "", true}}, message: "cannot show to isolate no less"},
		{name: "engine default to gVisor", base: on(""), head: on("runsc"),
			want: []brief{{KindRuntimeNarrowed, "fix", "", false}}, message: "a kernel of its own now stands"},
		{name: "runc to Kata", base: on("runc"), head: on("io.containerd.kata.v2"),
			want: []brief{{KindRuntimeNarrowed, "fix", "", false}}},
		{name: "unchanged", base: on("runsc"), head: on("runsc")},
		{name: "unchanged default", base: on(""), head: on("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compare("base.json", doc(tt.base), "head.json", doc(tt.head))
			if diff := cmp.Diff(tt.want, briefs(d.Exposure)); diff != "" {
				t.Errorf("Compare() exposure mismatch (-want +got):\n%s", diff)
			}
			if got, want := d.Widened(), len(tt.want) > 0 && tt.want[0].Widening; got != want {
				t.Errorf("Widened() = %v, want %v", got, want)
			}
			if tt.message != "" && (len(d.Exposure) == 0 || !strings.Contains(d.Exposure[0].Message, tt.message)) {
				t.Errorf("finding message = %v, want it to hold %q", d.Exposure, tt.message)
			}
			if len(tt.want) > 0 {
				if len(d.Changed) != 1 || len(d.Changed[0].Fields) == 0 || d.Changed[0].Fields[0].Field != "isolation" {
					t.Errorf("Changed = %+v, want an isolation field change", d.Changed)
				}
			}
		})
	}
}

// TestCompareRuntimeReadsArgv: the argv is what runs, so a hand-edited plan whose runtime field still says runsc
// while its argv lost --runtime is judged by the argv.
func TestCompareRuntimeReadsArgv(t *testing.T) {
	base := node(spec{name: "fix", runtime: "runsc"})
	head := node(spec{name: "fix", runtime: ""})
	head.Runtime, head.Isolation = "runsc", planner.IsolationTier("runsc")
	d := Compare("base.json", doc(base), "head.json", doc(head))
	want := []brief{{KindRuntimeWidened, "fix", "", true}}
	if diff := cmp.Diff(want, briefs(d.Exposure)); diff != "" {
		t.Errorf("Compare() exposure mismatch (-want +got):\n%s", diff)
	}

	// A node without argv (it has errors) falls back to the runtime field.
	base.Argv, head.Argv = nil, nil
	head.Runtime = ""
	d = Compare("base.json", doc(base), "head.json", doc(head))
	if diff := cmp.Diff(want, briefs(d.Exposure)); diff != "" {
		t.Errorf("Compare() without argv mismatch (-want +got):\n%s", diff)
	}

	// docker reads the last --runtime.
	argv := append([]string{"docker", "run", "--runtime", "runsc", "--runtime", "runc"}, node(spec{name: "x"}).Argv[2:]...)
	if got := nodeRuntime(&jsonplan.NodeDocument{Argv: argv}); got != "runc" {
		t.Errorf("nodeRuntime() = %q, want the last --runtime, runc", got)
	}
}

func TestRuntimeRuleInCatalogue(t *testing.T) {
	for _, r := range Rules() {
		if r.ID == KindRuntimeWidened {
			if r.Summary == "" || r.Description == "" || r.Help == "" || r.Severity != planner.SeverityError {
				t.Errorf("rule %+v: want an error with a summary, a description and help", r)
			}
			return
		}
	}
	t.Errorf("Rules() has no %s", KindRuntimeWidened)
}
