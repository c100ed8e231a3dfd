package docker

import (
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

func TestRuntimeProblems(t *testing.T) {
	nodes := []*planner.NodePlan{
		{Name: "a"},
		{Name: "b", Runtime: "runsc"},
		{Name: `fix["api"]`, Runtime: "runsc", Container: &planner.Container{Runtime: "runsc"}},
		{Name: "k", Runtime: "kata"},
	}
	for _, tc := range []struct {
		name      string
		available []string
		want      []string
	}{
		{"all present", []string{"kata", "runc", "runsc"}, nil},
		{"runsc missing", []string{"kata", "runc"}, []string{`node "b", "fix[\"api\"]": the container runtime "runsc" (gVisor (runsc)) is not registered`}},
		{"none listed", nil, []string{`node "k": the container runtime "kata" (Kata Containers (kata))`, `(it has: none)`, `node "b", "fix[\"api\"]"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(runtimeProblems(nodes, tc.available, "unix:///var/run/docker.sock"), "\n")
			if len(tc.want) == 0 && got != "" {
				t.Errorf("problems: %s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems do not contain %q:\n%s", w, got)
				}
			}
		})
	}
	if fix := engine.RuntimeFix("runsc"); !strings.Contains(fix, "apt-get install runsc") || !strings.Contains(fix, `"runtimeArgs": ["--network=host"]`) ||
		!strings.Contains(fix, "scripts/runsc-setup.sh") || !strings.Contains(fix, "kill -HUP") {
		t.Errorf("RuntimeFix(runsc) lacks a step: %s", fix)
	}
}
