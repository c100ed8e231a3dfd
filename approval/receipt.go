package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/internal/strictjson"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
)

// ReceiptFormat identifies a receipt. Format 2 records what the run required (the organisation policy enforced,
// each approvals block, the allowed signers entry of each approver); a format 1 receipt, which did not, is
// refused by VerifyReceipt with a sentence saying so, since nothing can say what its run asked for.
const ReceiptFormat = "kewplan-receipt/2"

// SignatureSuffix names a receipt's signature: RECEIPT.sig, an armored SSH signature over the receipt's exact
// bytes, so `ssh-keygen -Y verify -n kewplan-receipt -s RECEIPT.sig < RECEIPT` checks it too.
const SignatureSuffix = ".sig"

// maxReceiptBytes bounds a receipt read back.
const maxReceiptBytes = 64 << 20

// Receipt is the record of one apply: which plan ran, who approved it, and per node what ran and what came of it.
type Receipt struct {
	Format         string    `json:"format"`
	KewplanVersion string    `json:"kewplan_version"`
	RunID          string    `json:"run_id"`
	Status         string    `json:"status"`
	Started        time.Time `json:"started"`
	// Ended is when the run ended; null in a start receipt (status running).
	Ended *time.Time `json:"ended"`
	// InterruptedSince is, for a run whose apply died (status interrupted), the last thing recorded of it: when
	// its apply was last known alive. Such a receipt is written after the fact by the next command, unsigned.
	InterruptedSince *time.Time  `json:"interrupted_since,omitempty"`
	Plan             ReceiptPlan `json:"plan"`
	// Policy is the organisation policy apply enforced (--policy or KEWPLAN_POLICY), or Enforced false.
	Policy ReceiptPolicy `json:"policy"`
	// Requirements are the approvals blocks apply checked, in order: the configuration's own policy's and the
	// organisation policy's (or, without one, the policy the saved plan recorded, which it chose itself).
	Requirements []Requirement `json:"requirements"`
	// Approvals are the approvals that counted, each with the allowed signers entry that matched.
	Approvals []Approval    `json:"approvals"`
	Nodes     []ReceiptNode `json:"nodes"`
	// EgressDeniedTotal counts every request the egress proxy refused during the run.
	EgressDeniedTotal int `json:"egress_denied_total"`
}

// ReceiptPlan names the plan that ran.
type ReceiptPlan struct {
	Digest string `json:"digest"` // planfile.Digest: what the approvals sign
	File   string `json:"file,omitempty"`
	Saved  bool   `json:"saved"` // false for `apply DIR`, which no one approved beforehand
}

// ReceiptPolicy is the organisation policy an apply enforced: the file given to apply and the SHA-256 of its
// bytes. Enforced is false (and Path and SHA256 empty) when apply was given none.
type ReceiptPolicy struct {
	Enforced bool   `json:"enforced"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// The sources of a Requirement.
const (
	SourceConfiguration = "configuration" // the configuration's own policy block
	SourcePolicy        = "policy"        // the organisation policy given to apply
	SourceSavedPlan     = "saved-plan"    // the policy a saved plan recorded, checked when apply was given none
)

// Requirement is one approvals block as an apply checked it: where it is, how many approvals it asks for and
// when, whose keys count, and whether it applied to this run (a "widening" block does not when nothing widens
// against apply --base).
type Requirement struct {
	Source         string `json:"source"` // SourceConfiguration, SourcePolicy or SourceSavedPlan
	Block          string `json:"block"`  // file:line of the approvals block
	Required       int    `json:"required"`
	When           string `json:"when"`
	AllowedSigners string `json:"allowed_signers"`
	Applied        bool   `json:"applied"`
}

// Gate is what apply's approval gate decided, for the receipt.
type Gate struct {
	Plan         ReceiptPlan
	Policy       ReceiptPolicy
	Requirements []Requirement
	Approvals    []Approval
}

// ReceiptNode is what one node ran and what came of it.
type ReceiptNode struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Image   string `json:"image"`
	ImageID string `json:"image_id"` // the image that ran, as the engine resolved it
	// ArgvSHA256 is SHA-256 over the argv that ran, each word followed by a NUL byte (ArgvDigest).
	ArgvSHA256 string `json:"argv_sha256"`
	BaseCommit string `json:"base_commit,omitempty"`
	// Commit is the commit the node pushed (Pushed), or the one it left unpublished; empty when the base was kept.
	Commit        string   `json:"commit,omitempty"`
	Branch        string   `json:"branch,omitempty"`
	Pushed        bool     `json:"pushed"`
	Verdict       string   `json:"verdict,omitempty"`
	Status        string   `json:"status"`
	Reason        string   `json:"reason,omitempty"`
	ExitCode      *int64   `json:"exit_code"`
	InputTokens   int64    `json:"input_tokens"`
	OutputTokens  int64    `json:"output_tokens"`
	CacheRead     int64    `json:"cache_read_tokens"`
	CacheWrite    int64    `json:"cache_write_tokens"`
	CostUSD       *float64 `json:"cost_usd"`
	CostSource    string   `json:"cost_source,omitempty"`
	EgressDenials int      `json:"egress_denials"`
	Attempts      int      `json:"attempts"`
	ReusedFrom    string   `json:"reused_from,omitempty"`
}

// ArgvDigest is a receipt's argv_sha256 of argv.
func ArgvDigest(argv []string) string {
	h := sha256.New()
	for _, w := range argv {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NewReceipt is the receipt of the apply sum closed, with what its approval gate g decided.
func NewReceipt(sum *executor.ApplySummary, g Gate, version string) *Receipt {
	denials := map[string]int{}
	for _, d := range sum.EgressDenials {
		denials[d.Node]++
	}
	ended := sum.Ended.UTC()
	r := StartReceipt(sum.RunID, sum.Started, g, version)
	r.Status, r.Ended, r.EgressDeniedTotal = sum.Status, &ended, sum.EgressDeniedTotal
	for i := range sum.Nodes {
		r.Nodes = append(r.Nodes, receiptNode(&sum.Nodes[i], denials[sum.Nodes[i].Node]))
	}
	sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	return r
}

// StartReceipt is the receipt an apply writes when its run starts, before any node runs (status running, no
// nodes): the plan that runs and who approved it, signed like the final receipt. Should the apply die, it is what
// the receipt of its run is made from (LedgerReceipt).
func StartReceipt(runID string, started time.Time, g Gate, version string) *Receipt {
	r := &Receipt{
		Format: ReceiptFormat, KewplanVersion: version, RunID: runID, Status: ledger.RunRunning,
		Started: started.UTC(), Plan: g.Plan, Policy: g.Policy,
		Requirements: g.Requirements, Approvals: g.Approvals, Nodes: []ReceiptNode{},
	}
	if r.Approvals == nil {
		r.Approvals = []Approval{}
	}
	if r.Requirements == nil {
		r.Requirements = []Requirement{}
	}
	return r
}

// LedgerReceipt is the receipt of a run whose apply died before it wrote its own (killed, out of memory, its
// machine down): the plan, policy and approvals its start receipt recorded, the run's status and end as the
// ledger holds them (an interrupted run's end is the last thing recorded of it, its InterruptedSince), and each
// node as the ledger holds it (denials counts the egress denials by node).
func LedgerReceipt(start *Receipt, run *ledger.RunRecord, nodes []ledger.NodeRecord, denials map[string]int) *Receipt {
	r := *start
	r.Status, r.Nodes, r.EgressDeniedTotal = run.Status, []ReceiptNode{}, 0
	if run.EndedAt != nil {
		ended := run.EndedAt.UTC()
		r.Ended = &ended
		if run.Status == ledger.RunInterrupted {
			r.InterruptedSince = &ended
		}
	}
	for i := range nodes {
		n := &nodes[i]
		res := ledger.NodeResult{RunID: n.RunID, Node: n.Node, Role: n.Role, Image: n.Image, ImageID: n.ImageID,
			BaseCommit: n.BaseCommit, Commit: n.Commit, Branch: n.Branch, Pushed: n.Pushed, Status: n.Status,
			Reason: n.Reason, ExitCode: n.ExitCode, Argv: n.Argv, Attempts: n.Attempts, ReusedFrom: n.ReusedFrom}
		res.Totals.InputTokens, res.Totals.OutputTokens = n.InputTokens, n.OutputTokens
		res.Totals.CacheReadTokens, res.Totals.CacheWriteTokens = n.CacheReadTokens, n.CacheWriteTokens
		rn := receiptNode(&res, denials[n.Node])
		rn.CostUSD, rn.CostSource = n.CostUSD, n.CostSource
		if n.Verdict != "" {
			rn.Verdict = n.Verdict
		}
		r.Nodes = append(r.Nodes, rn)
		r.EgressDeniedTotal += denials[n.Node]
	}
	sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	return &r
}

// ReadReceipt reads a receipt kewplan wrote, strictly, without checking any signature (the receipt of a run
// whose apply died is made from its start receipt).
func ReadReceipt(name string) (*Receipt, error) {
	b, err := safefile.Read(name, maxReceiptBytes)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	return decodeReceipt(name, b)
}

func receiptNode(n *ledger.NodeResult, denials int) ReceiptNode {
	cost, source := n.RecordedCost()
	rn := ReceiptNode{
		Name: n.Node, Role: n.Role, Image: n.Image, ImageID: n.ImageID, BaseCommit: n.BaseCommit, Commit: n.Commit,
		Branch: n.Branch, Pushed: n.Pushed, Status: n.Status, Reason: n.Reason, ExitCode: n.ExitCode,
		InputTokens: n.Totals.InputTokens, OutputTokens: n.Totals.OutputTokens,
		CacheRead: n.Totals.CacheReadTokens, CacheWrite: n.Totals.CacheWriteTokens,
		CostUSD: cost, CostSource: source, EgressDenials: denials, Attempts: n.Attempts, ReusedFrom: n.ReusedFrom,
	}
	if len(n.Argv) > 0 {
		rn.ArgvSHA256 = ArgvDigest(n.Argv)
	}
	if n.Verdict != nil {
		rn.Verdict = n.Verdict.Verdict
	}
	return rn
}

// Marshal is the receipt's bytes as written: indented JSON and a newline.
func (r *Receipt) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteReceipt writes r to name (creating its directory) and, with signer set (not nil), its signature to
// name+SignatureSuffix.
func WriteReceipt(name string, r *Receipt, signer ssh.Signer) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return fmt.Errorf("write receipt: %w", err)
	}
	if signer != nil {
		sig, err := Sign(signer, ReceiptNamespace, b)
		if err != nil {
			return fmt.Errorf("sign receipt: %w", err)
		}
		if err := writeAtomic(name+SignatureSuffix, sig, 0o644); err != nil {
			return err
		}
	}
	return writeAtomic(name, b, 0o644)
}

// StartReceiptName is the start receipt beside the receipt name: RUN.start.json beside RUN.json.
func StartReceiptName(name string) string {
	return strings.TrimSuffix(name, ".json") + ".start.json"
}

// VerifiedReceipt is a receipt whose signature checked out, and who signed it.
type VerifiedReceipt struct {
	Receipt *Receipt
	Signer  Approval // Principals and Key of the signer; Signature is the receipt's
}

// ErrReceipt is wrapped by the errors of VerifyReceipt and MatchPlan.
var ErrReceipt = errors.New("receipt refused")

// VerifyReceipt reads the receipt name and its signature and checks that a key the allowed signers list for
// ReceiptNamespace at now signed the receipt's exact bytes.
func VerifyReceipt(name string, signers *AllowedSigners, now time.Time) (*VerifiedReceipt, error) {
	b, err := safefile.Read(name, maxReceiptBytes)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	armored, err := safefile.Read(name+SignatureSuffix, maxKeyBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if r, derr := decodeReceipt(name, b); derr == nil && r.Status == ledger.RunInterrupted {
			since := "an unknown time"
			if r.InterruptedSince != nil {
				since = r.InterruptedSince.UTC().Format(time.RFC3339)
			}
			return nil, fmt.Errorf("%w: %s is the receipt of run %s, interrupted since %s: its apply died before it could sign an outcome, and the command that wrote this receipt afterwards holds no key, so it is unsigned. What was approved to start is signed in %s: verify that",
				ErrReceipt, name, termsafe.String(r.RunID), since, StartReceiptName(name))
		}
		return nil, fmt.Errorf("%w: %s has no signature %s: sign receipts with kewplan apply --sign-receipt KEYFILE", ErrReceipt, name, name+SignatureSuffix)
	}
	if err != nil {
		return nil, fmt.Errorf("receipt signature: %w", err)
	}
	sig, err := parseSignature(armored)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrReceipt, name+SignatureSuffix, err)
	}
	key := Fingerprint(sig.PublicKey)
	if sig.Namespace != ReceiptNamespace {
		return nil, fmt.Errorf("%w: %s was signed for the namespace %q, not %q", ErrReceipt, name, sig.Namespace, ReceiptNamespace)
	}
	lines := signers.Lookup(sig.PublicKey)
	if len(lines) == 0 {
		return nil, fmt.Errorf("%w: %s was signed by the key %s, which is not in the allowed signers file %s", ErrReceipt, name, key, signers.Path)
	}
	if err := verifySignature(sig, ReceiptNamespace, b); err != nil {
		return nil, fmt.Errorf("%w: the signature of %s does not match its content (%v): the receipt was changed after it was signed", ErrReceipt, name, err)
	}
	var who *Signer
	reason := ""
	for i := range lines {
		if reason = lines[i].allows(ReceiptNamespace, now); reason == "" {
			who = &lines[i]
			break
		}
	}
	if who == nil {
		return nil, fmt.Errorf("%w: %s", ErrReceipt, reason)
	}
	r, err := decodeReceipt(name, b)
	if err != nil {
		return nil, err
	}
	return &VerifiedReceipt{Receipt: r, Signer: Approval{Principals: who.Principals, Key: key, KeyType: sig.PublicKey.Type(), Signature: string(armored)}}, nil
}

// decodeReceipt decodes a receipt's bytes strictly (internal/strictjson), after its format: a receipt of another
// format is refused with a sentence naming it.
func decodeReceipt(name string, b []byte) (*Receipt, error) {
	var head struct {
		Format string `json:"format"`
	}
	if json.Unmarshal(b, &head) == nil && head.Format != ReceiptFormat && strings.HasPrefix(head.Format, "kewplan-receipt/") {
		return nil, fmt.Errorf("%w: %s is a %s receipt, and this kewplan reads %s: receipts of that format do not record the policy and approvals their run required, so verify cannot check them. Verify it with the kewplan that wrote it (its kewplan_version)",
			ErrReceipt, name, termsafe.String(head.Format), ReceiptFormat)
	}
	var r Receipt
	if err := strictjson.Decode(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s is signed but is not a kewplan receipt (format %q): %v", ErrReceipt, name, ReceiptFormat, err)
	}
	if r.Format != ReceiptFormat {
		return nil, fmt.Errorf("%w: %s is signed but is not a kewplan receipt (format %q)", ErrReceipt, name, ReceiptFormat)
	}
	return &r, nil
}

// MatchPlan checks that r records a run of the plan doc whose digest is digest: the same digest, every node one
// of the plan's with the plan's image, and every recorded approval a valid signature over that digest.
func MatchPlan(r *Receipt, doc *jsonplan.Document, digest string) error {
	var problems []string
	if r.Plan.Digest != digest {
		problems = append(problems, fmt.Sprintf("it records the plan %s, and the plan given is %s", r.Plan.Digest, digest))
	}
	images := map[string]string{}
	for _, n := range doc.Nodes {
		images[n.Name] = n.Image
	}
	for _, n := range r.Nodes {
		img, ok := images[n.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("node %q is not in the plan", n.Name))
		case img != n.Image:
			problems = append(problems, fmt.Sprintf("node %q ran the image %s, and the plan gives %s", n.Name, n.Image, img))
		}
	}
	for i, a := range r.Approvals {
		sig, err := parseSignature([]byte(a.Signature))
		if err == nil && sig.Namespace != PlanNamespace {
			err = fmt.Errorf("signed for the namespace %q", sig.Namespace)
		}
		if err == nil {
			err = verifySignature(sig, PlanNamespace, []byte(digest))
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("its approval %d is not a signature over the plan (%v)", i+1, err))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the receipt does not match the plan: %s", ErrReceipt, strings.Join(problems, "; "))
}

// Demand is what `kewplan verify` asks of a receipt beyond its signature: the approvals block of the policy it
// was given (nil: none given, or the policy has none) and a least number of approvals (--require; 0: none).
type Demand struct {
	Approvals *DemandApprovals
	Require   int
}

// DemandApprovals is a policy's approvals block as verify reads it now: where it is, how many approvals it asks
// for and when, and the allowed signers whose keys count.
type DemandApprovals struct {
	Block    string
	Required int
	When     string // config.ApprovalsAlways, config.ApprovalsWidening or config.ApprovalsReview
	Signers  *AllowedSigners
}

// conditional reports whether an approvals block's when lets a run need no approvals: "widening" when nothing
// widened, "review" when also no review rule matched.
func conditional(when string) bool { return when == "widening" || when == "review" }

// CheckDemand checks that the run r records asked for, and counted, what d asks: every approval it counted is a
// signature over its plan's digest in PlanNamespace, by a key the demanded allowed signers list for that
// namespace; its run asked for at least as many approvals as the block (unless the block is "widening" and the
// run recorded that its plan widened nothing) and as --require; and it counted that many approvers. The error
// wraps ErrReceipt and names every shortfall.
func CheckDemand(r *Receipt, d Demand) error {
	var problems []string
	principals := map[string]bool{}
	for i, a := range r.Approvals {
		sig, err := parseSignature([]byte(a.Signature))
		if err == nil && sig.Namespace != PlanNamespace {
			err = fmt.Errorf("it was signed for the namespace %q", sig.Namespace)
		}
		if err == nil {
			err = verifySignature(sig, PlanNamespace, []byte(r.Plan.Digest))
		}
		if err == nil && Fingerprint(sig.PublicKey) != a.Key {
			err = fmt.Errorf("it names the key %s and was made by %s", a.Key, Fingerprint(sig.PublicKey))
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("its approval %d is not a signature over the plan %s it records (%v)", i+1, r.Plan.Digest, err))
			continue
		}
		if d.Approvals != nil {
			listed := false
			for _, s := range d.Approvals.Signers.Lookup(sig.PublicKey) {
				listed = listed || s.Namespaces == nil || matchPatternList(PlanNamespace, s.Namespaces)
			}
			if !listed {
				problems = append(problems, fmt.Sprintf("its approval %d (%s, key %s) is by a key the policy's allowed signers file %s does not list for %s",
					i+1, termsafe.String(a.Principals), a.Key, d.Approvals.Signers.Path, PlanNamespace))
				continue
			}
		}
		principals[a.Principals] = true
	}
	asked, widenedNothing := 0, false
	for _, q := range r.Requirements {
		if q.Applied {
			asked = max(asked, q.Required)
		} else if conditional(q.When) && d.Approvals != nil && q.Required >= d.Approvals.Required {
			widenedNothing = true
		}
	}
	if a := d.Approvals; a != nil && !(conditional(a.When) && widenedNothing && asked == 0) {
		if asked < a.Required {
			problems = append(problems, fmt.Sprintf("its run asked for %d %s, and the policy's approvals block at %s asks for %d",
				asked, plural(asked, "approval"), termsafe.String(a.Block), a.Required))
		}
		if len(principals) < a.Required {
			problems = append(problems, fmt.Sprintf("its run counted %d %s by the policy's allowed signers in %s, and the policy asks for %d",
				len(principals), plural(len(principals), "approver"), a.Signers.Path, a.Required))
		}
	}
	if d.Require > 0 {
		if asked < d.Require {
			problems = append(problems, fmt.Sprintf("its run asked for %d %s, and --require asks for %d", asked, plural(asked, "approval"), d.Require))
		}
		if len(principals) < d.Require {
			problems = append(problems, fmt.Sprintf("its run counted %d %s, and --require asks for %d", len(principals), plural(len(principals), "approver"), d.Require))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the receipt does not show the approvals asked for: %s", ErrReceipt, strings.Join(problems, "; "))
}
