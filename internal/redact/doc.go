// Package redact masks secret values in a byte stream as it is written: the value of every credential
// forwarded to a node, its base64 encodings (whole and embedded in a longer base64 stream), its URL-encoded and
// JSON-escaped forms are replaced by Mask, and every other byte is kept exactly as written, so that a stored
// agent stream re-meters to the same totals.
//
// It is pure: a Writer wraps any io.Writer and holds back at most the longest form's length minus one byte, so
// that a secret split across two Write calls is still masked. It knows nothing of where the secrets come from
// or where the bytes go; the executor wraps its log writers, the ledger's and the events' strings with it.
package redact
