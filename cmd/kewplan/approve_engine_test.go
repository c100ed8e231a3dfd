package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/planner"
)

// TestApprovedPlanAppliesWithReceipt: on the real engine, an approved saved plan runs and leaves a signed receipt
// that verifies against the plan, and that is refused once one byte of it changed.
func TestApprovedPlanAppliesWithReceipt(t *testing.T) {
	eng := engineOrSkip(t)
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed")
	}
	dir, prefix := applyFixture(t, eng, `
runner "claude-code" {
  endpoints = []
}
node "%[1]sreview" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict\ntokens=5,6,7,8\ncost=0.25"
}
`)
	t.Setenv("ANTHROPIC_API_KEY", "sk-canary-never-printed")
	keys := t.TempDir()
	var signers, ciSigners string
	for _, name := range []string{"alice", "ci"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", filepath.Join(keys, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		pub, _ := os.ReadFile(filepath.Join(keys, name+".pub"))
		if name == "alice" {
			signers = "alice@example.com namespaces=\"kewplan-plan\" " + string(pub)
		} else {
			ciSigners = "ci@example.com namespaces=\"kewplan-receipt\" " + string(pub)
		}
	}
	org := filepath.Join(t.TempDir(), "org")
	os.MkdirAll(org, 0o755)
	os.WriteFile(filepath.Join(org, "allowed_signers"), []byte(signers), 0o644)
	os.WriteFile(filepath.Join(keys, "ci_signers"), []byte(ciSigners), 0o644)
	policy := filepath.Join(org, "policy.hcl")
	os.WriteFile(policy, []byte("policy {\n  approvals {\n    required        = 1\n    allowed_signers = \"allowed_signers\"\n  }\n}\n"), 0o644)
	plan := filepath.Join(dir, "review.plan")
	state := filepath.Join(dir, "state")
	mustKewplan(t, "plan", dir, "--policy", policy, "--out", plan)

	// Unapproved: refused before anything starts.
	if code, _, errs := kewplan(t, "apply", plan, "--state-dir", state); code != 1 || !strings.Contains(errs, "holds 0 valid") {
		t.Fatalf("unapproved apply: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(state); err == nil {
		t.Fatal("the unapproved apply made the state directory")
	}

	mustKewplan(t, "approve", plan, "--key", filepath.Join(keys, "alice"))
	out := mustKewplan(t, "apply", plan, "--policy", policy, "--state-dir", state, "--sign-receipt", filepath.Join(keys, "ci"))
	if !strings.Contains(out, "approved by alice@example.com") || !strings.Contains(out, "Receipt: ") ||
		!strings.Contains(out, "Organisation policy: "+policy+" (sha256 ") {
		t.Errorf("apply output:\n%s", out)
	}
	receipts, _ := filepath.Glob(filepath.Join(state, "receipts", "*.json"))
	starts, _ := filepath.Glob(filepath.Join(state, "receipts", "*.start.json"))
	if len(receipts) != 2 || len(starts) != 1 {
		t.Fatalf("receipts: %v, want the run's and its start receipt", receipts)
	}
	receipt := strings.TrimSuffix(starts[0], ".start.json") + ".json"
	// The start receipt, written before any node ran, is signed too and says the run started.
	out = mustKewplan(t, "verify", starts[0], "--allowed-signers", filepath.Join(keys, "ci_signers"), "--plan", plan)
	if !strings.Contains(out, "signed by ci@example.com") || !strings.Contains(out, ": running (written as the run started, before any node ran)") {
		t.Errorf("verify of the start receipt:\n%s", out)
	}
	out = mustKewplan(t, "verify", receipt, "--allowed-signers", filepath.Join(keys, "ci_signers"), "--plan", plan)
	if !strings.Contains(out, "signed by ci@example.com") || !strings.Contains(out, "Approved by: alice@example.com") ||
		!strings.Contains(out, prefix+"review  approved  verdict approve, exit 0, 5+6 tokens, $0.25, 0 egress denials, image sha256:") {
		t.Errorf("verify:\n%s", out)
	}
	var r approval.Receipt
	b, _ := os.ReadFile(receipt)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if n := r.Nodes[0]; r.Plan.Digest == "" || !r.Plan.Saved || len(r.Approvals) != 1 || n.ImageID == "" || n.ArgvSHA256 == "" || n.Verdict != "approve" {
		t.Errorf("receipt: %+v", r)
	}
	// The receipt says what was required: the policy enforced, its approvals block, and the allowed signers entry
	// each approver matched.
	polBytes, _ := os.ReadFile(policy)
	wantPolicy := approval.ReceiptPolicy{Enforced: true, Path: policy, SHA256: planner.SHA256Hex(polBytes)}
	wantReqs := []approval.Requirement{{Source: approval.SourcePolicy, Block: policy + ":2", Required: 1, When: "always",
		AllowedSigners: filepath.Join(org, "allowed_signers"), Applied: true}}
	if diff := cmp.Diff(wantPolicy, r.Policy); diff != "" {
		t.Errorf("receipt policy mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantReqs, r.Requirements); diff != "" {
		t.Errorf("receipt requirements mismatch (-want +got):\n%s", diff)
	}
	if a := r.Approvals[0]; a.Principals != "alice@example.com" || a.AllowedSigners != filepath.Join(org, "allowed_signers") || a.AllowedSignersLine != 1 {
		t.Errorf("receipt approval: %+v", a)
	}

	// verify --policy and --require: the policy the run enforced passes; asking for more approvals than the run
	// asked for, or a policy whose signers do not list the approver, fails.
	ci := filepath.Join(keys, "ci_signers")
	out = mustKewplan(t, "verify", receipt, "--allowed-signers", ci, "--policy", policy, "--require", "1")
	if !strings.Contains(out, "the very policy its run enforced") {
		t.Errorf("verify --policy:\n%s", out)
	}
	if code, _, errs := kewplan(t, "verify", receipt, "--allowed-signers", ci, "--require", "2"); code != 1 ||
		!strings.Contains(errs, "its run asked for 1 approval, and --require asks for 2") {
		t.Errorf("verify --require 2: exit %d\n%s", code, errs)
	}
	stricter := filepath.Join(org, "stricter.hcl")
	os.WriteFile(stricter, []byte("policy {\n  approvals {\n    required        = 2\n    allowed_signers = \"allowed_signers\"\n  }\n}\n"), 0o644)
	if code, _, errs := kewplan(t, "verify", receipt, "--allowed-signers", ci, "--policy", stricter); code != 1 ||
		!strings.Contains(errs, "its run asked for 1 approval, and the policy's approvals block at "+stricter+":2 asks for 2") {
		t.Errorf("verify --policy stricter: exit %d\n%s", code, errs)
	}
	others := filepath.Join(t.TempDir(), "others.hcl")
	os.WriteFile(filepath.Join(filepath.Dir(others), "allowed_signers"), []byte(ciSigners), 0o644)
	os.WriteFile(others, []byte("policy {\n  approvals {\n    required        = 1\n    allowed_signers = \"allowed_signers\"\n  }\n}\n"), 0o644)
	if code, _, errs := kewplan(t, "verify", receipt, "--allowed-signers", ci, "--policy", others); code != 1 ||
		!strings.Contains(errs, "is by a key the policy's allowed signers file") {
		t.Errorf("verify --policy with other signers: exit %d\n%s", code, errs)
	}

	// Another plan, or one byte of the receipt changed: refused.
	other := filepath.Join(dir, "other.plan")
	mustKewplan(t, "plan", dir, "--out", other)
	if code, _, errs := kewplan(t, "verify", receipt, "--allowed-signers", filepath.Join(keys, "ci_signers"), "--plan", other); code != 1 || !strings.Contains(errs, "the receipt does not match the plan") {
		t.Errorf("verify against another plan: exit %d\n%s", code, errs)
	}
	i := bytes.Index(b, []byte(`"succeeded"`)) + 1
	b[i] = 'S'
	os.WriteFile(receipt, b, 0o644)
	if code, _, errs := kewplan(t, "verify", receipt, "--allowed-signers", filepath.Join(keys, "ci_signers")); code != 1 || !strings.Contains(errs, "the receipt was changed after it was signed") {
		t.Errorf("verify a changed receipt: exit %d\n%s", code, errs)
	}
}
