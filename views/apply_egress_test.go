package views

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

func TestEgressDenialViews(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 14, 30, 0, time.UTC)
	d := ledger.EgressDenial{RunID: "r1", Node: "fix", Method: "CONNECT", Host: "evil.example.com\x1b[2J", Port: 443, Reason: "host not allowed for this node",
		Refusal: "evil.example.com\x1b[2J:443 is not in node fix's egress allowlist; the plan allows github.com:443", Time: at}

	var stream bytes.Buffer
	newApplyStream(&stream).EgressDenied(d)
	var ev map[string]any
	if err := json.Unmarshal(stream.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	if ev["type"] != "egress_denied" || ev["node"] != "fix" || ev["port"] != float64(443) || strings.Contains(ev["host"].(string), "\x1b") ||
		!strings.Contains(ev["refusal"].(string), "egress allowlist") || strings.Contains(ev["refusal"].(string), "\x1b") {
		t.Errorf("egress_denied event: %v", ev)
	}

	var human bytes.Buffer
	newApplyDisplay(&human, false, false).EgressDenied(d)
	if got := human.String(); !strings.Contains(got, "Egress denied: fix: evil.example.com") || !strings.Contains(got, "the plan allows github.com:443") || strings.Contains(got, "\x1b") {
		t.Errorf("display line: %q", got)
	}

	sum := executor.ApplySummary{EgressDeniedTotal: 3, EgressDenials: []ledger.EgressDenial{d, d, {Host: "1.2.3.4", Port: 443}}}
	if got := egressSummaryLine(sum); !strings.HasPrefix(got, "3 egress requests denied: evil.example.com") || !strings.Contains(got, "1.2.3.4:443") {
		t.Errorf("summary line: %q", got)
	}
	if got := egressSummaryLine(executor.ApplySummary{}); got != "" {
		t.Errorf("summary line without denials: %q", got)
	}

	run := &ledger.RunRecord{ID: "r1", StartedAt: at, Status: ledger.RunSucceeded}
	var show bytes.Buffer
	if err := writeRunEgressHuman(&show, run, nil, nil, []ledger.EgressDenial{d}); err != nil {
		t.Fatal(err)
	}
	if got := show.String(); !strings.Contains(got, "Egress denied (1):") || !strings.Contains(got, "the plan allows github.com:443") || strings.Contains(got, "\x1b") {
		t.Errorf("runs show:\n%s", got)
	}
	var js bytes.Buffer
	if err := writeRunEgressJSON(&js, run, nil, nil, []ledger.EgressDenial{d}); err != nil {
		t.Fatal(err)
	}
	var doc runJSON
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.EgressDenials) != 1 || doc.EgressDenials[0].Port != 443 || doc.EgressDenials[0].Node != "fix" || !strings.Contains(doc.EgressDenials[0].Refusal, "egress allowlist") {
		t.Errorf("runs show --json egress_denials: %+v", doc.EgressDenials)
	}
}
