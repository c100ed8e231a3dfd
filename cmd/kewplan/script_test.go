package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kewplan": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs cmd/kewplan/testdata/script/*.txtar: the documentation of what a user types and sees.
// KEWPLAN_UPDATE=1 rewrites the scripts' expected output files (cmp) from what kewplan printed.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       os.Getenv("KEWPLAN_UPDATE") != "",
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
