package brokerplan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/planner"
)

// TestConfigCarriesProviderFetch: the node's provider-fetch features reach its broker section, which the proxy
// enforces, and the planner names the broker's APIs as the proxy does.
func TestConfigCarriesProviderFetch(t *testing.T) {
	if planner.BrokerAPIAnthropic != egress.BrokerAPIAnthropic || planner.BrokerAPIOpenAI != egress.BrokerAPIOpenAI {
		t.Fatalf("the planner's broker APIs %q, %q differ from the proxy's %q, %q", planner.BrokerAPIAnthropic, planner.BrokerAPIOpenAI,
			egress.BrokerAPIAnthropic, egress.BrokerAPIOpenAI)
	}
	np := &planner.NodePlan{Name: "fix", Runner: "claude-code", Protocol: "claude-code", CredentialMode: config.CredentialsBrokered,
		Credentials: []string{"ANTHROPIC_API_KEY"}, BrokeredEndpoints: []string{"api.anthropic.com"},
		ProviderFetch: []string{config.ProviderFetchWebSearch}}
	src := func(string) (string, string, bool) { return "sk-ant-real-value", "", true }
	mint := func(string) (string, error) {
		return egress.PlaceholderPrefix + "0123456789abcdef0123456789abcdef", nil
	}
	cfg, _, _, err := Config(np, src, mint)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{config.ProviderFetchWebSearch}, cfg.ProviderFetch); diff != "" || cfg.API != egress.BrokerAPIAnthropic {
		t.Errorf("broker section api %q, provider_fetch (-want +got):\n%s", cfg.API, diff)
	}
	np.ProviderFetch = nil
	if cfg, _, _, _ := Config(np, src, mint); cfg.ProviderFetch != nil {
		t.Errorf("a node without provider_fetch: broker section provider_fetch %v, want none", cfg.ProviderFetch)
	}
}
