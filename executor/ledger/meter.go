package ledger

import (
	"database/sql"
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/kewplan/kewplan/internal/money"
)

const meterMigration = `ALTER TABLE broker_requests ADD COLUMN model_call INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN metered INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN model TEXT NOT NULL DEFAULT '';
	ALTER TABLE broker_requests ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE broker_requests ADD COLUMN cost_usd REAL;
	ALTER TABLE broker_requests ADD COLUMN cost_source TEXT NOT NULL DEFAULT '';
	ALTER TABLE broker_requests ADD COLUMN budget_cap TEXT NOT NULL DEFAULT '';`

// unsettledMigration marks the model calls the proxy could not settle: they ended without the provider's final
// usage (the agent hung up and the provider sent nothing more, an encoded answer, an upstream failure), so their
// row holds the call's reservation (its worst case) instead of a reported figure.
const unsettledMigration = `ALTER TABLE broker_requests ADD COLUMN unsettled INTEGER NOT NULL DEFAULT 0;`

// MeterSide is one meter's figures for an attempt. Tokens is input + output + cache writes, as max_tokens counts.
type MeterSide struct {
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	Tokens           int64    `json:"tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	// CostSource is provider (the provider's own figure), estimated or unknown for the proxy's side; "" for the
	// agent's (node_runs says).
	CostSource string `json:"cost_source,omitempty"`
}

// NodeMeters is one attempt of a brokered node as both meters saw it: the agent's own stream (node_attempts) and
// kewplan's proxy, which read the provider's usage from every answer (broker_requests).
type NodeMeters struct {
	Node    string    `json:"node"`
	Attempt int       `json:"attempt"`
	Agent   MeterSide `json:"agent"`
	Proxy   MeterSide `json:"proxy"`
	// Requests are the brokered requests, ModelCalls the POSTs among them, Refused those refused at a cap.
	Requests   int64 `json:"requests"`
	ModelCalls int64 `json:"model_calls"`
	Refused    int64 `json:"refused_at_cap"`
	// Unsettled are the model calls that ended without the provider's final usage: their reservations are in
	// Proxy's figures.
	Unsettled int64 `json:"unsettled"`
	// Model is the model the provider last answered with (untrusted text).
	Model string `json:"model"`
	// Finding says how the two meters differ beyond rounding (MeterFinding); "" when they agree.
	Finding string `json:"finding"`
}

// Meters are the two meters of every attempt of a run that the proxy brokered, by node then attempt.
func (l *Ledger) Meters(runID string) ([]NodeMeters, error) {
	rows, err := l.db.Query(`SELECT b.node, b.attempt, COUNT(*), SUM(b.model_call), SUM(b.budget_cap != ''), SUM(b.unsettled),
			SUM(b.input_tokens), SUM(b.output_tokens), SUM(b.cache_read_tokens), SUM(b.cache_write_tokens),
			SUM(b.cost_usd), SUM(b.metered AND b.cost_source = 'unknown' AND (b.input_tokens + b.output_tokens) > 0),
			SUM(b.cost_source = 'estimated'),
			COALESCE((SELECT m.model FROM broker_requests m WHERE m.run_id = b.run_id AND m.node = b.node AND m.attempt = b.attempt AND m.model != '' ORDER BY m.seq DESC LIMIT 1), ''),
			COALESCE(a.input_tokens, n.input_tokens, 0), COALESCE(a.output_tokens, n.output_tokens, 0),
			COALESCE(a.cache_read_tokens, n.cache_read_tokens, 0), COALESCE(a.cache_write_tokens, n.cache_write_tokens, 0),
			COALESCE(a.cost_usd, n.cost_usd)
		FROM broker_requests b
		LEFT JOIN node_attempts a ON a.run_id = b.run_id AND a.node = b.node AND a.attempt = b.attempt
		LEFT JOIN node_runs n ON n.run_id = b.run_id AND n.node = b.node AND a.run_id IS NULL
		WHERE b.run_id = ? AND b.node != ''
		GROUP BY b.node, b.attempt ORDER BY b.node, b.attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: meters of run %s: %w", l.path, runID, err)
	}
	defer rows.Close()
	var out []NodeMeters
	for rows.Next() {
		var m NodeMeters
		var proxyCost, agentCost sql.NullFloat64
		var unknown, estimated int64
		if err := rows.Scan(&m.Node, &m.Attempt, &m.Requests, &m.ModelCalls, &m.Refused, &m.Unsettled,
			&m.Proxy.InputTokens, &m.Proxy.OutputTokens, &m.Proxy.CacheReadTokens, &m.Proxy.CacheWriteTokens,
			&proxyCost, &unknown, &estimated, &m.Model,
			&m.Agent.InputTokens, &m.Agent.OutputTokens, &m.Agent.CacheReadTokens, &m.Agent.CacheWriteTokens, &agentCost); err != nil {
			return nil, fmt.Errorf("ledger %s: meters of run %s: %w", l.path, runID, err)
		}
		m.Proxy.Tokens = m.Proxy.InputTokens + m.Proxy.OutputTokens + m.Proxy.CacheWriteTokens
		m.Agent.Tokens = m.Agent.InputTokens + m.Agent.OutputTokens + m.Agent.CacheWriteTokens
		switch {
		case unknown > 0 || !proxyCost.Valid:
			m.Proxy.CostSource = CostUnknown
		case estimated > 0:
			m.Proxy.CostSource = CostEstimated
		default:
			m.Proxy.CostSource = CostProvider
		}
		if proxyCost.Valid {
			c := proxyCost.Float64
			m.Proxy.CostUSD = &c
		}
		if agentCost.Valid {
			c := agentCost.Float64
			m.Agent.CostUSD = &c
		}
		m.Finding = MeterFinding(m.Agent, m.Proxy)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: meters of run %s: %w", l.path, runID, err)
	}
	return out, nil
}

// MeterFinding says how the agent's meter and the proxy's differ beyond rounding, "" when they agree: tokens
// that differ by more than 1% of the larger figure and more than 10 tokens, or costs (both known) by more than
// 1% and more than $0.01. The proxy's figures are the provider's own; the agent's are what it printed.
func MeterFinding(agent, proxy MeterSide) string {
	differ := func(a, p, slack float64) bool {
		d := a - p
		if d < 0 {
			d = -d
		}
		return d > slack && d > 0.01*max(a, p)
	}
	if differ(float64(agent.Tokens), float64(proxy.Tokens), 10) {
		return fmt.Sprintf("the agent reported %s tokens; the provider billed %s", humanize.Comma(agent.Tokens), humanize.Comma(proxy.Tokens))
	}
	if agent.CostUSD != nil && proxy.CostUSD != nil && proxy.CostSource != CostUnknown && differ(*agent.CostUSD, *proxy.CostUSD, 0.01) {
		a, p := money.Distinct(*agent.CostUSD, *proxy.CostUSD)
		how := "the provider's own figure"
		if proxy.CostSource == CostEstimated {
			how = "estimated: tokens × price"
		}
		return fmt.Sprintf("the agent's cost is $%s; the provider's usage costs $%s (%s)", a, p, how)
	}
	return ""
}
