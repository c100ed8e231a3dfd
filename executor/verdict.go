package executor

import "errors"

// Verdict values a reviewer may write in its sidecar.
const (
	VerdictApprove        = "approve"
	VerdictRequestChanges = "request_changes"
	VerdictReject         = "reject"
)

// Finding is one entry of a verdict's findings.
type Finding struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

// Verdict is a reviewer's verdict, read once from the host's own stored copy of the sidecar.
type Verdict struct {
	Verdict  string    `json:"verdict"`
	Summary  string    `json:"summary"`
	Findings []Finding `json:"findings"`
	// SHA256 is the hex digest of the stored bytes that were parsed.
	SHA256 string `json:"sha256"`
	// Location is where the sidecar was found, relative to the checkout root (".kew-review-verdict.json" at the
	// root; a subdirectory path when it was recovered there).
	Location  string `json:"location"`
	Recovered bool   `json:"recovered"`
	// StoredPath is the host copy under the state directory.
	StoredPath string `json:"stored_path"`
}

// ErrNoVerdict is wrapped by CollectVerdict when no sidecar exists anywhere it looks.
var ErrNoVerdict = errors.New("no verdict sidecar")

// CollectVerdict reads a reviewer's sidecar from checkout after its container is gone, stores a copy under
// storeDir, and parses the stored bytes. Any error means the node is held for a human.
// STUB: the reviewers work replaces this body.
func CollectVerdict(checkout, storeDir string) (*Verdict, error) {
	return nil, ErrNoVerdict
}
