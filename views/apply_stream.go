package views

import (
	"encoding/json"
	"io"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// applyStream writes apply's progress as NDJSON events for programs (apply --json): apply_start, node_start,
// node_progress, budget_warning, node_done, warning, egress_denied, apply_done, one JSON object per line. It is an executor.Hook. Strings that
// came from an agent are sanitised as on a terminal, so a consumer that prints them is safe too.
type applyStream struct {
	w io.Writer
}

// newApplyStream returns a stream writing to w.
func newApplyStream(w io.Writer) *applyStream { return &applyStream{w: w} }

var _ executor.Hook = (*applyStream)(nil)

func (v *applyStream) emit(obj map[string]any) {
	b, err := json.Marshal(obj)
	if err != nil {
		return
	}
	v.w.Write(append(b, '\n'))
}

// ApplyStart implements executor.Hook.
func (v *applyStream) ApplyStart(e executor.ApplyStartEvent) {
	obj := map[string]any{"type": "apply_start", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID,
		"state_dir": e.StateDir, "config_digest": e.ConfigDigest, "nodes": applyStrings(e.Nodes), "parallelism": e.Parallelism}
	if len(e.Warnings) > 0 {
		warnings := make([]string, len(e.Warnings))
		for i, w := range e.Warnings {
			warnings[i] = termsafe.Flatten(w)
		}
		obj["warnings"] = warnings
	}
	v.emit(obj)
}

// NodeStart implements executor.Hook.
func (v *applyStream) NodeStart(e executor.NodeStartEvent) {
	v.emit(map[string]any{"type": "node_start", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID,
		"node": e.Node, "runner": e.Runner, "image": e.Image, "model": termsafe.Flatten(e.Model)})
}

// NodeProgress implements executor.Hook.
func (v *applyStream) NodeProgress(e executor.NodeProgressEvent) {
	obj := applyTotalsJSON(e.Totals)
	obj["type"], obj["time"], obj["run_id"], obj["node"] = "node_progress", e.Time.UTC().Format(time.RFC3339Nano), e.RunID, e.Node
	obj["elapsed_ms"] = e.Elapsed.Milliseconds()
	if e.CostSource != "" {
		obj["cost_usd"], obj["cost_source"] = e.CostUSD, e.CostSource
	}
	v.emit(obj)
}

// BudgetWarning implements executor.Hook: a node crossed warn_at of one of its caps.
func (v *applyStream) BudgetWarning(e executor.BudgetWarningEvent) {
	obj := map[string]any{"type": "budget_warning", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID, "node": e.Node,
		"scope": e.Scope, "cap": e.Cap, "limit": e.Limit, "value": e.Value, "warn_at": e.WarnAt, "message": e.Message}
	if e.Source != "" {
		obj["cost_source"] = e.Source
	}
	v.emit(obj)
}

// NodeDone implements executor.Hook.
func (v *applyStream) NodeDone(r ledger.NodeResult) {
	obj := applyNodeJSON(&r)
	obj["type"], obj["time"] = "node_done", r.Ended.UTC().Format(time.RFC3339Nano)
	v.emit(obj)
}

// NodeRetry implements executor.Hook: a node_retry event with the attempt that failed, why, and the wait.
func (v *applyStream) NodeRetry(e executor.NodeRetryEvent) {
	v.emit(map[string]any{"type": "node_retry", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID,
		"node": e.Node, "attempt": e.Attempt, "next_attempt": e.NextAttempt, "max_attempts": e.MaxAttempts,
		"class": e.Class, "reason": termsafe.Flatten(e.Reason), "wait_ms": e.Wait.Milliseconds()})
}

// Warning implements executor.Hook.
func (v *applyStream) Warning(e executor.WarningEvent) {
	obj := map[string]any{"type": "warning", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID, "message": termsafe.Flatten(e.Message)}
	if e.Node != "" {
		obj["node"] = e.Node
	}
	v.emit(obj)
}

// ApplyDone implements executor.Hook.
func (v *applyStream) ApplyDone(s executor.ApplySummary) {
	nodes := make([]map[string]any, 0, len(s.Nodes))
	for i := range s.Nodes {
		nodes = append(nodes, applyNodeJSON(&s.Nodes[i]))
	}
	obj := map[string]any{"type": "apply_done", "time": s.Ended.UTC().Format(time.RFC3339Nano), "run_id": s.RunID,
		"status": s.Status, "duration_ms": s.Ended.Sub(s.Started).Milliseconds(), "nodes": nodes,
		"totals": map[string]any{"input_tokens": s.InputTokens, "output_tokens": s.OutputTokens,
			"cache_read_tokens": s.CacheReadTokens, "cache_write_tokens": s.CacheWriteTokens, "cost_usd": s.CostUSD,
			"cost_source": s.CostSource, "cost_estimated": applyStrings(s.CostEstimated), "cost_unknown": applyStrings(s.CostUnknown)},
		"egress_denied": s.EgressDeniedTotal}
	if s.MaxUSD != nil || s.BudgetStop != nil {
		obj["budget"] = map[string]any{"max_usd": s.MaxUSD, "stop": s.BudgetStop}
	}
	v.emit(obj)
}
