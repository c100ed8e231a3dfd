package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/internal/strictjson"
)

// FileSuffix names a plan's approvals file: PLANFILE.approvals.
const FileSuffix = ".approvals"

// FileFormat identifies an approvals file.
const FileFormat = "kewplan-approvals/1"

// maxApprovalsBytes bounds an approvals file: a few hundred bytes per approver.
const maxApprovalsBytes = 4 << 20

// File is a plan's approvals file: one entry per approver.
type File struct {
	Format    string  `json:"format"`
	Approvals []Entry `json:"approvals"`
}

// Entry is one approval: an armored SSH signature over PlanDigest in the namespace PlanNamespace. Key and
// PlanDigest are there for a reader (and for saying what a signature approves); the signature alone is trusted.
type Entry struct {
	PlanDigest string `json:"plan_digest"`
	Key        string `json:"key"` // the signing key's SHA256 fingerprint
	Signature  string `json:"signature"`
}

// PathFor is the approvals file of the plan file plan.
func PathFor(plan string) string { return plan + FileSuffix }

// ReadFile reads an approvals file, strictly (internal/strictjson: a duplicate, case-folded or unknown key is
// refused with its JSON path); a missing one holds no approvals.
func ReadFile(name string) (*File, error) {
	b, err := safefile.Read(name, maxApprovalsBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Format: FileFormat}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("approvals file: %w", err)
	}
	var f File
	if err := strictjson.Decode(b, &f); err != nil {
		return nil, fmt.Errorf("approvals file %s is not a kewplan approvals file: %v. Write it with kewplan approve (and merge approvals files entry by entry, each key once)", name, err)
	}
	if f.Format != FileFormat {
		return nil, fmt.Errorf("approvals file %s is not a kewplan approvals file (format %q): write it with kewplan approve", name, FileFormat)
	}
	return &f, nil
}

// Approve signs digest with signer and records the approval in the plan's approvals file, replacing an earlier
// approval by the same key (one per approver). The file is replaced atomically.
func Approve(plan, digest string, signer ssh.Signer) (Entry, error) {
	name := PathFor(plan)
	f, err := ReadFile(name)
	if err != nil {
		return Entry{}, err
	}
	armored, err := Sign(signer, PlanNamespace, []byte(digest))
	if err != nil {
		return Entry{}, err
	}
	e := Entry{PlanDigest: digest, Key: Fingerprint(signer.PublicKey()), Signature: string(armored)}
	kept := f.Approvals[:0]
	for _, old := range f.Approvals {
		if old.Key != e.Key {
			kept = append(kept, old)
		}
	}
	f.Approvals = append(kept, e)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return Entry{}, err
	}
	return e, writeAtomic(name, append(b, '\n'), 0o644)
}

// writeAtomic replaces name with b, so a reader never sees half a file.
func writeAtomic(name string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".kewplan-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// Approval is a valid approval: a key listed in the allowed signers signed the plan's digest.
type Approval struct {
	Principals string `json:"principals"` // as the allowed signers file lists them
	Key        string `json:"key"`        // SHA256 fingerprint
	KeyType    string `json:"key_type"`
	Signature  string `json:"signature"` // the armored signature, for a receipt's reader to check again
	// AllowedSigners and AllowedSignersLine are the allowed signers entry that matched: its file and line.
	AllowedSigners     string `json:"allowed_signers,omitempty"`
	AllowedSignersLine int    `json:"allowed_signers_line,omitempty"`
}

// Rejection is an approval that does not count, and why.
type Rejection struct {
	Entry  int    `json:"entry"` // 1-based, in the approvals file
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
}

// Result is the check of a plan's approvals against a requirement.
type Result struct {
	Digest   string      `json:"plan_digest"`
	Required int         `json:"required"`
	Signers  string      `json:"allowed_signers"`
	Valid    []Approval  `json:"valid"`
	Rejected []Rejection `json:"rejected"`
}

// Satisfied reports whether enough people approved.
func (r *Result) Satisfied() bool { return len(r.Valid) >= r.Required }

// ErrNotApproved is wrapped by Result.Err.
var ErrNotApproved = errors.New("the plan is not approved")

// Err says what is missing when the requirement is not met, nil when it is.
func (r *Result) Err(approvalsFile string) error {
	if r.Satisfied() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v: the policy asks for %d %s by the allowed signers in %s, and %s holds %d valid",
		ErrNotApproved, r.Required, plural(r.Required, "approval"), r.Signers, approvalsFile, len(r.Valid))
	for _, rj := range r.Rejected {
		fmt.Fprintf(&b, "; approval %d", rj.Entry)
		if rj.Key != "" {
			fmt.Fprintf(&b, " (key %s)", rj.Key)
		}
		fmt.Fprintf(&b, " does not count: %s", rj.Reason)
	}
	fmt.Fprintf(&b, ". Nothing was started. Ask %d more %s to review the plan and run kewplan approve PLANFILE --key KEY",
		r.Required-len(r.Valid), plural(r.Required-len(r.Valid), "approver"))
	return errors.New(b.String())
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Check checks the approvals of the plan whose digest is digest against the allowed signers at now: each entry
// counts when its signature is valid over digest in PlanNamespace, by a key the allowed signers list for that
// namespace at now, and its principals approved no earlier entry.
func Check(digest string, f *File, signers *AllowedSigners, required int, now time.Time) *Result {
	r := &Result{Digest: digest, Required: required, Signers: signers.Path}
	seen := map[string]int{}
	for i, e := range f.Approvals {
		a, reason := checkEntry(digest, e, signers, now)
		if reason == "" {
			if first, dup := seen[a.Principals]; dup {
				reason = fmt.Sprintf("%s approved already (approval %d): each approver counts once", a.Principals, first)
			} else {
				seen[a.Principals] = i + 1
				r.Valid = append(r.Valid, a)
				continue
			}
		}
		r.Rejected = append(r.Rejected, Rejection{Entry: i + 1, Key: a.Key, Reason: reason})
	}
	return r
}

// checkEntry returns the approval of e, or why it does not count (Key is filled when the signature parsed).
func checkEntry(digest string, e Entry, signers *AllowedSigners, now time.Time) (Approval, string) {
	sig, err := parseSignature([]byte(e.Signature))
	if err != nil {
		return Approval{}, err.Error()
	}
	a := Approval{Key: Fingerprint(sig.PublicKey), KeyType: sig.PublicKey.Type(), Signature: e.Signature}
	if sig.Namespace != PlanNamespace {
		return a, fmt.Sprintf("it was signed for the namespace %q, not %q: a signature made for another purpose (a git commit, a file) does not approve a plan",
			sig.Namespace, PlanNamespace)
	}
	if e.PlanDigest != digest {
		return a, fmt.Sprintf("it approves the plan %s, and this plan is %s: the plan was changed after it was approved, or the approval is for another plan",
			e.PlanDigest, digest)
	}
	lines := signers.Lookup(sig.PublicKey)
	if len(lines) == 0 {
		return a, fmt.Sprintf("the key is not in the allowed signers file %s", signers.Path)
	}
	if err := verifySignature(sig, PlanNamespace, []byte(digest)); err != nil {
		return a, fmt.Sprintf("the signature does not verify over this plan's digest %s (%v)", digest, err)
	}
	reason := ""
	for _, s := range lines {
		if reason = s.allows(PlanNamespace, now); reason == "" {
			a.Principals, a.AllowedSigners, a.AllowedSignersLine = s.Principals, signers.Path, s.Line
			return a, ""
		}
	}
	return a, reason
}
