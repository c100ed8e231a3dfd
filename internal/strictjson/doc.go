// Package strictjson decodes the JSON documents kewplan wrote and reads back (saved plans, approvals files,
// receipts, the ledger's JSON columns) strictly: a key that appears twice in an object, a key that differs from a
// field's name only by case, and a key the Go type has no field for are refused with the JSON path of the
// offending key ($.saved.Policy), its line and column. encoding/json alone takes the last of duplicate keys and
// matches keys case-insensitively, so two readers (kewplan and jq, say) could read one document two ways.
//
// It scans the document's bytes once against the destination's type before encoding/json decodes it, so the
// check also reaches inside types with their own UnmarshalJSON; the scan compares keys where they lie, without an
// allocation per token (about a twelfth of encoding/json's decoding time, BenchmarkCheck against BenchmarkUnmarshal). It does not check values' types or ranges (the
// decoder and the caller do), and it bounds size and depth through internal/jsonlimit.
package strictjson
