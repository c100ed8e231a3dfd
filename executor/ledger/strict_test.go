package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/statedir"
)

// TestJSONColumnsReadStrictly: a JSON column edited to hold a duplicate, case-folded or unknown key is refused
// with the key's JSON path when the run is read back, never read one way here and another by a script.
func TestJSONColumnsReadStrictly(t *testing.T) {
	for _, tc := range []struct{ column, value, want string }{
		{"verdict_findings", `[{"path":"a","path":"b"}]`, `$[0].path`},
		{"verdict_findings", `[{"PATH":"a"}]`, `$[0].PATH`},
		{"verdict_findings", `[{"approved":true}]`, `$[0].approved`},
	} {
		l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.StartRun(RunRecord{ID: "s1", StartedAt: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		if err := l.RecordNode(&NodeResult{RunID: "s1", Node: "fix", Status: StatusSucceeded}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.db.Exec(`UPDATE node_runs SET `+tc.column+` = ? WHERE node = 'fix'`, tc.value); err != nil {
			t.Fatal(err)
		}
		_, _, err = l.Run("s1")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %s: Run() = %v, want a refusal naming %s", tc.column, tc.value, err, tc.want)
		}
		l.Close()
	}
}
