package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBrokerProviderFetchEndToEnd: a brokered node whose agent asks its provider to search the web (a
// web_search server tool in the request) is refused by kewplan's broker, in Anthropic's error shape, with the
// configuration that would allow it, and the stand-in for api.anthropic.com never sees the request; the same
// agent on a node with provider_fetch = ["web_search"] gets its answer.
func TestBrokerProviderFetchEndToEnd(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stubOut := f.modelStandIn(ctx)
	cfg := f.config(`
node "%[1]sshut" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=1\ntool=web_search_20250305\nverdict=approve"
}
node "%[1]sopen" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=1\ntool=web_search_20250305\nverdict=approve"
  egress {
    provider_fetch = ["web_search"]
  }
}
`)
	sum, _, err := f.apply(ctx, cfg, brokered(testAPIKey()))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	shut, open := resultOf(t, sum, f.node("shut")), resultOf(t, sum, f.node("open"))

	calls := modelCalls(t, shut.StdoutLog)
	want := fmt.Sprintf("add provider_fetch = [\"web_search\"] to the egress block of node %q", f.node("shut"))
	if len(calls) != 1 || calls[0]["status"] != float64(403) || calls[0]["error_type"] != "permission_error" ||
		!strings.Contains(fmt.Sprint(calls[0]["message"]), want) || !strings.Contains(fmt.Sprint(calls[0]["message"]), "tools[0]") {
		t.Errorf("node without provider_fetch: calls %v, want one refused 403 permission_error saying %q at tools[0]", calls, want)
	}
	if calls := modelCalls(t, open.StdoutLog); len(calls) != 1 || calls[0]["status"] != float64(200) {
		t.Errorf("node with provider_fetch = [\"web_search\"]: calls %v, want one answered 200", calls)
	}
	if n := strings.Count(stubOut.String(), "request "); n != 1 {
		t.Errorf("the stand-in saw %d requests, want only the opted-in node's:\n%s", n, stubOut.String())
	}
	refused := 0
	for _, r := range f.brokerRequests(sum.RunID) {
		if r.Node == f.node("shut") && r.Status == 403 && strings.Contains(r.Reason, "provider fetch") {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("ledger brokered requests %+v, want the refusal recorded with its reason", f.brokerRequests(sum.RunID))
	}
}
