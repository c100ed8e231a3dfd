package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRuntimeValues(t *testing.T) {
	const node = `node "a" {
  runner = "pi"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  %s
}
`
	tests := []struct {
		name        string
		sandbox     string // the sandbox block's body; no block when ""
		nodeAttr    string
		wantSandbox string
		wantNode    string
	}{
		{name: "default"},
		{name: "sandbox", sandbox: `runtime = "runsc"`, wantSandbox: "runsc"},
		{name: "node", nodeAttr: `runtime = "runsc"`, wantNode: "runsc"},
		{name: "node overrides sandbox", sandbox: `runtime = "runsc"`, nodeAttr: `runtime = "runc"`,
			wantSandbox: "runsc", wantNode: "runc"},
		{name: "node from a variable", nodeAttr: `runtime = var.rt`, wantNode: "kata-runtime"},
		{name: "dotted name", sandbox: `runtime = "io.containerd.runsc.v1"`, wantSandbox: "io.containerd.runsc.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "variable \"rt\" {\n  default = \"kata-runtime\"\n}\n"
			if tt.sandbox != "" {
				src += "sandbox {\n  " + tt.sandbox + "\n}\n"
			}
			src += strings.Replace(node, "%s", tt.nodeAttr, 1)
			path := filepath.Join(t.TempDir(), "main.hcl")
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, diags := fullCheck(path)
			if diags.HasErrors() {
				t.Fatalf("diagnostics: %v", diags)
			}
			vals, _ := cfg.ResolveVariables(VariableInputs{})
			ctx, _ := cfg.EvalContext(&Scope{Vars: vals})
			nv, diags := EvalNode(cfg.Nodes["a"], ctx)
			if diags.HasErrors() {
				t.Fatalf("EvalNode() diagnostics: %v", diags)
			}
			got := []string{cfg.Sandbox.Runtime, nv.Runtime}
			if diff := cmp.Diff([]string{tt.wantSandbox, tt.wantNode}, got); diff != "" {
				t.Errorf("runtime [sandbox node] mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckRuntimeName(t *testing.T) {
	tests := map[string]bool{ // value -> valid
		"runsc": true, "runc": true, "kata-runtime": true, "io.containerd.runsc.v1": true, "crun_2": true,
		"": false, "-runsc": false, "--privileged": false, ".runsc": false, "/usr/bin/runsc": false,
		"run sc": false, "runsc\n": false, "runsc\x1b[31m": false, "rünsc": false,
		strings.Repeat("r", maxRuntimeNameLen): true, strings.Repeat("r", maxRuntimeNameLen+1): false,
	}
	for value, valid := range tests {
		msg := checkRuntimeName(value, runtimeFix)
		if (msg == "") != valid {
			t.Errorf("checkRuntimeName(%q) = %q, want valid=%v", value, msg, valid)
		}
		for _, r := range msg {
			if r < 0x20 || r == 0x7f {
				t.Errorf("checkRuntimeName(%q) = %q: the detail holds a control character", value, msg)
			}
		}
	}
}
