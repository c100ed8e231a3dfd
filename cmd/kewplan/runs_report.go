package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/views"
)

// maxReceiptBytes bounds the receipt read for the report: a receipt is a few kilobytes per node.
const maxReceiptBytes = 64 << 20

// runReceipt is what the run report says of the run's receipt: its digest, the plan it names and whether a
// signature lies beside it. Checking the signature is kewplan verify's, with an allowed signers file.
func runReceipt(stateDir, runID string) views.ReceiptStatus {
	if stateDir == "" {
		stateDir = statedir.DefaultName
	}
	path := statedir.Dir{Root: stateDir}.Receipt(runID)
	st := views.ReceiptStatus{Path: path}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return st
	}
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err == nil && fi.Size() > maxReceiptBytes {
		err = fmt.Errorf("larger than %d bytes", maxReceiptBytes)
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		st.Problem = fmt.Sprintf("The receipt %s could not be read: %v.", path, err)
		return st
	}
	sum := sha256.Sum256(b)
	st.Found, st.SHA256 = true, "sha256:"+hex.EncodeToString(sum[:])
	var doc struct {
		Plan struct {
			Digest string `json:"digest"`
		} `json:"plan"`
	}
	if json.Unmarshal(b, &doc) == nil {
		st.PlanDigest = doc.Plan.Digest
	}
	if _, err := os.Lstat(path + ".sig"); err == nil {
		st.Signed = true
	}
	return st
}
