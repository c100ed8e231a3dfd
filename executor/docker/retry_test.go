package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/runners"
)

// TestRetryClass: which failures a retry block may retry.
func TestRetryClass(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	over := adapter.StreamEnd{OutputOver: true}
	startErr := &engine.StartError{Err: errors.New("create container: boom")}
	tests := []struct {
		name string
		ctx  context.Context
		f    *adapter.Failure
		api  string
		out  agentRun
		want string
	}{
		{"api error", context.Background(), adapter.Failed(ledger.StatusFailed, "exit 1"), "HTTP 529 overloaded", agentRun{run: &engine.RunResult{ExitCode: 1}}, config.RetryOnAPIError},
		{"plain exit", context.Background(), adapter.Failed(ledger.StatusFailed, "exit 3"), "", agentRun{run: &engine.RunResult{ExitCode: 3}}, ""},
		{"timeout", context.Background(), adapter.Failed(ledger.StatusTimedOut, "killed"), "", agentRun{run: &engine.RunResult{TimedOut: true}}, config.RetryOnTimeout},
		{"engine start", context.Background(), adapter.Failed(ledger.StatusFailed, "create"), "", agentRun{run: &engine.RunResult{ExitCode: -1}, runErr: startErr}, config.RetryOnEngineError},
		{"engine start, container left", context.Background(), adapter.Failed(ledger.StatusFailed, "create"), "", agentRun{run: &engine.RunResult{CleanupErr: errors.New("x")}, runErr: startErr}, ""},
		{"cancelled", cancelled, adapter.Failed(ledger.StatusCancelled, "cancelled"), "HTTP 529 overloaded", agentRun{run: &engine.RunResult{Cancelled: true}}, ""},
		{"output limit", context.Background(), adapter.Failed(ledger.StatusFailed, "flood"), "HTTP 529 overloaded", agentRun{run: &engine.RunResult{ExitCode: 137}, stream: over}, ""},
		{"disk", context.Background(), adapter.Failed(ledger.StatusFailed, "disk"), "HTTP 529 overloaded", agentRun{run: &engine.RunResult{ExitCode: 137}, diskReason: "disk full"}, ""},
		{"killed by a stop", context.Background(), adapter.Failed(ledger.StatusCancelled, "stopped"), "HTTP 529 overloaded", agentRun{run: &engine.RunResult{Cancelled: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &ledger.NodeResult{Totals: runners.RunTotals{APIError: tt.api}}
			if got := retryClass(tt.ctx, tt.f, res, &tt.out); got != tt.want {
				t.Errorf("retryClass() = %q, want %q", got, tt.want)
			}
		})
	}
}
