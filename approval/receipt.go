package approval

import (
	"bytes"
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
	"github.com/kewplan/kewplan/jsonplan"
)

// ReceiptFormat identifies a receipt.
const ReceiptFormat = "kewplan-receipt/1"

// SignatureSuffix names a receipt's signature: RECEIPT.sig, an armored SSH signature over the receipt's exact
// bytes, so `ssh-keygen -Y verify -n kewplan-receipt -s RECEIPT.sig < RECEIPT` checks it too.
const SignatureSuffix = ".sig"

// maxReceiptBytes bounds a receipt read back.
const maxReceiptBytes = 64 << 20

// Receipt is the record of one apply: which plan ran, who approved it, and per node what ran and what came of it.
type Receipt struct {
	Format         string        `json:"format"`
	KewplanVersion string        `json:"kewplan_version"`
	RunID          string        `json:"run_id"`
	Status         string        `json:"status"`
	Started        time.Time     `json:"started"`
	Ended          time.Time     `json:"ended"`
	Plan           ReceiptPlan   `json:"plan"`
	Approvals      []Approval    `json:"approvals"`
	Nodes          []ReceiptNode `json:"nodes"`
	// EgressDeniedTotal counts every request the egress proxy refused during the run.
	EgressDeniedTotal int `json:"egress_denied_total"`
}

// ReceiptPlan names the plan that ran.
type ReceiptPlan struct {
	Digest string `json:"digest"` // planfile.Digest: what the approvals sign
	File   string `json:"file,omitempty"`
	Saved  bool   `json:"saved"` // false for `apply DIR`, which no one approved beforehand
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

// NewReceipt is the receipt of the apply sum closed, of the plan plan with its valid approvals.
func NewReceipt(sum *executor.ApplySummary, plan ReceiptPlan, approvals []Approval, version string) *Receipt {
	denials := map[string]int{}
	for _, d := range sum.EgressDenials {
		denials[d.Node]++
	}
	r := &Receipt{
		Format: ReceiptFormat, KewplanVersion: version, RunID: sum.RunID, Status: sum.Status,
		Started: sum.Started.UTC(), Ended: sum.Ended.UTC(), Plan: plan, Approvals: approvals,
		EgressDeniedTotal: sum.EgressDeniedTotal,
	}
	if r.Approvals == nil {
		r.Approvals = []Approval{}
	}
	for i := range sum.Nodes {
		r.Nodes = append(r.Nodes, receiptNode(&sum.Nodes[i], denials[sum.Nodes[i].Node]))
	}
	sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	return r
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
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Format != ReceiptFormat {
		return nil, fmt.Errorf("%w: %s is signed but is not a kewplan receipt (format %q)", ErrReceipt, name, ReceiptFormat)
	}
	return &VerifiedReceipt{Receipt: &r, Signer: Approval{Principals: who.Principals, Key: key, KeyType: sig.PublicKey.Type(), Signature: string(armored)}}, nil
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
