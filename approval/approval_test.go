package approval

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/jsonplan"
)

// testKey is an ed25519 key made by ssh-keygen for the test.
type testKey struct {
	priv, pub string // file paths
	line      string // the public key line
	signer    ssh.Signer
}

func sshKeygen(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ssh-keygen is not installed")
		}
		t.Skip("ssh-keygen is not installed")
	}
	return p
}

func newKey(t *testing.T, dir, name string) testKey {
	t.Helper()
	priv := filepath.Join(dir, name)
	if out, err := exec.Command(sshKeygen(t), "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", priv).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(priv + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigner(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pub: priv + ".pub", line: strings.TrimSpace(string(pub)), signer: signer}
}

func signers(t *testing.T, dir, content string) *AllowedSigners {
	t.Helper()
	name := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadAllowedSigners(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func TestCheckApprovals(t *testing.T) {
	dir := t.TempDir()
	alice, bob, mallory := newKey(t, dir, "alice"), newKey(t, dir, "bob"), newKey(t, dir, "mallory")
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	allowed := signers(t, dir, "# approvers\nalice@example.com "+alice.line+"\n\nbob@example.com namespaces=\"kewplan-plan,git\" "+bob.line+"\n")
	entry := func(k testKey, ns, digest, signed string) Entry {
		sig, err := Sign(k.signer, ns, []byte(signed))
		if err != nil {
			t.Fatal(err)
		}
		return Entry{PlanDigest: digest, Key: Fingerprint(k.signer.PublicKey()), Signature: string(sig)}
	}
	ok := func(k testKey) Entry { return entry(k, PlanNamespace, digestA, digestA) }
	for _, tc := range []struct {
		name     string
		entries  []Entry
		signers  *AllowedSigners
		required int
		valid    int
		reason   string // in the refusal
	}{
		{"approved", []Entry{ok(alice)}, allowed, 1, 1, ""},
		{"two of two", []Entry{ok(alice), ok(bob)}, allowed, 2, 2, ""},
		{"no approval", nil, allowed, 1, 0, "holds 0 valid"},
		{"one of two", []Entry{ok(alice)}, allowed, 2, 1, "holds 1 valid"},
		{"not an allowed signer", []Entry{ok(mallory)}, allowed, 1, 0, "the key is not in the allowed signers file"},
		{"git namespace", []Entry{entry(alice, "git", digestA, digestA)}, allowed, 1, 0, `signed for the namespace "git", not "kewplan-plan"`},
		{"another plan", []Entry{entry(alice, PlanNamespace, digestB, digestB)}, allowed, 1, 0, "it approves the plan " + digestB + ", and this plan is " + digestA},
		{"digest relabelled", []Entry{entry(alice, PlanNamespace, digestA, digestB)}, allowed, 1, 0, "the signature does not verify over this plan's digest"},
		{"same approver twice", []Entry{ok(alice), ok(alice)}, allowed, 2, 1, "alice@example.com approved already (approval 1)"},
		{"expired", []Entry{ok(alice)}, signers(t, dir, "alice@example.com valid-before=\"20300101Z\" "+alice.line+"\n"), 1, 0,
			"the key of alice@example.com expired at 2030-01-01T00:00:00Z (valid-before on line 1"},
		{"not yet valid", []Entry{ok(alice)}, signers(t, dir, "alice@example.com valid-after=\"20310101\" "+alice.line+"\n"), 1, 0, "valid only after"},
		{"namespace not allowed", []Entry{ok(alice)}, signers(t, dir, "alice@example.com namespaces=\"git\" "+alice.line+"\n"), 1, 0,
			`limits alice@example.com to the namespaces "git"`},
		{"garbage", []Entry{{PlanDigest: digestA, Signature: "hello"}}, allowed, 1, 0, "not an SSH signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(digestA, &File{Format: FileFormat, Approvals: tc.entries}, tc.signers, tc.required, now)
			if len(r.Valid) != tc.valid {
				t.Errorf("valid approvals: got %d, want %d (%+v)", len(r.Valid), tc.valid, r.Rejected)
			}
			err := r.Err("p.approvals")
			switch {
			case tc.reason == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
				t.Errorf("error %v, want one containing %q", err, tc.reason)
			}
		})
	}
}

func TestParseAllowedSignersRefusals(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t, dir, "k")
	for _, tc := range []struct{ content, want string }{
		{"ca@example.com cert-authority " + k.line + "\n", "allowed signers file s:1: cert-authority is not supported"},
		{"# nothing\n", "lists no key"},
		{"alice\n", "s:1: a principal alone"},
		{"alice no-touch-required " + k.line + "\n", `the option "no-touch-required" is not one kewplan knows`},
		{"alice valid-before=\"2030\" " + k.line + "\n", "not a timestamp"},
		{"\"alice bob\" " + k.line + "\nbob ssh-ed25519 AAAAnope\n", "s:2: no public key"},
	} {
		if _, err := ParseAllowedSigners([]byte(tc.content), "s"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.content, err, tc.want)
		}
	}
	s, err := ParseAllowedSigners([]byte(`"alice@example.com,al@example.com" `+k.line+"\n"), "s")
	if err != nil || s.Signers[0].Principals != "alice@example.com,al@example.com" {
		t.Errorf("quoted principals: %+v %v", s, err)
	}
}

// TestSSHKeygenInterop: ssh-keygen -Y verify accepts kewplan's approval, and kewplan accepts ssh-keygen -Y sign's.
func TestSSHKeygenInterop(t *testing.T) {
	keygen := sshKeygen(t)
	dir := t.TempDir()
	alice := newKey(t, dir, "alice")
	allowedName := filepath.Join(dir, "allowed_signers")
	os.WriteFile(allowedName, []byte("alice@example.com "+alice.line+"\n"), 0o644)
	plan := filepath.Join(dir, "p.plan")
	e, err := Approve(plan, digestA, alice.signer)
	if err != nil {
		t.Fatal(err)
	}
	sigFile := filepath.Join(dir, "approval.sig")
	os.WriteFile(sigFile, []byte(e.Signature), 0o644)
	cmd := exec.Command(keygen, "-Y", "verify", "-f", allowedName, "-I", "alice@example.com", "-n", PlanNamespace, "-s", sigFile)
	cmd.Stdin = strings.NewReader(digestA)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify refused kewplan's approval: %v\n%s", err, out)
	}

	msg := filepath.Join(dir, "digest")
	os.WriteFile(msg, []byte(digestB), 0o644)
	if out, err := exec.Command(keygen, "-Y", "sign", "-f", alice.priv, "-n", PlanNamespace, msg).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	theirs, _ := os.ReadFile(msg + ".sig")
	allowed, _ := ReadAllowedSigners(allowedName)
	r := Check(digestB, &File{Approvals: []Entry{{PlanDigest: digestB, Signature: string(theirs)}}}, allowed, 1, time.Now())
	if err := r.Err("x"); err != nil {
		t.Fatalf("ssh-keygen's signature refused: %v", err)
	}
}

func TestApproveReplacesTheSameKey(t *testing.T) {
	dir := t.TempDir()
	alice, bob := newKey(t, dir, "alice"), newKey(t, dir, "bob")
	plan := filepath.Join(dir, "p.plan")
	for _, k := range []testKey{alice, bob, alice} {
		if _, err := Approve(plan, digestA, k.signer); err != nil {
			t.Fatal(err)
		}
	}
	f, err := ReadFile(PathFor(plan))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Approvals) != 2 || f.Approvals[0].Key != Fingerprint(bob.signer.PublicKey()) {
		t.Errorf("approvals: %+v", f.Approvals)
	}
}

func TestLoadSignerRefusesProtectedKey(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "k")
	if out, err := exec.Command(sshKeygen(t), "-q", "-t", "ed25519", "-N", "secret", "-f", priv).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := LoadSigner(priv, nil); err == nil || !strings.Contains(err.Error(), "add it to ssh-agent") {
		t.Errorf("error %v", err)
	}
	if _, err := LoadSigner(priv+".pub", nil); err == nil || !strings.Contains(err.Error(), "no ssh-agent is running") {
		t.Errorf("error %v", err)
	}
}

func TestReceiptSignedAndVerified(t *testing.T) {
	dir := t.TempDir()
	ops, other := newKey(t, dir, "ops"), newKey(t, dir, "other")
	allowed := signers(t, dir, "ci@example.com namespaces=\"kewplan-receipt\" "+ops.line+"\n")
	approvalEntry, err := Approve(filepath.Join(dir, "p.plan"), digestA, other.signer)
	if err != nil {
		t.Fatal(err)
	}
	exit := int64(0)
	sum := &executor.ApplySummary{
		RunID: "r1", Status: ledger.RunSucceeded,
		Nodes: []ledger.NodeResult{{Node: "fix", Image: "img@sha256:1", ImageID: "sha256:abc", Argv: []string{"docker", "run"},
			Commit: "c0ffee", Pushed: true, Status: "succeeded", ExitCode: &exit}},
		EgressDenials:     []ledger.EgressDenial{{Node: "fix", Host: "evil.example"}},
		EgressDeniedTotal: 1,
	}
	r := NewReceipt(sum, Gate{Plan: ReceiptPlan{Digest: digestA, File: "p.plan", Saved: true},
		Approvals: []Approval{{Principals: "o", Key: approvalEntry.Key, Signature: approvalEntry.Signature}}}, "test")
	name := filepath.Join(dir, "receipts", "r1.json")
	if err := WriteReceipt(name, r, ops.signer); err != nil {
		t.Fatal(err)
	}
	v, err := VerifyReceipt(name, allowed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := v.Receipt.Nodes[0]
	if v.Signer.Principals != "ci@example.com" || n.EgressDenials != 1 || n.ArgvSHA256 != ArgvDigest([]string{"docker", "run"}) || n.Commit != "c0ffee" {
		t.Errorf("verified receipt: %+v", v)
	}
	doc := &jsonplan.Document{Nodes: []jsonplan.NodeDocument{{Name: "fix", Image: "img@sha256:1"}}}
	if err := MatchPlan(v.Receipt, doc, digestA); err != nil {
		t.Errorf("MatchPlan: %v", err)
	}
	if err := MatchPlan(v.Receipt, doc, digestB); err == nil || !strings.Contains(err.Error(), "it records the plan "+digestA) {
		t.Errorf("MatchPlan over another digest: %v", err)
	}

	// ssh-keygen checks the same signature over the same bytes.
	cmd := exec.Command(sshKeygen(t), "-Y", "verify", "-f", allowed.Path, "-I", "ci@example.com", "-n", ReceiptNamespace, "-s", name+SignatureSuffix)
	b, _ := os.ReadFile(name)
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify: %v\n%s", err, out)
	}

	// One byte changed: refused.
	i := bytes.Index(b, []byte(`"c0ffee"`)) + 1
	b[i] ^= 1
	os.WriteFile(name, b, 0o644)
	if _, err := VerifyReceipt(name, allowed, time.Now()); err == nil || !strings.Contains(err.Error(), "the receipt was changed after it was signed") {
		t.Errorf("a changed receipt: %v", err)
	}
	// Unsigned, or signed by a key not listed: refused.
	os.Remove(name + SignatureSuffix)
	if _, err := VerifyReceipt(name, allowed, time.Now()); err == nil || !strings.Contains(err.Error(), "has no signature") {
		t.Errorf("unsigned: %v", err)
	}
	if err := WriteReceipt(name, r, other.signer); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyReceipt(name, allowed, time.Now()); err == nil || !strings.Contains(err.Error(), "not in the allowed signers file") {
		t.Errorf("another signer: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["format"] != ReceiptFormat {
		t.Errorf("receipt JSON: %v", err)
	}
}

// TestInterruptedReceipt: the receipt of a run whose apply died is made from its signed start receipt and the
// ledger: it says interrupted and since when, carries the approvals the start recorded, is unsigned, and verify
// says why and where the signed start is.
func TestInterruptedReceipt(t *testing.T) {
	dir := t.TempDir()
	ops := newKey(t, dir, "ops")
	allowed := signers(t, dir, "ci@example.com namespaces=\"kewplan-receipt\" "+ops.line+"\n")
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	gate := Gate{Plan: ReceiptPlan{Digest: digestA, File: "p.plan", Saved: true},
		Approvals: []Approval{{Principals: "alice", Key: "SHA256:k", Signature: "sig"}}}
	name := filepath.Join(dir, "receipts", "r1.json")
	start := StartReceiptName(name)
	if start != filepath.Join(dir, "receipts", "r1.start.json") {
		t.Fatalf("StartReceiptName(%s) = %s", name, start)
	}
	if err := WriteReceipt(start, StartReceipt("r1", started, gate, "test"), ops.signer); err != nil {
		t.Fatal(err)
	}
	v, err := VerifyReceipt(start, allowed, time.Now())
	if err != nil {
		t.Fatalf("the signed start receipt: %v", err)
	}
	if v.Receipt.Status != ledger.RunRunning || v.Receipt.Ended != nil || len(v.Receipt.Nodes) != 0 {
		t.Errorf("start receipt: %+v", v.Receipt)
	}

	sr, err := ReadReceipt(start)
	if err != nil {
		t.Fatal(err)
	}
	since := started.Add(90 * time.Second)
	cost := 0.5
	run := &ledger.RunRecord{ID: "r1", Status: ledger.RunInterrupted, StartedAt: started, EndedAt: &since}
	nodes := []ledger.NodeRecord{
		{RunID: "r1", Node: "fix", Role: "worker", Image: "img", Status: ledger.StatusInterrupted, Reason: "interrupted: last recorded at 10:01:30",
			BaseCommit: "b4se", InputTokens: 3, OutputTokens: 4, CostUSD: &cost, CostSource: ledger.CostReported, Attempts: 1},
		{RunID: "r1", Node: "docs", Role: "worker", Image: "img", Status: ledger.StatusSucceeded, Commit: "c0ffee", Pushed: true, Attempts: 1},
	}
	r := LedgerReceipt(sr, run, nodes, map[string]int{"fix": 2})
	if err := WriteReceipt(name, r, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReceipt(name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.RunInterrupted || got.InterruptedSince == nil || !got.InterruptedSince.Equal(since) ||
		got.Ended == nil || !got.Ended.Equal(since) || got.Plan != gate.Plan || len(got.Approvals) != 1 || got.EgressDeniedTotal != 2 {
		t.Errorf("interrupted receipt: %+v", got)
	}
	if len(got.Nodes) != 2 || got.Nodes[0].Name != "docs" || !got.Nodes[0].Pushed || got.Nodes[1].Status != ledger.StatusInterrupted ||
		got.Nodes[1].CostUSD == nil || *got.Nodes[1].CostUSD != cost || got.Nodes[1].EgressDenials != 2 {
		t.Errorf("interrupted receipt's nodes: %+v", got.Nodes)
	}
	b, _ := os.ReadFile(name)
	if !bytes.Contains(b, []byte(`"interrupted_since": "2026-12-01T10:01:30Z"`)) {
		t.Errorf("the receipt does not say since when:\n%s", b)
	}
	_, err = VerifyReceipt(name, allowed, time.Now())
	if err == nil || !strings.Contains(err.Error(), "interrupted since 2026-12-01T10:01:30Z") || !strings.Contains(err.Error(), start) {
		t.Errorf("verify of the interrupted receipt: %v", err)
	}
}
