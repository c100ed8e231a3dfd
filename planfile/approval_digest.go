package planfile

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/kewplan/kewplan/jsonplan"
)

// DigestPrefix starts every plan digest, so that a digest names its algorithm.
const DigestPrefix = "sha256:"

// Digest is the digest of the whole saved plan, the one an approval signs: SHA-256 over exactly the JSON that
// was decoded (the file's bytes, decompressed), saved object and nodes digest included. Any byte changed changes
// it, including one a reader of the document would ignore, so an approver signs the very bytes apply reads (and
// apply reads them strictly: no duplicate, case-folded or unknown key). Recompressing the file leaves it alone.
func (f *File) Digest() (string, error) {
	if f.digest == "" {
		return DocumentDigest(f.Doc)
	}
	return f.digest, nil
}

// DocumentDigest is File.Digest for a document in memory, such as the plan of `apply DIR`, which has no file: the
// digest of the bytes Write would write for it.
func DocumentDigest(doc *jsonplan.Document) (string, error) {
	h := sha256.New()
	if err := doc.WriteIndented(h); err != nil {
		return "", err
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// bytesDigest is the digest of decoded JSON b.
func bytesDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}
