package executor

import (
	"context"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/ledger"
)

// The harness of harness_test.go for this package's external tests (package executor_test), which import what
// imports executor (the telemetry exporter) and so cannot live inside it.

// TestFixture is one test configuration against the real engine (fixture).
type TestFixture struct{ f *fixture }

// NewTestFixture is newFixture.
func NewTestFixture(t testing.TB) *TestFixture { return &TestFixture{f: newFixture(t)} }

// Node is the test-unique name of a node.
func (x *TestFixture) Node(name string) string { return x.f.node(name) }

// Config writes and loads the configuration (fixture.config).
func (x *TestFixture) Config(nodes string) *config.Config { return x.f.config(nodes) }

// ModelStandIn starts the TLS stand-in for api.anthropic.com (fixture.modelStandIn).
func (x *TestFixture) ModelStandIn(ctx context.Context, args ...string) {
	x.f.modelStandIn(ctx, args...)
}

// ApplyBrokered applies with key as the brokered credential, instant retry waits and the extra hooks after the
// fixture's recorder; it returns the summary and the warnings the recorder heard.
func (x *TestFixture) ApplyBrokered(ctx context.Context, cfg *config.Config, key string, hooks ...Hook) (*ApplySummary, []WarningEvent, error) {
	waits := &fakeWaits{}
	sum, rec, err := x.f.apply(ctx, cfg, waits.tweak, brokered(key), func(o *ApplyOptions) { o.Hooks = append(o.Hooks, hooks...) })
	if rec == nil {
		return sum, nil, err
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return sum, append([]WarningEvent(nil), rec.warnings...), err
}

// AssertClean checks that the run left no container and no prompt file.
func (x *TestFixture) AssertClean(runID string) { x.f.assertClean(runID) }

// BrokerRequests are the run's brokered requests in the ledger.
func (x *TestFixture) BrokerRequests(runID string) []ledger.BrokerRequest {
	return x.f.brokerRequests(runID)
}

// FakeAPIKey is a fresh stand-in for an Anthropic key.
func FakeAPIKey() string { return testAPIKey() }
