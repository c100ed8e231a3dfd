package verdict

import (
	"fmt"

	"github.com/kewplan/kewplan/planner"
)

// FromSidecar judges a sidecar whose bytes another reader took out of the reviewer's checkout: on Kubernetes the
// pod's verdict step reads it (only a regular file that is not a link, at most MaxBytes) and hands it over in its
// log. found is false when that step reported no readable sidecar. The bytes get Collect's remaining rules: no more
// than MaxBytes, stored under storeDir before they are parsed, and the same strict parser. Any error holds the
// node for a human; it is a *Error.
func FromSidecar(data []byte, found bool, storeDir string) (*Verdict, error) {
	loc := planner.VerdictFilename
	if !found {
		return nil, &Error{Location: loc, Err: ErrNoVerdict,
			Reason: fmt.Sprintf("the reviewer left no readable %s at the checkout root (a missing file, a link or anything but a regular file reads as missing); only that file carries a verdict, and it must be written to %s",
				loc, planner.VerdictMountPath)}
	}
	if len(data) > MaxBytes {
		return nil, &Error{Location: loc, Err: ErrRefused,
			Reason: fmt.Sprintf("%s is larger than %d bytes; a verdict is a short summary and a list of findings", loc, MaxBytes)}
	}
	stored, err := storeVerdictBytes(storeDir, data)
	if err != nil {
		return nil, &Error{Location: loc, Err: err, Reason: err.Error()}
	}
	v, err := decodeVerdict(data)
	if err != nil {
		return nil, &Error{Location: loc, StoredPath: stored, SHA256: verdictDigest(data), Err: ErrUnparseable,
			Reason: fmt.Sprintf("%s:%v (the refused bytes are kept at %s)", loc, err, stored)}
	}
	v.Location = loc
	v.StoredPath = stored
	return v, nil
}
