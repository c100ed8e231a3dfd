package verdict

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// Verdict values a reviewer may write in its sidecar.
const (
	Approve        = "approve"
	RequestChanges = "request_changes"
	Reject         = "reject"
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

// Sentinel errors wrapped by Collect's *Error; any of them holds the node for a human.
var (
	// ErrNoVerdict: no sidecar exists anywhere Collect looks.
	ErrNoVerdict = errors.New("no verdict sidecar")
	// ErrRefused: a sidecar exists but is not a plain regular file that may be read (a link, a FIFO, a
	// directory, too large, hard-linked, ambiguous).
	ErrRefused = errors.New("verdict sidecar refused")
	// ErrUnparseable: the sidecar's bytes do not match the strict schema.
	ErrUnparseable = errors.New("verdict sidecar unparseable")
)

// MaxBytes bounds a sidecar: a verdict is a short summary and a list of findings.
const MaxBytes = 1 << 20

// Recovery search bounds: how deep below the checkout root, and how many directory entries in all.
const (
	verdictSearchDepth   = 4
	verdictSearchEntries = 10000
)

// Error says why a reviewer's node is held instead of judged. Location, StoredPath and SHA256 are set as
// far as collection got: an unparseable sidecar was still stored and digested, so a human can read the exact
// bytes that were refused.
type Error struct {
	Location   string // where the sidecar was (or was looked for), relative to the checkout root
	Recovered  bool
	StoredPath string
	SHA256     string
	Reason     string // why the node is held, in a sentence a person can act on
	Err        error  // ErrNoVerdict, ErrRefused, ErrUnparseable, or an environment error
}

func (e *Error) Error() string { return "reviewer verdict: " + e.Reason }
func (e *Error) Unwrap() error { return e.Err }

// Collect reads a reviewer's sidecar from checkout after its container is gone, stores a copy under
// storeDir, and parses the stored bytes. Any error means the node is held for a human; it is a *Error.
//
// The sidecar is read once, without following a link at any component, only if it is a regular file with a single
// link of at most MaxBytes. A hard-linked sidecar is refused because its inode is shared with another
// path, which may be outside the checkout (a local clone hard-links object files to the source repository). When
// the root has no sidecar at all, subdirectories are searched (at most 4 levels and 10,000 entries, .git skipped,
// no links followed) and a single sidecar found there is used with Recovered set: the contract tells the reviewer
// to write /work/.kew-review-verdict.json, but an agent working in a subdirectory may write a relative name.
// Two or more recovered sidecars are ambiguous and refused. A sidecar at the root that is refused is never
// replaced by one found elsewhere.
func Collect(checkout, storeDir string) (*Verdict, error) {
	return collectVerdict(checkout, storeDir)
}

// RemovePlanted deletes every reviewer sidecar that Collect could later find in checkout (at the
// root, and by the bounded subdirectory search), and must be called after the clone and before the reviewer's
// container starts. A sidecar that arrives with the repository, committed by an upstream worker for instance, is
// not this reviewer's verdict: without the removal, a reviewer that writes nothing would be judged by it. Links
// are unlinked, never followed; a directory of that name is refused. It returns the checkout-relative paths it
// removed, so the caller can warn about them.
func RemovePlanted(checkout string) ([]string, error) {
	return removePlantedVerdicts(checkout)
}

// storeVerdictBytes writes the sidecar's bytes to a new file under storeDir (0600, created exclusively).
func storeVerdictBytes(storeDir string, data []byte) (string, error) {
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return "", fmt.Errorf("create verdict store: %w", err)
	}
	f, err := os.CreateTemp(storeDir, "review-verdict-*.json") // O_EXCL, mode 0600
	if err != nil {
		return "", fmt.Errorf("store verdict: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("store verdict: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("store verdict: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("store verdict: %w", err)
	}
	return f.Name(), nil
}

func verdictDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
