package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// TestRunsShowHTML: runs show --format html writes the page of a recorded run with its receipt's digest and
// signature file; --format json is --json's document; an unknown format is refused with the choices.
func TestRunsShowHTML(t *testing.T) {
	state := t.TempDir()
	dir := statedir.Dir{Root: state}
	l, err := ledger.Open(dir.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	const run = "20261203T000000Z-fedcba"
	now := time.Now()
	if err := l.StartRun(ledger.RunRecord{ID: run, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordNode(&ledger.NodeResult{RunID: run, Node: `fix["<b>x</b>"]`, Runner: "claude-code", Protocol: "claude-code", Status: ledger.StatusSucceeded, Started: now, Ended: now.Add(time.Second), Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishRun(run, ledger.RunSucceeded, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.MkdirAll(filepath.Dir(dir.Receipt(run)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.Receipt(run), []byte(`{"plan":{"digest":"sha256:feed"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.Receipt(run)+".sig", []byte("sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runCLI(t, &out, &errb, "runs", "show", run, "--state-dir", state, "--format", "html"); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	page := out.String()
	for _, want := range []string{"<!DOCTYPE html>", "fix[&#34;&lt;b&gt;x&lt;/b&gt;&#34;]", "sha256:feed", "signature file present"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>x</b>") {
		t.Errorf("a node name reached the page unescaped")
	}
	out.Reset()
	if code := runCLI(t, &out, &errb, "runs", "show", run, "--state-dir", state, "--format", "json"); code != 0 || !strings.HasPrefix(strings.TrimSpace(out.String()), "{") {
		t.Errorf("--format json: exit %d, %q", code, out.String())
	}
	errb.Reset()
	if code := runCLI(t, &out, &errb, "runs", "show", run, "--state-dir", state, "--format", "pdf"); code == 0 || !strings.Contains(errb.String(), "html") {
		t.Errorf("--format pdf: exit %d, %q; want a refusal naming the formats", code, errb.String())
	}
}

func runCLI(t *testing.T, stdout, stderr *bytes.Buffer, args ...string) int {
	t.Helper()
	return run(args, strings.NewReader(""), stdout, stderr)
}
