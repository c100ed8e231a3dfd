package ledger

import (
	"database/sql"
	"fmt"
	"time"
)

const brokerMigration = `CREATE TABLE broker_requests (
		run_id      TEXT NOT NULL,
		seq         INTEGER NOT NULL,
		node        TEXT NOT NULL DEFAULT '',
		attempt     INTEGER NOT NULL DEFAULT 0,
		method      TEXT NOT NULL DEFAULT '',
		host        TEXT NOT NULL DEFAULT '',
		path        TEXT NOT NULL DEFAULT '',
		status      INTEGER NOT NULL DEFAULT 0,
		credential  TEXT NOT NULL DEFAULT '',
		bytes_in    INTEGER NOT NULL DEFAULT 0,
		bytes_out   INTEGER NOT NULL DEFAULT 0,
		duration_ms INTEGER NOT NULL DEFAULT 0,
		reason      TEXT NOT NULL DEFAULT '',
		time        TEXT NOT NULL,
		PRIMARY KEY (run_id, seq)
	);`

// firstByteMigration adds a brokered call's time to its answer's first byte (NULL when none went).
const firstByteMigration = `ALTER TABLE broker_requests ADD COLUMN first_byte_ms INTEGER;`

// BrokerRequest is one request kewplan's egress proxy brokered for a node: the agent presented its placeholder,
// and the proxy forwarded the request to its runner's endpoint with the real credential (Status < 400), or refused
// it (Reason says why). Path and Reason are untrusted text a view sanitises.
type BrokerRequest struct {
	RunID      string
	Node       string
	Attempt    int
	Method     string
	Host       string // the runner endpoint
	Path       string
	Status     int
	Credential string // the credential's name, never its value
	BytesIn    int64
	BytesOut   int64
	DurationMS int64
	// FirstByteMS is the time from the request's arrival to the first byte of the answer the agent received;
	// nil when none went (or the proxy did not say).
	FirstByteMS *int64
	Reason      string
	Time        time.Time
	// The proxy's meter: ModelCall for a brokered POST (counted against max_turns, refused or not), Metered when
	// the answer was read for usage, and what the provider reported (Model is untrusted text). CostUSD is nil
	// when CostSource is unknown. BudgetCap names the cap a refusal at the proxy was judged on.
	ModelCall        bool
	Metered          bool
	Model            string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          *float64
	CostSource       string
	BudgetCap        string
	// Unsettled marks a model call that ended without the provider's final usage: its figures are its
	// reservation (or the larger usage read before the end).
	Unsettled bool
}

// RecordBrokerRequest appends a brokered request to its run, in arrival order.
func (l *Ledger) RecordBrokerRequest(r BrokerRequest) error {
	return l.tx(func(tx *sql.Tx) error {
		var cost any
		if r.CostUSD != nil {
			cost = *r.CostUSD
		}
		_, err := tx.Exec(`INSERT INTO broker_requests (run_id, seq, node, attempt, method, host, path, status, credential, bytes_in, bytes_out, duration_ms, reason, time,
				model_call, metered, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_source, budget_cap, unsettled, first_byte_ms)
			VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM broker_requests WHERE run_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.RunID, r.RunID, r.Node, r.Attempt, r.Method, r.Host, r.Path, r.Status, r.Credential, r.BytesIn, r.BytesOut, r.DurationMS, r.Reason, ts(r.Time),
			r.ModelCall, r.Metered, r.Model, r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens, cost, r.CostSource, r.BudgetCap, r.Unsettled, r.FirstByteMS)
		return err
	})
}

// BrokerRequests are a run's brokered requests, in the order they ended.
func (l *Ledger) BrokerRequests(runID string) ([]BrokerRequest, error) {
	rows, err := l.db.Query(`SELECT node, attempt, method, host, path, status, credential, bytes_in, bytes_out, duration_ms, reason, time,
			model_call, metered, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_source, budget_cap, unsettled, first_byte_ms
		FROM broker_requests WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: brokered requests of run %s: %w", l.path, runID, err)
	}
	defer rows.Close()
	var out []BrokerRequest
	for rows.Next() {
		r := BrokerRequest{RunID: runID}
		var t sql.NullString
		var cost sql.NullFloat64
		var firstByte sql.NullInt64
		if err := rows.Scan(&r.Node, &r.Attempt, &r.Method, &r.Host, &r.Path, &r.Status, &r.Credential, &r.BytesIn, &r.BytesOut, &r.DurationMS, &r.Reason, &t,
			&r.ModelCall, &r.Metered, &r.Model, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &cost, &r.CostSource, &r.BudgetCap, &r.Unsettled, &firstByte); err != nil {
			return nil, fmt.Errorf("ledger %s: brokered requests of run %s: %w", l.path, runID, err)
		}
		if p := parseTS(t); p != nil {
			r.Time = *p
		}
		if cost.Valid {
			c := cost.Float64
			r.CostUSD = &c
		}
		if firstByte.Valid {
			ms := firstByte.Int64
			r.FirstByteMS = &ms
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: brokered requests of run %s: %w", l.path, runID, err)
	}
	return out, nil
}
