package views

import (
	"encoding/json"
	"io"
)

// writeIndentedJSON writes v as one indented JSON document with a newline, HTML characters unescaped, and
// nothing at all when v does not encode.
func writeIndentedJSON(w io.Writer, v any) error {
	// The encoder encodes all of v before it writes, in one Write: no copy of a large plan is kept here.
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
