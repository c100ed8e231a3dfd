//go:build !unix

package executor

func collectVerdict(checkout, storeDir string) (*Verdict, error) {
	return nil, &VerdictError{Location: ".kew-review-verdict.json", Err: ErrVerdictRefused,
		Reason: "reading a reviewer sidecar safely needs a Unix host (openat with O_NOFOLLOW)"}
}

func removePlantedVerdicts(checkout string) ([]string, error) {
	return nil, &VerdictError{Location: ".kew-review-verdict.json", Err: ErrVerdictRefused,
		Reason: "reading a reviewer sidecar safely needs a Unix host (openat with O_NOFOLLOW)"}
}
