//go:build linux

package conform

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

// requireRunsc skips (locally) or fails (CI set) unless the engine lists gVisor's runsc.
func requireRunsc(t *testing.T, eng *engine.Engine) {
	t.Helper()
	names, _, err := eng.Runtimes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, planner.RuntimeRunsc) {
		return
	}
	msg := "the engine has no runsc runtime (it has " + strings.Join(names, ", ") + "); register it with `sudo scripts/runsc-setup.sh` (make test-deps does)"
	testkit.Need(t, msg)
}

// TestRunscSmokeAndConform runs smoke and conform against the reference test variants under gVisor: the contract's
// elements hold there exactly as under runc (every smoke element and every conform row passes), and the argv
// shown says --runtime runsc. Nothing in smoke or conform reads what gVisor legitimately reports differently
// (NoNewPrivs, Seccomp, EACCES on the read-only root), so no expectation changes.
func TestRunscSmokeAndConform(t *testing.T) {
	eng, imgs := conformTestImages(t)
	requireRunsc(t, eng)
	for _, tc := range []struct{ image, runner string }{{imgs.Claude, "claude-code"}, {imgs.Opencode, "opencode"}} {
		t.Run(tc.runner, func(t *testing.T) {
			o := probeOpts(tc.image, tc.runner)
			o.Runtime = planner.RuntimeRunsc
			smoke, err := Smoke(context.Background(), eng, o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(allPass(3), statuses(smoke.Checks)); diff != "" || !smoke.Passed {
				t.Errorf("Smoke(%s) under runsc (-want +got):\n%s%s", tc.image, diff, describe(smoke.Checks))
			}
			if i := slices.Index(smoke.Argv, "--runtime"); i < 0 || smoke.Argv[i+1] != "runsc" {
				t.Errorf("smoke's argv does not say --runtime runsc: %q", smoke.Argv)
			}
			rep, err := Run(context.Background(), eng, Options{ProbeOptions: o})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(allPass(7), statuses(rep.Rows)); diff != "" || !rep.Passed {
				t.Errorf("Conform(%s) under runsc (-want +got):\n%s%s", tc.image, diff, describe(rep.Rows))
			}
		})
	}
}

// TestRuntimeMissingSmokeConform: a runtime the engine lacks is refused before any container runs, with the fix.
func TestRuntimeMissingSmokeConform(t *testing.T) {
	eng, imgs := conformTestImages(t)
	o := probeOpts(imgs.Claude, "claude-code")
	o.Runtime = "kewplan-absent-" + nonce()[:8]
	want := `the container runtime "` + o.Runtime + `" is not registered with the Docker Engine`
	if _, err := Smoke(context.Background(), eng, o); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "daemon.json") {
		t.Errorf("Smoke under an absent runtime: %v", err)
	}
	if _, err := Run(context.Background(), eng, Options{ProbeOptions: o}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Conform under an absent runtime: %v", err)
	}
}
