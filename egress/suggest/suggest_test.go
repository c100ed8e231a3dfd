package suggest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
)

func TestBuild(t *testing.T) {
	d := func(node, method, host string, port int, reason string) ledger.EgressDenial {
		return ledger.EgressDenial{RunID: "r1", Node: node, Method: method, Host: host, Port: port, Reason: reason}
	}
	denials := []ledger.EgressDenial{
		d("fix", "CONNECT", "pypi.org", 443, egress.ReasonHostNotAllowed),
		d(`docs["a"]`, "CONNECT", "pypi.org", 443, egress.ReasonOtherNodesHost),
		d("review", "CONNECT", "pypi.org", 443, egress.ReasonHostNotAllowed),
		d("fix", "CONNECT", "pypi.org", 443, egress.ReasonHostNotAllowed), // asked twice: one entry
		d("fix", "CONNECT", "github.com", 22, egress.ReasonPortNotAllowed),
		d("fix", "GET", "mirror.example", 8080, egress.ReasonPlainHTTP),
		d("fix", "GET", "github.com", 443, egress.ReasonPlainHTTP), // 443 never opens to plain HTTP
		d("review", "CONNECT", "1.2.3.4", 443, egress.ReasonIPLiteral),
		d("", "CONNECT", "evil.example", 443, egress.ReasonNoCredentials),
		d("review", "DIAL", "internal.example", 443, egress.ReasonRefusedAddress),
		d("gone", "CONNECT", "elsewhere.example", 443, egress.ReasonHostNotAllowed), // not a node of this run
		d("review", "CONNECT", "bad_name", 443, egress.ReasonHostNotAllowed),
	}
	got := Build("r1", []string{"fix", `docs["a"]`, `docs["b"]`, "review"}, denials)
	want := &Suggestion{
		RunID:   "r1",
		Sandbox: []string{"pypi.org"},
		Nodes:   []NodeAllow{{Node: "fix", Allow: []string{"github.com:22", "mirror.example:8080"}}},
		NotSuggested: []ledger.EgressDenial{
			denials[6], denials[7], denials[8], denials[9], denials[11],
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Build() mismatch (-want +got):\n%s", diff)
	}

	// One node block: its own block, never the sandbox.
	one := Build("r1", []string{"fix"}, denials[:1])
	if len(one.Sandbox) != 0 || len(one.Nodes) != 1 || one.Nodes[0].Node != "fix" {
		t.Errorf("one node: %+v", one)
	}
}
