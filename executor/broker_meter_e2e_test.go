package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
)

// modelCalls are the fake agent's mode=modelcalls events: each call's status and, for a refusal, its message.
func modelCalls(t *testing.T, path string) []map[string]any {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []map[string]any
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["subtype"] == "model_call" {
			out = append(out, ev)
		}
	}
	return out
}

// TestBrokerMeterStopsALyingAgent: two brokered nodes whose agents print no usage at all while making model calls
// through the broker, to a TLS stand-in for api.anthropic.com that bills 200,000 input tokens per answer
// ($0.60 at Sonnet's price). usd has max_usd = 1 and turns max_turns = 2. Both are stopped budget_exceeded on the
// proxy's figures, their reasons name both meters, no node gets a third answer from the provider (the proxy
// refuses it in Anthropic's error shape, or apply's kill lands first), and the ledger keeps both meters with the
// finding.
func TestBrokerMeterStopsALyingAgent(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f.modelStandIn(ctx, "200000")
	cfg := f.config(`
node "%[1]susd" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=6\nsleep=20s\nfinal_usage=none\ntokens=none\ncost=none"
  budget {
    max_usd = 1
  }
}
node "%[1]sturns" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=6\nsleep=20s\nfinal_usage=none\ntokens=none\ncost=none"
  budget {
    max_turns = 2
  }
}
`)
	sum, rec, err := f.apply(ctx, cfg, brokered(testAPIKey()))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	usd, turns := resultOf(t, sum, f.node("usd")), resultOf(t, sum, f.node("turns"))
	for _, tc := range []struct {
		res       ledger.NodeResult
		cap, want string
		refusal   string
	}{
		{usd, "max_usd", "max_usd 1.00 reached at 1.201 (the agent reported no cost, the proxy metered 1.201)",
			"could take node " + f.node("usd") + " past its budget max_usd = 1.00: the proxy metered $1.201"},
		{turns, "max_turns", "max_turns 2 reached at 3 (the agent reported ",
			"node " + f.node("turns") + " reached its budget max_turns = 2 (this would be model call 3); raise budget { max_turns } in main.hcl to continue."},
	} {
		if tc.res.Status != ledger.StatusBudgetExceeded || tc.res.Budget == nil || tc.res.Budget.Cap != tc.cap || !strings.Contains(tc.res.Budget.Message, tc.want) {
			t.Errorf("%s: status %s, budget %+v, reason %q; want budget_exceeded on %s saying %q", tc.res.Node, tc.res.Status, tc.res.Budget, tc.res.Reason, tc.cap, tc.want)
		}
		if !strings.Contains(tc.res.Reason, tc.want) {
			t.Errorf("%s: reason %q does not name both meters (%q)", tc.res.Node, tc.res.Reason, tc.want)
		}
		// The agent gets at most two answers; a third call, if it made one before the kill, is refused at the proxy.
		calls := modelCalls(t, tc.res.StdoutLog)
		for i, c := range calls {
			if i < 2 && c["status"] != float64(200) {
				t.Errorf("%s: call %d: %v, want 200", tc.res.Node, i+1, c)
			}
			if i >= 2 && (c["status"] != float64(402) || c["error_type"] != "billing_error" || !strings.Contains(fmt.Sprint(c["message"]), tc.refusal)) {
				t.Errorf("%s: call %d past the cap: %v, want 402 billing_error saying %q", tc.res.Node, i+1, c, tc.refusal)
			}
		}
		t.Logf("%s: %d calls seen by the agent before the kill; reason %q", tc.res.Node, len(calls), tc.res.Reason)
	}

	answered := map[string]int{}
	for _, r := range f.brokerRequests(sum.RunID) {
		if r.Status == 200 {
			answered[r.Node]++
			if !r.ModelCall || !r.Metered || r.InputTokens != 200000 || r.OutputTokens != 25 || r.CostSource != "estimated" {
				t.Errorf("brokered request without its meter: %+v", r)
			}
		}
	}
	if answered[f.node("usd")] != 2 || answered[f.node("turns")] != 2 {
		t.Errorf("answered model calls %v, want 2 per node", answered)
	}
	meters := f.meters(sum.RunID)
	found := 0
	for _, m := range meters {
		if m.Node != f.node("usd") && m.Node != f.node("turns") {
			continue
		}
		found++
		if m.Proxy.Tokens != 400050 || m.Agent.Tokens != 0 || m.Model != "claude-sonnet-4-5" {
			t.Errorf("%s meters: %+v", m.Node, m)
		}
		if want := "the agent reported 0 tokens; the provider billed 400,050"; m.Finding != want {
			t.Errorf("%s finding %q, want %q", m.Node, m.Finding, want)
		}
	}
	if found != 2 {
		t.Errorf("meters %+v, want both nodes", meters)
	}
	if got := strings.Count(rec.warningText(), "the two meters differ: the agent reported 0 tokens; the provider billed 400,050"); got != 2 {
		t.Errorf("%d mismatch warnings, want 2:\n%s", got, rec.warningText())
	}
}

// TestBrokerMeterPerAttempt: a brokered node whose agent spends 400,050 tokens of its max_tokens 500,000 and then
// meets an overloaded API is retried; the proxy's sums start again for the second attempt, as apply's budget does,
// so the retry gets both of its answers instead of a refusal on the first attempt's spend, and the ledger and the
// meters keep each attempt's requests apart.
func TestBrokerMeterPerAttempt(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f.modelStandIn(ctx, "200000")
	cfg := f.config(`
node "%[1]sretry" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=2\nthen=apierror\nfinal_usage=none\ntokens=none\ncost=none"
  budget {
    max_tokens = 500000
  }
  retry {
    attempts = 2
    backoff  = "1s"
  }
}
`)
	waits := &fakeWaits{}
	sum, _, err := f.apply(ctx, cfg, waits.tweak, brokered(testAPIKey()))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("retry")
	res := resultOf(t, sum, name)
	if res.Status != ledger.StatusFailed || res.Attempts != 2 || res.Reason != "api_error: HTTP 529 overloaded after 2 attempts" {
		t.Fatalf("node: %s after %d attempts (%s), want failed on api_error after 2", res.Status, res.Attempts, res.Reason)
	}
	got := f.attempts(sum.RunID)[name]
	if len(got) != 2 {
		t.Fatalf("%d attempts recorded, want 2", len(got))
	}
	for i, a := range got {
		calls := modelCalls(t, a.StdoutLog)
		if len(calls) != 2 || calls[0]["status"] != float64(200) || calls[1]["status"] != float64(200) {
			t.Errorf("attempt %d: model calls %v, want two answered (the proxy's sums start again each attempt)", i+1, calls)
		}
	}
	var attempts []int
	for _, r := range f.brokerRequests(sum.RunID) {
		if r.Node == name {
			attempts = append(attempts, r.Attempt)
		}
	}
	if fmt.Sprint(attempts) != "[1 1 2 2]" {
		t.Errorf("brokered requests by attempt %v, want [1 1 2 2]", attempts)
	}
	var per []string
	for _, m := range f.meters(sum.RunID) {
		if m.Node == name {
			per = append(per, fmt.Sprintf("%d:%d", m.Attempt, m.Proxy.Tokens))
		}
	}
	if fmt.Sprint(per) != "[1:400050 2:400050]" {
		t.Errorf("proxy meters by attempt %v, want 400,050 tokens in each of attempts 1 and 2", per)
	}
}

// brokerCalls are the fake agent's mode=hangup events, by name.
func brokerCalls(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["subtype"] == "broker_call" {
			out[fmt.Sprint(ev["name"])] = ev
		}
	}
	return out
}

// TestBrokerMeterReservesAndRefusesUnmeteredPaths: on the real engine, an agent that hangs up right after
// message_start is metered at the provider's final figure all the same (the proxy reads the answer on); a stream
// that ends without its usage keeps its reservation, and the ledger and the meters say "unsettled"; the batches
// and files paths are refused in Anthropic's error shape with a sentence naming the configuration that would allow
// them, and never reach the provider.
func TestBrokerMeterReservesAndRefusesUnmeteredPaths(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stub := f.modelStandIn(ctx, "1000")
	cfg := f.config(`
node "%[1]shangup" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=hangup\nsleep=10s\nfinal_usage=none\ntokens=none\ncost=none"
  budget {
    max_tokens = 100000
  }
}
`)
	sum, _, err := f.apply(ctx, cfg, brokered(testAPIKey()))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("hangup")
	res := resultOf(t, sum, name)
	calls := brokerCalls(t, res.StdoutLog)
	if c := calls["hangup"]; c == nil || c["status"] != float64(200) || c["first_line"] != "event: message_start" {
		t.Errorf("the hang-up call: %v, want 200 and message_start read", c)
	}
	for _, p := range []string{"batches", "files"} {
		c := calls[p]
		if c == nil || c["status"] != float64(403) || c["error_type"] != "permission_error" ||
			!strings.Contains(fmt.Sprint(c["message"]), "bypass the node's budget") || !strings.Contains(fmt.Sprint(c["message"]), `set credentials = "forward"`) {
			t.Errorf("the %s call: %v, want 403 in Anthropic's shape naming the configuration that allows it", p, c)
		}
	}
	var settled, unsettled, refused int
	for _, r := range f.brokerRequests(sum.RunID) {
		if r.Node != name {
			continue
		}
		switch {
		case strings.HasPrefix(r.Reason, "path not brokered: "):
			refused++
		case r.Unsettled:
			unsettled++
			// The reservation: max_tokens 1000 of output and a token per 4 bytes of the body.
			if !r.Metered || r.OutputTokens != 1000 || r.InputTokens < 1000 {
				t.Errorf("unsettled row %+v, want its reservation (1,000 output, at least the 1,000 input read)", r)
			}
		case r.ModelCall && r.Status == 200:
			settled++
			if r.OutputTokens != 25 || r.InputTokens != 1000 {
				t.Errorf("the hung-up call's row %+v, want the provider's final 1,000 + 25", r)
			}
		}
	}
	if settled != 1 || unsettled != 1 || refused != 2 {
		t.Errorf("%d settled, %d unsettled, %d path refusals; want 1, 1, 2", settled, unsettled, refused)
	}
	found := false
	for _, m := range f.meters(sum.RunID) {
		if m.Node == name {
			found = true
			if m.Unsettled != 1 {
				t.Errorf("meters %+v, want 1 unsettled", m)
			}
		}
	}
	if !found {
		t.Error("no meters for the node")
	}
	if n := strings.Count(stub.String(), "request key_sha256="); n != 2 {
		t.Errorf("the provider received %d requests, want the 2 Messages calls:\n%s", n, stub.String())
	}
}
