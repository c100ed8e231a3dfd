package views

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// meterLines render one attempt's two meters: the agent's stream and kewplan's proxy (the provider's own usage,
// read from each answer), and the finding when they differ.
func meterLines(m ledger.NodeMeters) []string {
	proxy := fmt.Sprintf("proxy %s tokens in %d model %s", humanize.Comma(m.Proxy.Tokens), m.ModelCalls, plural(int(m.ModelCalls), "call", "calls"))
	if m.Refused > 0 {
		proxy += fmt.Sprintf(" (%d refused at a cap)", m.Refused)
	}
	if m.Unsettled > 0 {
		proxy += fmt.Sprintf(" (%d unsettled: ended without the provider's final usage, counted at %s reservation)", m.Unsettled,
			plural(int(m.Unsettled), "its", "their"))
	}
	proxy += ", " + meterCost(m.Proxy.CostUSD, m.Proxy.CostSource)
	if m.Model != "" {
		proxy += ", model " + termsafe.String(m.Model)
	}
	agent := fmt.Sprintf("agent %s tokens, %s", humanize.Comma(m.Agent.Tokens), meterCost(m.Agent.CostUSD, ledger.CostReported))
	lines := []string{fmt.Sprintf("meters, attempt %d: %s · %s", m.Attempt, agent, proxy)}
	if m.Finding != "" {
		lines = append(lines, "finding: "+m.Finding)
	}
	return lines
}

func meterCost(c *float64, source string) string {
	if c == nil || source == ledger.CostUnknown {
		return "cost unknown"
	}
	s := money.USD(*c)
	if source != "" && source != ledger.CostReported && source != ledger.CostProvider {
		s += " " + source
	}
	return s
}

// Meters lists, after the run (human view only), both meters of every brokered attempt.
func (v *runsView) Meters(meters []ledger.NodeMeters) error {
	if v.vt == viewJSON || len(meters) == 0 {
		return nil
	}
	w := v.streams.Stdout
	fmt.Fprintf(w, "\nMeters (the agent's own stream, and kewplan's proxy reading the provider's usage from each answer)\n")
	for _, m := range meters {
		for i, line := range meterLines(m) {
			indent := "  " + termsafe.String(m.Node) + ": "
			if i > 0 {
				indent = "    "
			}
			fmt.Fprintf(w, "%s%s\n", indent, line)
		}
	}
	return nil
}
