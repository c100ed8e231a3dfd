// Package redact masks secret values in a byte stream as it is written: every spelling of a credential that a
// reader of the stored bytes could decode (the value; its base64, hex, base32 and reversed forms; any of its
// characters JSON- or URL-escaped, once or twice; the whole cut by line breaks, as GNU base64 wraps it; a run of
// at least 8 to 16 of its bytes) is replaced by Mask, and every other byte is kept exactly as written, so that a
// stored agent stream re-meters to the same totals.
//
// It is pure: a Masker is built once per node from its secrets and is immutable; its Writer wraps any io.Writer
// and holds back only the bytes from the first position where a secret could still begin, so that a secret
// split across Write calls at any byte is still masked. It knows nothing of where the secrets come from or
// where the bytes go; the executor wraps its log writers with it, and the transcript masks its decoded strings
// with the same Masker.
package redact
