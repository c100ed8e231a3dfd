package egress

import "testing"

// A credential named by value_env takes its value from the proxy's environment; one whose variable is empty is
// dropped, and value_env beside a value is refused.
func TestResolveCredentialEnv(t *testing.T) {
	cfg := &Config{Nodes: []NodeConfig{{Name: "fix", Broker: &BrokerConfig{Credentials: []BrokerCredential{
		{Name: "ANTHROPIC_API_KEY", ValueEnv: "KEW_CREDENTIAL_ANTHROPIC_API_KEY"},
		{Name: "CLAUDE_CODE_OAUTH_TOKEN", ValueEnv: "KEW_CREDENTIAL_CLAUDE_CODE_OAUTH_TOKEN"},
		{Name: "OTHER", Value: "inline"},
	}}}}}
	env := map[string]string{"KEW_CREDENTIAL_ANTHROPIC_API_KEY": "sk-ant-real"}
	if err := cfg.resolveCredentialEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	got := cfg.Nodes[0].Broker.Credentials
	if len(got) != 2 || got[0].Name != "ANTHROPIC_API_KEY" || got[0].Value != "sk-ant-real" || got[0].ValueEnv != "" || got[1].Value != "inline" {
		t.Fatalf("credentials %+v", got)
	}
	bad := &Config{Nodes: []NodeConfig{{Name: "fix", Broker: &BrokerConfig{Credentials: []BrokerCredential{{Name: "X", Value: "v", ValueEnv: "Y"}}}}}}
	if err := bad.resolveCredentialEnv(func(string) string { return "z" }); err == nil {
		t.Error("value and value_env together were accepted")
	}
}
