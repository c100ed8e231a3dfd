package views

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/conform"
	"github.com/kewplan/kewplan/internal/testtools/golden"
)

// sampleConformReport has every verdict, a long evidence line, and container output carrying an escape sequence.
func sampleConformReport() *conform.Report {
	return &conform.Report{
		Image: "kew-agent:broken", ImageID: "sha256:0123456789abcdef0123456789abcdef", Runner: "claude-code",
		Protocol: "claude-code", Agent: "claude", Passed: false,
		Rows: []conform.Check{
			{ID: 1, Title: "Image configuration: non-root uid 1001, no credentials, workdir /work, an entrypoint", Status: conform.Pass,
				Evidence: []string{`It runs as USER "agent", uid 1001.`, "WORKDIR is /work."}},
			{ID: 2, Title: "Starts and runs under --read-only, --cap-drop ALL, no-new-privileges, --pids-limit, tmpfs /tmp and HOME", Status: conform.Fail,
				Evidence: []string{"Under the hardening it failed: it exited 1 before reaching the agent. Its stderr ended: \"\x1b[31mtouch: cannot touch '/var/lib/x': Read-only file system\"",
					"Without --read-only, --cap-drop, no-new-privileges and --pids-limit it reached the agent and exited 0."}},
			{ID: 4, Title: `Prompt on stdin, "$@" forwarded unmodified, no host-owned flag, git bootstrapped in the fresh HOME`, Status: conform.NotVerifiable,
				Evidence: []string{"The probe placed first on PATH was never run."}},
		},
	}
}

func sampleSmokeReport() *conform.SmokeReport {
	return &conform.SmokeReport{
		Image: "kew-agent:latest", ImageID: "sha256:fedcba9876543210", Runner: "claude-code", Passed: true,
		Argv: []string{"docker", "run", "--rm", "--read-only", "-v", "/tmp/kewplan smoke:/work", "--entrypoint", "/bin/sh", "kew-agent:latest", "--model", "m"},
		Checks: []conform.Check{
			{ID: 1, Title: "Mounted checkout at /work, the working directory", Status: conform.Pass, Evidence: []string{"Mounted."}},
			{ID: 2, Title: "Prompt file readable at /work/.kew-prompt.txt", Status: conform.Pass, Evidence: []string{"Read back."}},
			{ID: 3, Title: `Container args reach the entrypoint as "$@"`, Status: conform.Pass, Evidence: nil},
		},
	}
}

func TestConformReportViews(t *testing.T) {
	var human, color, js bytes.Buffer
	if err := conformReportHuman(&human, sampleConformReport(), false); err != nil {
		t.Fatal(err)
	}
	if err := conformReportHuman(&color, sampleConformReport(), true); err != nil {
		t.Fatal(err)
	}
	if err := conformReportJSON(&js, sampleConformReport()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "conform_human.golden"), human.Bytes())
	golden.Check(t, filepath.Join("testdata", "conform_color.golden"), color.Bytes())
	golden.Check(t, filepath.Join("testdata", "conform_json.golden"), js.Bytes())
	if bytes.Contains(human.Bytes(), []byte("\x1b")) {
		t.Error("the plain human view let an escape sequence through")
	}
	var doc conformJSON
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(conformCountsJSON{Pass: 1, Fail: 1, NotVerifiable: 1}, doc.Counts); diff != "" {
		t.Errorf("counts mismatch (-want +got):\n%s", diff)
	}
}

func TestSmokeReportViews(t *testing.T) {
	var human, js bytes.Buffer
	if err := smokeReportHuman(&human, sampleSmokeReport(), false); err != nil {
		t.Fatal(err)
	}
	if err := smokeReportJSON(&js, sampleSmokeReport()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "smoke_human.golden"), human.Bytes())
	golden.Check(t, filepath.Join("testdata", "smoke_json.golden"), js.Bytes())
}
