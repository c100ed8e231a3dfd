package views

import (
	"fmt"
	"strings"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// EgressDenied implements executor.Hook: one NDJSON event egress_denied per request the proxy refused.
func (v *applyStream) EgressDenied(d ledger.EgressDenial) {
	v.emit(egressDenialEvent(d, "egress_denied"))
}

// EgressDenied implements executor.Hook: a line above the live block.
func (v *applyDisplay) EgressDenied(d ledger.EgressDenial) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLocked()
	node := d.Node
	if node == "" {
		node = "(no valid proxy credentials)"
	}
	fmt.Fprintf(v.w, "%s%s: %s (%s)\n", v.yellow("Egress denied: "), termsafe.Flatten(node), termsafe.Flatten(d.HostPort()), termsafe.Flatten(d.Reason))
	if d.Refusal != "" {
		fmt.Fprintf(v.w, "  %s\n", termsafe.Flatten(d.Refusal))
	}
	v.drawLocked()
}

// egressDenialJSON is one denial as the stream and `runs show --json` write it.
func egressDenialEvent(d ledger.EgressDenial, typ string) map[string]any {
	obj := map[string]any{"time": d.Time.UTC().Format(time.RFC3339Nano), "node": termsafe.Flatten(d.Node), "method": termsafe.Flatten(d.Method),
		"host": termsafe.Flatten(d.Host), "port": d.Port, "reason": termsafe.Flatten(d.Reason)}
	if d.Refusal != "" {
		obj["refusal"] = termsafe.Flatten(d.Refusal)
	}
	if typ != "" {
		obj["type"] = typ
		obj["run_id"] = d.RunID
	}
	return obj
}

// egressSummaryLine is the apply summary's line about refused requests: "3 egress requests denied:
// evil.example.com:443, 1.2.3.4:443 …", each distinct host:port once, at most five; "" when none was.
func egressSummaryLine(s executor.ApplySummary) string {
	if s.EgressDeniedTotal == 0 {
		return ""
	}
	var shown []string
	seen := map[string]bool{}
	more := false
	for _, d := range s.EgressDenials {
		hp := termsafe.Flatten(d.HostPort())
		if seen[hp] {
			continue
		}
		if len(shown) == 5 {
			more = true
			break
		}
		seen[hp] = true
		shown = append(shown, hp)
	}
	noun := "requests"
	if s.EgressDeniedTotal == 1 {
		noun = "request"
	}
	line := fmt.Sprintf("%d egress %s denied: %s", s.EgressDeniedTotal, noun, strings.Join(shown, ", "))
	if more || s.EgressDeniedTotal > len(s.EgressDenials) {
		line += " …"
	}
	return line
}

// egressDenialJSON is one refused request in `runs show --json`.
type egressDenialJSON struct {
	Time   time.Time `json:"time"`
	Node   string    `json:"node"` // "" when the request carried no valid proxy credentials
	Method string    `json:"method"`
	Host   string    `json:"host"`
	Port   int       `json:"port"`
	Reason string    `json:"reason"`
	// Refusal is the sentence the proxy answered the agent with; omitted when the run recorded none.
	Refusal string `json:"refusal,omitempty"`
}

func egressDenialsJSON(denials []ledger.EgressDenial) []egressDenialJSON {
	out := make([]egressDenialJSON, 0, len(denials))
	for _, d := range denials {
		out = append(out, egressDenialJSON{Time: d.Time.UTC(), Node: termsafe.Flatten(d.Node), Method: termsafe.Flatten(d.Method),
			Host: termsafe.Flatten(d.Host), Port: d.Port, Reason: termsafe.Flatten(d.Reason),
			Refusal: termsafe.Flatten(d.Refusal)})
	}
	return out
}

// writeEgressDenialsHuman is `runs show`'s section of refused requests; nothing when there were none.
func writeEgressDenialsHuman(b *strings.Builder, denials []ledger.EgressDenial) {
	if len(denials) == 0 {
		return
	}
	fmt.Fprintf(b, "\nEgress denied (%d):\n", len(denials))
	for _, d := range denials {
		node := termsafe.Flatten(d.Node)
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(b, "  %s  %-14s %s %s (%s)\n", d.Time.UTC().Format("15:04:05Z"), node, termsafe.Flatten(d.Method), termsafe.Flatten(d.HostPort()), termsafe.Flatten(d.Reason))
		if d.Refusal != "" {
			fmt.Fprintf(b, "      %s\n", termsafe.Flatten(d.Refusal))
		}
	}
}
