// Package jsonlimit checks the size and nesting depth of untrusted JSON (saved plans, verdict sidecars, policy
// and stream documents) before encoding/json decodes it, so that a hostile document is refused with its line and
// column instead of costing deep recursion and memory in the decoder and in every walk of the decoded value.
//
// It does not validate JSON: malformed text is left for the decoder to report. It counts brackets and braces
// outside strings in one pass, without allocating.
package jsonlimit
