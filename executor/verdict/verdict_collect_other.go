//go:build !unix

package verdict

import "github.com/kewplan/kewplan/planner"

func collectVerdict(checkout, storeDir string) (*Verdict, error) {
	return nil, &Error{Location: planner.VerdictFilename, Err: ErrRefused,
		Reason: "reading a reviewer sidecar safely needs a Unix host (openat with O_NOFOLLOW)"}
}

func removePlantedVerdicts(checkout string) ([]string, error) {
	return nil, &Error{Location: planner.VerdictFilename, Err: ErrRefused,
		Reason: "reading a reviewer sidecar safely needs a Unix host (openat with O_NOFOLLOW)"}
}
