package approval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

// TestCheckDemand: verify's --policy and --require fail a receipt whose run asked for fewer approvals, counted
// fewer, or counted an approval by a key the policy's allowed signers do not list.
func TestCheckDemand(t *testing.T) {
	dir := t.TempDir()
	alice, mallory := newKey(t, dir, "alice"), newKey(t, dir, "mallory")
	org := signers(t, dir, "alice@example.com "+alice.line+"\n")
	sign := func(k testKey, p string) Approval {
		e, err := Approve(filepath.Join(dir, p), digestA, k.signer)
		if err != nil {
			t.Fatal(err)
		}
		return Approval{Principals: strings.TrimSuffix(p, ".plan"), Key: e.Key, Signature: e.Signature}
	}
	byAlice, byMallory := sign(alice, "alice.plan"), sign(mallory, "mallory.plan")
	forged := byAlice
	forged.Key = byMallory.Key
	always := &DemandApprovals{Block: "policy.hcl:2", Required: 1, When: "always", Signers: org}
	widening := &DemandApprovals{Block: "policy.hcl:2", Required: 1, When: "widening", Signers: org}
	review := &DemandApprovals{Block: "policy.hcl:2", Required: 1, When: "review", Signers: org}
	asked := func(n int, applied bool, when string) []Requirement {
		return []Requirement{{Source: SourcePolicy, Block: "policy.hcl:2", Required: n, When: when, AllowedSigners: org.Path, Applied: applied}}
	}
	for _, tc := range []struct {
		name      string
		reqs      []Requirement
		approvals []Approval
		demand    Demand
		want      string // "" passes
	}{
		{name: "met", reqs: asked(1, true, "always"), approvals: []Approval{byAlice}, demand: Demand{Approvals: always}},
		{name: "no demand, no approvals", reqs: []Requirement{}},
		{name: "the run asked for none", reqs: []Requirement{}, demand: Demand{Approvals: always},
			want: "its run asked for 0 approvals, and the policy's approvals block at policy.hcl:2 asks for 1; its run counted 0 approvers"},
		{name: "an approval by a key the policy does not list", reqs: asked(1, true, "always"), approvals: []Approval{byMallory}, demand: Demand{Approvals: always},
			want: "its approval 1 (mallory, key " + byMallory.Key + ") is by a key the policy's allowed signers file"},
		{name: "a key named that did not sign", reqs: asked(1, true, "always"), approvals: []Approval{forged}, demand: Demand{Approvals: always},
			want: "its approval 1 is not a signature over the plan"},
		{name: "widening and nothing widened", reqs: asked(1, false, "widening"), demand: Demand{Approvals: widening}},
		{name: "review, and no review rule matched and nothing widened", reqs: asked(1, false, "review"), demand: Demand{Approvals: review}},
		{name: "review, applied and approved", reqs: asked(1, true, "review"), approvals: []Approval{byAlice}, demand: Demand{Approvals: review}},
		{name: "review not recorded", reqs: []Requirement{}, demand: Demand{Approvals: review}, want: "its run asked for 0 approvals"},
		{name: "widening not recorded", reqs: []Requirement{}, demand: Demand{Approvals: widening}, want: "its run asked for 0 approvals"},
		{name: "always, recorded as not applied", reqs: asked(1, false, "widening"), demand: Demand{Approvals: always}, want: "its run asked for 0 approvals"},
		{name: "require more", reqs: asked(1, true, "always"), approvals: []Approval{byAlice}, demand: Demand{Require: 2},
			want: "its run asked for 1 approval, and --require asks for 2; its run counted 1 approver, and --require asks for 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReceipt(&executor.ApplySummary{RunID: "r", Status: ledger.RunSucceeded},
				Gate{Plan: ReceiptPlan{Digest: digestA, Saved: true}, Requirements: tc.reqs, Approvals: tc.approvals}, "test")
			err := CheckDemand(r, tc.demand)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckDemand() = %v, want nil", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrReceipt) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckDemand() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestReadFileStrict: an approvals file with a duplicate, case-folded or unknown key is refused with its JSON
// path, so no entry can mean one thing to kewplan and another to a script that merged it.
func TestReadFileStrict(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ in, want string }{
		{`{"format":"kewplan-approvals/1","approvals":[],"approvals":[{}]}`, "$.approvals (line 1, column 48): the key \"approvals\" appears twice"},
		{`{"format":"kewplan-approvals/1","Approvals":[]}`, "$.Approvals (line 1, column 33): the key \"Approvals\" differs from the field \"approvals\" only by case"},
		{`{"format":"kewplan-approvals/1","approvals":[{"plan_digest":"x","note":"y"}]}`, "$.approvals[0].note"},
	} {
		name := filepath.Join(dir, "p.plan.approvals")
		os.WriteFile(name, []byte(tc.in), 0o644)
		if _, err := ReadFile(name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadFile(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestVerifyReceiptRefusesOtherFormats: a format 1 receipt (which did not record what its run required) is
// refused with a sentence naming its format; a receipt with a key of another case is refused with its path.
func TestVerifyReceiptRefusesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	ops := newKey(t, dir, "ops")
	allowed := signers(t, dir, "ci@example.com "+ops.line+"\n")
	for _, tc := range []struct{ in, want string }{
		{`{"format":"kewplan-receipt/1","run_id":"r"}`, "is a kewplan-receipt/1 receipt, and this kewplan reads kewplan-receipt/2"},
		{`{"format":"kewplan-receipt/2","policy":{"enforced":true},"Policy":{"enforced":false}}`, "$.Policy"},
	} {
		name := filepath.Join(dir, "r.json")
		os.WriteFile(name, []byte(tc.in), 0o644)
		sig, err := Sign(ops.signer, ReceiptNamespace, []byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(name+SignatureSuffix, sig, 0o644)
		if _, err := VerifyReceipt(name, allowed, timeNow()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("VerifyReceipt(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func timeNow() time.Time { return time.Now() }
