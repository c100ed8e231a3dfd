package planfile

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/jsonplan"
)

// DigestPrefix starts every plan digest, so that a digest names its algorithm.
const DigestPrefix = "sha256:"

// Digest is the digest of the whole saved plan, the one an approval signs: SHA-256 over the document's canonical
// bytes, the compact encoding (with the encoder's newline) of the indented stream Write writes, saved object and
// nodes digest included. It is computed from the document as read, so it covers exactly what apply goes on to
// check and run; a byte changed in any field kewplan reads gives another digest, while whitespace and
// compression (which read the same) do not.
func (f *File) Digest() (string, error) { return DocumentDigest(f.Doc) }

// DocumentDigest is File.Digest for a document in memory, such as the plan of `apply DIR`, which has no file.
func DocumentDigest(doc *jsonplan.Document) (string, error) {
	h := sha256.New()
	if err := doc.WriteIndented(jsonstream.Compacting(h)); err != nil {
		return "", err
	}
	h.Write([]byte("\n"))
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}
