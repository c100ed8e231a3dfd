//go:build linux

package executor

// Attacks and faults refused before any container starts: an image that would run the agent as root (C1), an
// impostor allowlist network (D2), an engine that does not answer (F10), a runtime the engine has not registered
// (C11).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/statedir"
)

// requirePreflightRefusal checks that apply refused with a preflight error containing every want, and made no
// checkout and no container.
func requirePreflightRefusal(c *advCase, f *fixture, sum *ApplySummary, err error, wants ...string) {
	c.t.Helper()
	if sum != nil {
		f.assertClean(sum.RunID)
		c.check(false, "apply ran: run %s ended %s", sum.RunID, sum.Status)
		return
	}
	var pe *PreflightError
	ok := errors.As(err, &pe)
	for _, w := range wants {
		ok = ok && err != nil && strings.Contains(err.Error(), w)
	}
	c.check(ok, "preflight refused: %v", err)
	_, statErr := os.Stat(filepath.Join(f.stateDir, "checkouts"))
	c.check(errors.Is(statErr, os.ErrNotExist), "no checkout was made")
}

// TestAdvRootImageRefused (C1, user): an image that would run the agent as root is refused before anything runs.
func TestAdvRootImageRefused(t *testing.T) {
	c := adv(t, "C1", "an image whose USER is root (or unset)",
		"apply refuses before any container starts; the agent never runs as uid 0")
	f := advFixture(t)
	ctx := context.Background()
	rootImage := "kewplan-test/hostile-root:" + randomSuffix()
	if err := f.eng.BuildImage(ctx, rootImage, map[string][]byte{"Dockerfile": []byte("FROM " + f.image + "\nUSER root\n")}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.eng.RemoveImage(context.Background(), rootImage) })
	f.image = rootImage
	cfg := f.config(advNode("root", "reviewer", "mode=probe\nverdict=approve", ""))
	sum, _, err := f.apply(ctx, cfg)
	requirePreflightRefusal(c, f, sum, err, rootImage, "as root")
}

// TestAdvImpostorNetwork (D2): a network with the allowlist's name that is not --internal is refused; a live
// control shows a container on it would reach the host's listener, which an internal network prevents (D3).
func TestAdvImpostorNetwork(t *testing.T) {
	c := adv(t, "D2", "a network with the allowlist's name that is not --internal",
		"apply refuses before any container starts; never falls back to another network")
	f := advFixture(t)
	ctx := context.Background()
	impostor := "kewplan-test-impostor-" + randomSuffix()
	if _, err := f.eng.CreateNetwork(ctx, impostor, false, map[string]string{"kewplan.test": "1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.eng.RemoveNetwork(context.Background(), impostor) })
	f.network = impostor
	cfg := f.config(advNode("net", "reviewer", "mode=succeed\nverdict=approve", ""))
	sum, _, err := f.apply(ctx, cfg)
	requirePreflightRefusal(c, f, sum, err, impostor, "not --internal", "docker network create --internal")
}

// TestAdvEngineUnavailable (F10): no engine answers at DOCKER_HOST.
func TestAdvEngineUnavailable(t *testing.T) {
	c := adv(t, "F10", "the Docker engine is unavailable (DOCKER_HOST names a dead socket, or a closed port)",
		"fails closed before anything runs, with a clear message; no checkout, no prompt file")
	for _, host := range []string{"unix://" + filepath.Join(t.TempDir(), "no-engine.sock"), "tcp://127.0.0.1:1"} {
		f := &fixture{t: t, dir: t.TempDir(), image: "kewplan-test/never-inspected:1", network: "kewplan-never", repo: testRepo(t), prefix: "t" + randomSuffix() + "-"}
		f.stateDir = filepath.Join(f.dir, statedir.DefaultName)
		cfg := f.config(advNode("x", "reviewer", "mode=succeed", ""))
		sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
			o.Environ = append(o.Environ, "DOCKER_HOST="+host)
		})
		requirePreflightRefusal(c, f, sum, err, "no Docker Engine answered", "start the Docker daemon")
	}
}

// TestAdvRuntimeRequest (C11): a node that asks for gVisor on an engine without it is refused in preflight, with
// how to register it, and never runs on runc instead. Where the engine has runsc, a runtime it lacks stands in for
// the missing one; the run under gVisor itself is TestRunscApplyProbe's (named in the catalogue).
func TestAdvRuntimeRequest(t *testing.T) {
	c := adv(t, "C11", "a node asks for a runtime the engine has not registered (gVisor's runsc where it is missing)",
		"refused in preflight with the fix; nothing runs, never a silent fallback to runc")
	f := advFixture(t)
	ctx := context.Background()
	names, _, err := f.eng.Runtimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing := "runsc"
	if slices.Contains(names, missing) {
		missing = "kewplan-absent-" + randomSuffix()
	}
	c.observe("the engine has %s; asking for %q", strings.Join(names, ", "), missing)
	cfg := f.config(advNode("rt", "reviewer", "mode=succeed\nverdict=approve", fmt.Sprintf("  runtime = %q\n", missing)))
	sum, _, err := f.apply(ctx, cfg)
	requirePreflightRefusal(c, f, sum, err, `the container runtime "`+missing+`"`, "is not registered with the Docker Engine",
		"kewplan never falls back to another runtime", "daemon.json")
}

// TestAdvRuntimeVersions (C12): the engine and runc versions against the CVE fix floors. kewplan cannot upgrade
// the host; it must say so on every apply, and the live attacks (D4 for CVE-2024-29018) show the exposure itself.
func TestAdvRuntimeVersions(t *testing.T) {
	c := adv(t, "C12", "record `docker version` and the runc version; compare with the CVE fix floors",
		"at or above the floors (runc 1.1.12 and 1.2.8, Docker 23.0.11/25.0.4/26.0.0), or every apply warns about each one below")
	for _, tc := range []struct {
		versions map[string]string
		want     int
	}{
		{map[string]string{"Engine": "20.10.24+dfsg1", "runc": "1.1.5+ds1"}, 2},
		{map[string]string{"Engine": "23.0.11", "runc": "1.1.12"}, 1},
		{map[string]string{"Engine": "24.0.9", "runc": "1.2.8"}, 1},
		{map[string]string{"Engine": "25.0.4", "runc": "1.3.2"}, 1},
		{map[string]string{"Engine": "26.1.0", "runc": "v1.3.3"}, 0},
		{map[string]string{"Engine": "28.2.2", "runc": "1.4.0"}, 0},
		{map[string]string{"Engine": "dev", "runc": ""}, 0},
	} {
		if got := docker.VersionFloorWarnings(tc.versions); len(got) != tc.want {
			t.Errorf("docker.VersionFloorWarnings(%v) = %q, want %d warnings", tc.versions, got, tc.want)
		}
	}
	f := advFixture(t)
	api := newEngineAPI(t)
	var version struct {
		Version    string
		Components []struct{ Name, Version string }
	}
	api.get(t, "/version", &version)
	versions := map[string]string{"Engine": version.Version}
	for _, comp := range version.Components {
		if comp.Name != "Engine" {
			versions[comp.Name] = comp.Version
		}
	}
	c.observe("engine %s, runc %s, containerd %s", versions["Engine"], versions["runc"], versions["containerd"])
	below := docker.VersionFloorWarnings(versions)
	cfg := f.config(advNode("v", "reviewer", "mode=succeed\nverdict=approve", ""))
	sr := &startRecorder{}
	sum, _, err := f.apply(context.Background(), cfg, withStartRecorder(sr))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	warnings := sr.text()
	for _, w := range below {
		what, _, _ := strings.Cut(w, ",")
		c.check(strings.Contains(warnings, what), "below the floor and warned: %s", what)
	}
	if len(below) == 0 {
		c.observe("every component is at or above its floor")
	}
}
