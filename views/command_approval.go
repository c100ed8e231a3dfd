package views

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// Approve is the view of `kewplan approve`.
type Approve interface {
	Approved(plan, approvalsFile string, e approval.Entry, total int) error
}

// NewApprove returns approve's view: a sentence, or JSON.
func NewApprove(vt ViewType, s Streams) Approve { return &approveView{NewView(s), vt} }

type approveView struct {
	*View
	vt ViewType
}

// ApprovedJSON is `kewplan approve --json`.
type ApprovedJSON struct {
	Plan          string `json:"plan"`
	ApprovalsFile string `json:"approvals_file"`
	PlanDigest    string `json:"plan_digest"`
	Key           string `json:"key"`
	Approvals     int    `json:"approvals"`
}

func (v *approveView) Approved(plan, approvalsFile string, e approval.Entry, total int) error {
	if v.vt == viewJSON {
		return jsonstream.Indented(v.streams.Stdout, ApprovedJSON{Plan: plan, ApprovalsFile: approvalsFile, PlanDigest: e.PlanDigest, Key: e.Key, Approvals: total})
	}
	_, err := fmt.Fprintf(v.streams.Stdout, "Approved %s (plan digest %s) with the key %s.\n%s holds %d %s; apply counts those whose key the policy's allowed signers list.\n",
		termsafe.String(plan), e.PlanDigest, e.Key, termsafe.String(approvalsFile), total, plural(total, "approval", "approvals"))
	return err
}

// Verify is the view of `kewplan verify`.
type Verify interface {
	// Verified shows a verified receipt; plan and policy are what it was checked against ("" when not given),
	// policySHA the SHA-256 of the policy file given.
	Verified(name string, v *approval.VerifiedReceipt, plan, policy, policySHA string) error
}

// NewVerify returns verify's view: a summary, or JSON.
func NewVerify(vt ViewType, s Streams) Verify { return &verifyView{NewView(s), vt} }

type verifyView struct {
	*View
	vt ViewType
}

// VerifiedJSON is `kewplan verify --json`.
type VerifiedJSON struct {
	Receipt  string            `json:"receipt"`
	SignedBy approval.Approval `json:"signed_by"`
	Plan     string            `json:"plan,omitempty"` // the plan it was matched against
	// Policy is the policy file its approvals were checked against, PolicySHA256 the SHA-256 of its bytes, and
	// SamePolicy whether the run enforced exactly that file.
	Policy       string            `json:"policy,omitempty"`
	PolicySHA256 string            `json:"policy_sha256,omitempty"`
	SamePolicy   bool              `json:"same_policy"`
	Content      *approval.Receipt `json:"content"`
}

func (v *verifyView) Verified(name string, r *approval.VerifiedReceipt, plan, policy, policySHA string) error {
	same := policy != "" && r.Receipt.Policy.Enforced && r.Receipt.Policy.SHA256 == policySHA
	if v.vt == viewJSON {
		return jsonstream.Indented(v.streams.Stdout, VerifiedJSON{Receipt: name, SignedBy: r.Signer, Plan: plan,
			Policy: policy, PolicySHA256: policySHA, SamePolicy: same, Content: r.Receipt})
	}
	return buffered(v.streams.Stdout, func(w io.Writer) error {
		fmt.Fprintf(w, "Receipt %s: signed by %s (%s).\n", termsafe.String(name), termsafe.String(r.Signer.Principals), r.Signer.Key)
		if plan != "" {
			fmt.Fprintf(w, "It matches the plan %s (%s).\n", termsafe.String(plan), r.Receipt.Plan.Digest)
		}
		if policy != "" {
			how := "the very policy its run enforced"
			if !same {
				how = "not the policy its run enforced (its sha256 is another), and the run still meets it"
			}
			fmt.Fprintf(w, "Its approvals meet the policy %s (sha256 %s): %s.\n", termsafe.String(policy), policySHA, how)
		}
		WriteReceiptSummary(w, r.Receipt)
		return nil
	})
}

// WriteReceiptSummary writes a receipt for people: the run, the plan and its approvers, then a line per node. It
// is also what the CI example posts as a comment.
func WriteReceiptSummary(w io.Writer, r *approval.Receipt) {
	status := termsafe.String(r.Status)
	switch {
	case r.Status == ledger.RunInterrupted && r.InterruptedSince != nil:
		status += " since " + r.InterruptedSince.UTC().Format(time.RFC3339) + " (its apply died; the next command wrote this receipt)"
	case r.Status == ledger.RunRunning:
		status += " (written as the run started, before any node ran)"
	}
	fmt.Fprintf(w, "Run %s: %s, plan %s", termsafe.String(r.RunID), status, termsafe.String(r.Plan.Digest))
	if !r.Plan.Saved {
		fmt.Fprint(w, " (not a saved plan)")
	}
	fmt.Fprintln(w, ".")
	if r.Policy.Enforced {
		fmt.Fprintf(w, "Policy: %s (sha256 %s).\n", termsafe.String(r.Policy.Path), r.Policy.SHA256)
	} else {
		fmt.Fprintln(w, "Policy: none enforced (apply was given no --policy).")
	}
	for _, q := range r.Requirements {
		applied := "asked for"
		if !q.Applied {
			applied = "not asked for: nothing widened against --base"
		}
		fmt.Fprintf(w, "Required: %d %s, when %s (%s approvals block at %s, signers %s): %s.\n", q.Required,
			plural(q.Required, "approval", "approvals"), termsafe.String(q.When), termsafe.String(q.Source),
			termsafe.String(q.Block), termsafe.String(q.AllowedSigners), applied)
	}
	if len(r.Approvals) == 0 {
		fmt.Fprintln(w, "Approved by: nobody.")
	}
	for _, a := range r.Approvals {
		fmt.Fprintf(w, "Approved by: %s (%s, allowed signers %s:%d)\n", termsafe.String(a.Principals), a.Key,
			termsafe.String(a.AllowedSigners), a.AllowedSignersLine)
	}
	for _, n := range r.Nodes {
		what := "kept " + shortCommit(n.BaseCommit)
		switch {
		case n.Pushed:
			what = "pushed " + shortCommit(n.Commit)
		case n.Verdict != "":
			what = "verdict " + termsafe.String(n.Verdict)
		}
		exit := "no exit status"
		if n.ExitCode != nil {
			exit = fmt.Sprintf("exit %d", *n.ExitCode)
		}
		cost := "cost unknown"
		if n.CostUSD != nil {
			cost = money.USD(*n.CostUSD)
		}
		fmt.Fprintf(w, "  %s  %s  %s, %s, %d+%d tokens, %s, %d egress %s, image %s\n",
			termsafe.String(n.Name), termsafe.String(n.Status), what, exit, n.InputTokens, n.OutputTokens, cost,
			n.EgressDenials, plural(n.EgressDenials, "denial", "denials"), termsafe.String(n.ImageID))
	}
}

func shortCommit(c string) string {
	if c == "" {
		return "nothing"
	}
	if len(c) > 12 {
		return termsafe.String(c[:12])
	}
	return termsafe.String(c)
}

// Approvals is the view of a plan's approvals, in show and apply.
type Approvals interface {
	// Approvals lists the approvals that count and those that do not; where names the policy's approvals block.
	Approvals(where string, r *approval.Result, required bool) error
	// Unchecked says an approvals file exists but no policy names the signers to check it against.
	Unchecked(approvalsFile string, n int) error
	// ReceiptWritten names the receipt apply wrote.
	ReceiptWritten(path string, signed bool) error
	// Policy says which organisation policy apply enforces, or that it enforces none; recorded is the policy a
	// saved plan names ("" for none), which without --policy is only the plan's own choice.
	Policy(p approval.ReceiptPolicy, recorded string) error
}

// NewApprovals returns the approvals' view: lines for people, or one NDJSON event each (apply --json).
func NewApprovals(vt ViewType, s Streams) Approvals { return &approvalsView{NewView(s), vt} }

type approvalsView struct {
	*View
	vt ViewType
}

// ApprovalsEventJSON is the NDJSON event apply --json writes once the approvals were checked.
type ApprovalsEventJSON struct {
	Type     string           `json:"type"` // "approvals"
	Policy   string           `json:"policy"`
	Required bool             `json:"required"`
	Result   *approval.Result `json:"result"`
}

func (v *approvalsView) Approvals(where string, r *approval.Result, required bool) error {
	if v.vt == viewJSON {
		b, err := json.Marshal(ApprovalsEventJSON{Type: "approvals", Policy: where, Required: required, Result: r})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(v.streams.Stdout, "%s\n", b)
		return err
	}
	return buffered(v.streams.Stdout, func(w io.Writer) error {
		need := fmt.Sprintf("%d required", r.Required)
		if !required {
			need = fmt.Sprintf("%d required only when the plan widens exposure against apply --base", r.Required)
		}
		fmt.Fprintf(w, "Approvals (%s, signers %s): %d valid, %s.\n", termsafe.String(where), termsafe.String(r.Signers), len(r.Valid), need)
		fmt.Fprintf(w, "  plan digest %s (what kewplan approve signs)\n", r.Digest)
		for _, a := range r.Valid {
			fmt.Fprintf(w, "  approved by %s (%s %s)\n", termsafe.String(a.Principals), termsafe.String(a.KeyType), a.Key)
		}
		for _, rj := range r.Rejected {
			fmt.Fprintf(w, "  approval %d does not count: %s\n", rj.Entry, termsafe.String(rj.Reason))
		}
		return nil
	})
}

// PolicyEventJSON is the NDJSON event apply --json writes once it knows which organisation policy it enforces.
type PolicyEventJSON struct {
	Type     string `json:"type"` // "policy"
	Enforced bool   `json:"enforced"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Recorded string `json:"recorded,omitempty"` // the policy the saved plan names, when none is enforced
}

func (v *approvalsView) Policy(p approval.ReceiptPolicy, recorded string) error {
	if v.vt == viewJSON {
		ev := PolicyEventJSON{Type: "policy", Enforced: p.Enforced, Path: p.Path, SHA256: p.SHA256}
		if !p.Enforced {
			ev.Recorded = recorded
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(v.streams.Stdout, "%s\n", b)
		return err
	}
	return buffered(v.streams.Stdout, func(w io.Writer) error {
		if p.Enforced {
			fmt.Fprintf(w, "Organisation policy: %s (sha256 %s), enforced with its approvals.\n", termsafe.String(p.Path), p.SHA256)
			return nil
		}
		fmt.Fprintln(w, "Warning: no organisation policy was enforced: give --policy FILE (or KEWPLAN_POLICY) from a checkout the change cannot edit.")
		if recorded != "" {
			fmt.Fprintf(w, "  The plan names the policy %s, which it chose itself: it was checked, and guarantees nothing.\n", termsafe.String(recorded))
		}
		return nil
	})
}

func (v *approvalsView) Unchecked(approvalsFile string, n int) error {
	if v.vt == viewJSON {
		return nil
	}
	_, err := fmt.Fprintf(v.streams.Stdout, "%s holds %d %s, not checked: no policy of this plan asks for approvals.\n",
		termsafe.String(approvalsFile), n, plural(n, "approval", "approvals"))
	return err
}

func (v *approvalsView) ReceiptWritten(path string, signed bool) error {
	if v.vt == viewJSON {
		return nil // the receipt is at <state-dir>/receipts/RUN.json, RUN the apply_done event's run_id
	}
	how := "unsigned: give --sign-receipt KEYFILE to sign it"
	if signed {
		how = "signed, " + termsafe.String(path+approval.SignatureSuffix)
	}
	_, err := fmt.Fprintf(v.streams.Stdout, "Receipt: %s (%s).\n", termsafe.String(path), how)
	return err
}
