//go:build linux

package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// statuses lists a report's verdicts by row id, for one-line comparisons.
func statuses(checks []Check) map[int]Status {
	m := map[int]Status{}
	for _, c := range checks {
		m[c.ID] = c.Status
	}
	return m
}

func describe(checks []Check) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "\n  %d %-14s %s", c.ID, c.Status, c.Title)
		for _, e := range c.Evidence {
			fmt.Fprintf(&b, "\n      %s", e)
		}
	}
	return b.String()
}

func allPass(n int) map[int]Status {
	m := map[int]Status{}
	for i := 1; i <= n; i++ {
		m[i] = Pass
	}
	return m
}

func probeOpts(image, runner string) ProbeOptions {
	return ProbeOptions{Image: image, Runner: runner, Timeout: time.Minute}
}

func TestSmokeReferenceTestVariants(t *testing.T) {
	eng, imgs := conformTestImages(t)
	for _, tc := range []struct{ image, runner string }{
		{imgs.Claude, "claude-code"},
		{imgs.Opencode, "opencode"},
	} {
		t.Run(tc.runner, func(t *testing.T) {
			rep, err := Smoke(context.Background(), eng, probeOpts(tc.image, tc.runner))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(allPass(3), statuses(rep.Checks)); diff != "" || !rep.Passed {
				t.Errorf("Smoke(%s) verdicts mismatch (-want +got):\n%s%s", tc.image, diff, describe(rep.Checks))
			}
		})
	}
}

func TestConformReferenceTestVariants(t *testing.T) {
	eng, imgs := conformTestImages(t)
	for _, tc := range []struct{ image, runner string }{
		{imgs.Claude, "claude-code"},
		{imgs.Opencode, "opencode"},
	} {
		t.Run(tc.runner, func(t *testing.T) {
			t.Parallel()
			rep, err := Run(context.Background(), eng, Options{ProbeOptions: probeOpts(tc.image, tc.runner)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(allPass(7), statuses(rep.Rows)); diff != "" || !rep.Passed {
				t.Errorf("Conform(%s) verdicts mismatch (-want +got):\n%s%s", tc.image, diff, describe(rep.Rows))
			}
		})
	}
}

// Each deliberately broken image fails the row it breaks, and only that row: every other row still passes.
func TestConformBrokenVariants(t *testing.T) {
	eng, imgs := conformTestImages(t)
	for _, b := range brokenVariants {
		if b.Row == 0 {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rep, err := Run(context.Background(), eng, Options{ProbeOptions: probeOpts(imgs.Broken[b.Name], "claude-code")})
			if err != nil {
				t.Fatal(err)
			}
			want := allPass(7)
			want[b.Row] = Fail
			if diff := cmp.Diff(want, statuses(rep.Rows)); diff != "" || rep.Passed {
				t.Errorf("Conform(%s) verdicts mismatch (-want +got):\n%s%s", b.Name, diff, describe(rep.Rows))
			}
			out, _ := json.Marshal(rep)
			if strings.Contains(string(out), fakeBakedKey) || strings.Contains(string(out), "kewplan-conform-dummy-") {
				t.Errorf("Conform(%s) report prints a credential value:%s", b.Name, describe(rep.Rows))
			}
		})
	}
}

// An image for one runner checked as another is the #779 failure class: the probe, named after the runner's
// agent, is never reached, and what the image prints is not the runner's vocabulary.
func TestConformRunnerMismatch(t *testing.T) {
	eng, imgs := conformTestImages(t)
	rep, err := Run(context.Background(), eng, Options{ProbeOptions: probeOpts(imgs.Claude, "opencode")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]Status{
		RowImage: Pass, RowHardening: Pass, RowPromptMissing: NotVerifiable,
		RowHandoff: NotVerifiable, RowStdout: Fail, RowSidecar: NotVerifiable,
		RowCredentials: NotVerifiable,
	}
	if diff := cmp.Diff(want, statuses(rep.Rows)); diff != "" || rep.Passed {
		t.Errorf("Conform(claude image, --runner opencode) verdicts mismatch (-want +got):\n%s%s", diff, describe(rep.Rows))
	}
}

// An entrypoint that runs the agent by absolute path cannot be intercepted: every row that needs the probe is
// NOT VERIFIABLE, never PASS, and nothing fails either.
func TestConformAbsoluteAgentPath(t *testing.T) {
	eng, imgs := conformTestImages(t)
	rep, err := Run(context.Background(), eng, Options{ProbeOptions: probeOpts(imgs.Broken["absolute-agent-path"], "claude-code")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]Status{
		RowImage: Pass, RowHardening: Pass, RowPromptMissing: NotVerifiable,
		RowHandoff: NotVerifiable, RowStdout: Pass, RowSidecar: NotVerifiable,
		RowCredentials: NotVerifiable,
	}
	if diff := cmp.Diff(want, statuses(rep.Rows)); diff != "" || !rep.Passed {
		t.Errorf("Conform(absolute agent path) verdicts mismatch (-want +got):\n%s%s", diff, describe(rep.Rows))
	}
}

// TestConformTestImages builds the debootstrap base and every test image (make test-base runs it alone).
func TestConformTestImages(t *testing.T) {
	_, imgs := conformTestImages(t)
	t.Logf("reference test variants: %s, %s", imgs.Claude, imgs.Opencode)
	for _, b := range brokenVariants {
		what := fmt.Sprintf("must fail row %d", b.Row)
		if b.Row == 0 {
			what = "rows needing the probe are NOT VERIFIABLE"
		}
		t.Logf("variant %-24s %s (%s)", b.Name, imgs.Broken[b.Name], what)
	}
}
