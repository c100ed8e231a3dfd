package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/views"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kewplan": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		// kewplan-crash panics inside the same guard as run: what a user sees when kewplan has a bug.
		"kewplan-crash": func() {
			view := views.NewView(views.Streams{Stdout: os.Stdout, Stderr: os.Stderr})
			os.Exit(crashGuard(view, func() int { panic("index out of range [3] with length 3 \x1b]0;PWNED\a") }))
		},
	})
}

// TestAdvSavedPlanCannotChooseItsPolicy runs apply_policy_input.txtar alone, for the adversarial table: a saved
// plan edited so that jq and a lenient reader disagree about its policy is refused, and the organisation policy
// is apply's input (policy-mismatch).
func TestAdvSavedPlanCannotChooseItsPolicy(t *testing.T) {
	testscript.Run(t, testscript.Params{Files: []string{"testdata/script/apply_policy_input.txtar"}, RequireExplicitExec: true})
}

// TestScripts runs cmd/kewplan/testdata/script/*.txtar: the documentation of what a user types and sees.
// KEWPLAN_UPDATE=1 rewrites the scripts' expected output files (cmp) from what kewplan printed.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       golden.Updating(),
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			// Scripts that need the Docker engine reach it the way the user's shell does.
			for _, k := range []string{"DOCKER_HOST", "CI", "HOME"} {
				if v, ok := os.LookupEnv(k); ok {
					e.Setenv(k, v)
				}
			}
			return nil
		},
	})
}
