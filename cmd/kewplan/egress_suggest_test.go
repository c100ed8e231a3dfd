package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// TestEgressSuggest: a run's denials become sandbox and node egress blocks that kewplan fmt leaves unchanged and
// that load as configuration; --json says the same; no file changes.
func TestEgressSuggest(t *testing.T) {
	state := t.TempDir()
	l, err := ledger.Open(statedir.Dir{Root: state}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	const run = "20261203T000000Z-abcdef"
	now := time.Now()
	if err := l.StartRun(ledger.RunRecord{ID: run, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"fix", "review"} {
		if err := l.RecordNode(&ledger.NodeResult{RunID: run, Node: n, Runner: "claude-code", Protocol: "claude-code", Status: ledger.StatusSucceeded, Started: now, Ended: now, Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []ledger.EgressDenial{
		{Node: "fix", Method: "CONNECT", Host: "pypi.org", Port: 443, Reason: egress.ReasonHostNotAllowed},
		{Node: "review", Method: "CONNECT", Host: "pypi.org", Port: 443, Reason: egress.ReasonHostNotAllowed},
		{Node: "fix", Method: "CONNECT", Host: "git.example.com", Port: 22, Reason: egress.ReasonHostNotAllowed},
		{Node: "review", Method: "CONNECT", Host: "1.2.3.4", Port: 443, Reason: egress.ReasonIPLiteral},
		{Node: "", Method: "CONNECT", Host: "evil\x1b[2J.example", Port: 443, Reason: egress.ReasonNoCredentials},
	} {
		d.RunID, d.Time = run, now
		if err := l.RecordEgressDenial(d); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	before, _ := os.ReadFile(statedir.Dir{Root: state}.Ledger())

	var out, errb bytes.Buffer
	if code := run_([]string{"egress", "suggest", "--state-dir", state, run}, &out, &errb); code != 0 {
		t.Fatalf("egress suggest: exit %d: %s", code, errb.String())
	}
	hcl := out.String()
	for _, want := range []string{"sandbox {\n  egress {\n    allow = [\"pypi.org\"]", "node \"fix\" {\n  egress {\n    allow = [\"git.example.com:22\"]", "1.2.3.4:443"} {
		if !strings.Contains(hcl, want) {
			t.Errorf("egress suggest output lacks %q:\n%s", want, hcl)
		}
	}
	if strings.Contains(hcl, "\x1b") {
		t.Errorf("egress suggest output holds a terminal escape:\n%q", hcl)
	}

	// kewplan fmt --check leaves it as it is.
	var fmtOut, fmtErr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(hcl), Stdout: &fmtOut, Stderr: &fmtErr}
	if err := (&FmtCmd{Paths: []string{"-"}, Check: true}).Run(env); err != nil {
		t.Errorf("kewplan fmt --check on the suggestion: %v (%s%s)", err, fmtOut.String(), fmtErr.String())
	}
	// It loads as configuration, beside a node that completes it.
	dir := t.TempDir()
	node := func(name string) string {
		return "node \"" + name + "\" {\n  runner = \"claude-code\"\n  model = \"m\"\n  repo = \"https://github.com/acme/widgets.git\"\n  prompt = \"p\"\n}\n"
	}
	// Its node blocks hold only egress, to merge into the node blocks the configuration has; its sandbox block
	// loads as it is, beside whole nodes.
	sandbox := hcl[:strings.Index(hcl, "node \"fix\"")]
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(sandbox+node("fix")+node("review")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, diags := config.Load(dir); diags.HasErrors() {
		t.Errorf("the suggested sandbox block does not load: %v", diags)
	}

	out.Reset()
	if code := run_([]string{"egress", "suggest", "--json", "--state-dir", state, run, "fix"}, &out, &errb); code != 0 {
		t.Fatalf("egress suggest --json: exit %d: %s", code, errb.String())
	}
	var doc struct {
		RunID   string `json:"run_id"`
		Sandbox struct {
			Allow []string `json:"allow"`
		} `json:"sandbox"`
		Nodes []struct {
			Node  string   `json:"node"`
			Allow []string `json:"allow"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.RunID != run || len(doc.Sandbox.Allow) != 0 || len(doc.Nodes) != 1 || doc.Nodes[0].Node != "fix" ||
		strings.Join(doc.Nodes[0].Allow, ",") != "git.example.com:22,pypi.org" {
		t.Errorf("egress suggest --json fix: %s", out.String())
	}
	if code := run_([]string{"egress", "suggest", "--state-dir", state, run, "ghost"}, &out, &errb); code == 0 {
		t.Error("egress suggest of an unknown node succeeded")
	}
	after, _ := os.ReadFile(statedir.Dir{Root: state}.Ledger())
	if !bytes.Equal(before, after) {
		t.Error("egress suggest changed the ledger")
	}
}
