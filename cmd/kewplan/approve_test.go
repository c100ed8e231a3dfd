package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/approval"
)

// approvalFixture is a configuration whose image is not present anywhere and a --policy file asking for
// `required` approvals from alice and bob; the Docker host is a socket that does not exist, so an apply that got
// past the approval gate fails at preflight, and one refused by the gate never gets there.
type approvalFixture struct {
	dir                string
	alice, bob, mallor string // private key paths
}

func newApprovalFixture(t *testing.T, required int, when string) approvalFixture {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-engine.sock"))
	t.Setenv("ANTHROPIC_API_KEY", "sk-test-dummy")
	os.MkdirAll("org", 0o755)
	f := approvalFixture{dir: dir}
	var signers strings.Builder
	for _, k := range []struct {
		name string
		into *string
		list bool
	}{{"alice", &f.alice, true}, {"bob", &f.bob, true}, {"mallory", &f.mallor, false}} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k.name, "-f", k.name).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		*k.into = k.name
		if k.list {
			pub, _ := os.ReadFile(k.name + ".pub")
			signers.WriteString(k.name + "@example.com " + string(pub))
		}
	}
	writeFile(t, "org/allowed_signers", signers.String())
	writeFile(t, "org/policy.hcl", "policy {\n  approvals {\n    required        = "+string(rune('0'+required))+"\n    allowed_signers = \"allowed_signers\"\n    when            = \""+when+"\"\n  }\n}\n")
	writeFile(t, "main.hcl", `sandbox {
  memory = "1g"
  images = {
    claude-code = "kewplan-test/not-present@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}
variable "prompt" {
  type    = string
  default = "Fix the bug."
}
node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://example.invalid/widgets.git"
  prompt = var.prompt
}
`)
	return f
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kewplan runs one command line in process.
func kewplan(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func mustKewplan(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := kewplan(t, args...)
	if code != 0 {
		t.Fatalf("kewplan %v: exit %d\n%s%s", args, code, out, errs)
	}
	return out
}

// gateRefused asserts that apply stopped at the approval gate, naming want, with nothing started: no preflight
// (which would fail on the missing engine) and no state directory, so no ledger run.
func gateRefused(t *testing.T, plan, want string, extra ...string) {
	t.Helper()
	code, out, errs := kewplan(t, append([]string{"apply", plan}, extra...)...)
	if code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "preflight") {
		t.Fatalf("apply %s: exit %d, want 1 with %q and no preflight\nstdout:\n%s\nstderr:\n%s", plan, code, want, out, errs)
	}
	if _, err := os.Stat(".kewplan"); err == nil {
		t.Fatalf("apply %s made a state directory: something started", plan)
	}
}

// gatePassed asserts that apply went past the gate to preflight.
func gatePassed(t *testing.T, plan string, extra ...string) string {
	t.Helper()
	code, out, errs := kewplan(t, append([]string{"apply", plan}, extra...)...)
	if code != 1 || !strings.Contains(errs, "preflight found") {
		t.Fatalf("apply %s: exit %d, want preflight to fail on the missing engine\nstdout:\n%s\nstderr:\n%s", plan, code, out, errs)
	}
	os.RemoveAll(".kewplan") // for the next gateRefused's check
	return out
}

func TestApplyRefusesUnapprovedPlans(t *testing.T) {
	f := newApprovalFixture(t, 1, "always")
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--out", "fix.plan")

	// No approval at all, and an unsaved plan.
	gateRefused(t, "fix.plan", "the policy asks for 1 approval by the allowed signers in org/allowed_signers, and fix.plan.approvals holds 0 valid")
	gateRefused(t, ".", "only a saved plan can be approved", "--policy", "org/policy.hcl", "--auto-approve")

	// A key the allowed signers do not list.
	mustKewplan(t, "approve", "fix.plan", "--key", f.mallor)
	gateRefused(t, "fix.plan", "does not count: the key is not in the allowed signers file org/allowed_signers")

	// A signature made for git over the right digest.
	digest := approveDigest(t, "fix.plan", f.alice)
	os.Remove("fix.plan.approvals")
	writeFile(t, "digest", digest)
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "git", "-f", f.alice, "digest").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sig, _ := os.ReadFile("digest.sig")
	writeApprovals(t, "fix.plan.approvals", approval.Entry{PlanDigest: digest, Signature: string(sig)})
	gateRefused(t, "fix.plan", `it was signed for the namespace "git", not "kewplan-plan"`)

	// The approval of the previous plan copied beside a new one.
	os.Remove("fix.plan.approvals")
	mustKewplan(t, "approve", "fix.plan", "--key", f.alice)
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--var", "prompt=Fix the other bug.", "--out", "next.plan")
	copyFile(t, "fix.plan.approvals", "next.plan.approvals")
	gateRefused(t, "next.plan", "it approves the plan "+digest+", and this plan is sha256:")

	// The approved plan edited after signing (its nodes digest recomputed, so only the approval tells).
	editPlan(t, "fix.plan", "edited.plan")
	copyFile(t, "fix.plan.approvals", "edited.plan.approvals")
	gateRefused(t, "edited.plan", "it approves the plan "+digest)

	// Approved: apply goes on to preflight; show lists the approval.
	out := gatePassed(t, "fix.plan")
	if !strings.Contains(out, "approved by alice@example.com (ssh-ed25519 SHA256:") {
		t.Errorf("apply does not name the approval:\n%s", out)
	}
	if show := mustKewplan(t, "show", "fix.plan"); !strings.Contains(show, "Approvals (org/policy.hcl:2, signers org/allowed_signers): 1 valid, 1 required.") {
		t.Errorf("show:\n%s", show)
	}
}

func TestApplyRefusesOneOfTwoApprovals(t *testing.T) {
	f := newApprovalFixture(t, 2, "always")
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--out", "fix.plan")
	mustKewplan(t, "approve", "fix.plan", "--key", f.alice)
	gateRefused(t, "fix.plan", "the policy asks for 2 approvals by the allowed signers in org/allowed_signers, and fix.plan.approvals holds 1 valid")
	mustKewplan(t, "approve", "fix.plan", "--key", f.alice) // the same approver again does not count twice
	gateRefused(t, "fix.plan", "holds 1 valid")
	mustKewplan(t, "approve", "fix.plan", "--key", f.bob)
	gatePassed(t, "fix.plan")
}

func TestApplyAsksApprovalsOnlyWhenWidening(t *testing.T) {
	newApprovalFixture(t, 1, "widening")
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--out", "base.plan")
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--var", "prompt=Another prompt.", "--out", "head.plan")
	gateRefused(t, "head.plan", "holds 0 valid") // without --base kewplan cannot tell: it asks
	gatePassed(t, "head.plan", "--base", "base.plan")
	// A node whose image leaves its pinned digest widens exposure.
	b, _ := os.ReadFile("main.hcl")
	writeFile(t, "main.hcl", strings.Replace(string(b), "kewplan-test/not-present@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4", "kewplan-test/not-present:latest", 1))
	mustKewplan(t, "plan", "--policy", "org/policy.hcl", "--out", "wide.plan")
	gateRefused(t, "wide.plan", "holds 0 valid", "--base", "base.plan")
}

// approveDigest approves plan with key and returns the digest it signed.
func approveDigest(t *testing.T, plan, key string) string {
	t.Helper()
	out := mustKewplan(t, "approve", plan, "--key", key, "--json")
	var v struct {
		PlanDigest string `json:"plan_digest"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || !strings.HasPrefix(v.PlanDigest, "sha256:") {
		t.Fatalf("approve --json: %q %v", out, err)
	}
	return v.PlanDigest
}

func writeApprovals(t *testing.T, name string, entries ...approval.Entry) {
	t.Helper()
	b, _ := json.Marshal(approval.File{Format: approval.FileFormat, Approvals: entries})
	writeFile(t, name, string(b))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

// editPlan writes a copy of plan with its recorded targets changed from none to "fix": the same nodes, so the
// copy passes the integrity, staleness and re-plan checks, and only its digest tells it from the approved plan.
func editPlan(t *testing.T, from, to string) {
	t.Helper()
	raw, _ := os.ReadFile(from)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte(`"targets": []`), []byte(`"targets": ["fix"]`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("the plan records no empty targets to edit")
	}
	writeFile(t, to, string(edited))
}
