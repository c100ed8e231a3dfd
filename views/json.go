package views

import (
	"bytes"
	"encoding/json"
	"io"
)

// writeIndentedJSON writes v as one indented JSON document with a newline, HTML characters unescaped, and
// nothing at all when v does not encode.
func writeIndentedJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
