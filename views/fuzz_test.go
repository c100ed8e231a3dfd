package views

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/internal/jsonlimit"
	"github.com/kewplan/kewplan/jsonplan"
)

// FuzzPlanViews: whatever a plan file holds, the human and markdown plans write no raw control character,
// bidirectional override or invalid UTF-8, and never panic.
func FuzzPlanViews(f *testing.F) {
	goldens, _ := filepath.Glob("../planner/testdata/*/plan.json")
	for _, g := range goldens {
		if b, err := os.ReadFile(g); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"format_version":"1.0","config_digest":"\u001b[2J","nodes":[{"name":"fix\u202e","runner":"r\u0007","protocol":"p\u009b","model":"m\u001b]0;PWNED\u0007","image":"i\u2066","argv":["docker","run","-e","\u001b[2J","img","--model","\u202eevil"],"credentials":["A\u001b"],"credential_origins":["x\u0000"],"depends_on":["d\u200f"],"unknown":["\u001b"]}],"exposure":{"K\u001b":["n\u202e"]},"diagnostics":[{"severity":"error","summary":"s\u001b[2J","detail":"d\u202e\n\u0007","range":{"filename":"f\u001b.hcl","start":{"line":1,"column":1,"byte":0},"end":{"line":1,"column":3,"byte":2}},"snippet":{"context":"c\u001b","code":"\u001b[2J\u202e","start_line":1,"highlight_start_offset":0,"highlight_end_offset":2}}]}`,
		"{\"nodes\":[{\"name\":\"\xff\",\"model\":\"\xfe\x1b\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if jsonlimit.Check(b, jsonlimit.Limits{}) != nil {
			return
		}
		var doc jsonplan.Document
		if json.Unmarshal(b, &doc) != nil {
			return
		}
		for name, render := range map[string]planRenderer{"human": WritePlanHuman, "markdown": WritePlanMarkdown} {
			var buf bytes.Buffer
			if err := render(&buf, &doc); err != nil {
				t.Fatal(err)
			}
			if c := rawControl(buf.Bytes()); c != "" {
				t.Fatalf("%s plan writes the raw character %q:\n%s", name, c, strings.ToValidUTF8(buf.String(), "?"))
			}
		}
	})
}
