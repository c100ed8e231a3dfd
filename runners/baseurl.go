package runners

// BaseURL is how a runner's agent can be pointed at a credential broker instead of its model API: the
// environment variable it reads its API base URL from, the endpoint that variable normally names, and the path
// the value ends with. The apply sets Variable to egress.BrokerBaseURL(proxy, port, node, Endpoint, Path).
type BaseURL struct {
	// Variable is the environment variable; "" when the agent reads its base URL from none (it cannot be
	// brokered by the environment alone).
	Variable string
	// Endpoint is the host of the runner's model API the variable replaces (one of Endpoints()).
	Endpoint string
	// Path is what the variable's usual value has after the host: "" for an origin (Anthropic's SDK appends
	// /v1/messages itself), "/api/v1" for OpenRouter's OpenAI-compatible root.
	Path string
	// API is the endpoint's protocol, which shapes the broker's refusals: "anthropic" or "openai".
	API string
}

// baseURLs are the built-ins' base-URL variables, with where each fact was found.
var baseURLs = map[string]BaseURL{
	// Claude Code: ANTHROPIC_BASE_URL, documented by Anthropic: "Override the API endpoint to route requests
	// through a proxy or gateway" (https://code.claude.com/docs/en/env-vars; also the LLM-gateway guide,
	// https://docs.anthropic.com/en/docs/claude-code/llm-gateway). Its value is an origin: Lemonade's launcher
	// sets ANTHROPIC_BASE_URL=http://localhost:13305 "origin only, no /v1" (lemonade-sdk/lemonade
	// src/cpp/cli/agent_launcher.cpp, docs/integrations/claude-code.md; see notes/runners.md).
	"claude-code": {Variable: "ANTHROPIC_BASE_URL", Endpoint: "api.anthropic.com", API: "anthropic"},
	// Hermes: OPENROUTER_BASE_URL. hermes_cli/runtime_provider.py (NousResearch/hermes-agent, stored 2026
	// revisions) reads env_openrouter_base_url = _getenv("OPENROUTER_BASE_URL") in _resolve_openrouter_runtime;
	// with --provider openrouter (our argv) the precedence is --base-url, CUSTOM_BASE_URL, then
	// OPENROUTER_BASE_URL, then hermes_constants.OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1". With that
	// variable set and the provider requested explicitly, the key is still OPENROUTER_API_KEY
	// (_is_openrouter_context), and a custom OPENROUTER_BASE_URL also turns off the credential pool
	// (_openrouter_should_use_pool). The release in the image must be checked: not run here.
	"hermes": {Variable: "OPENROUTER_BASE_URL", Endpoint: "openrouter.ai", Path: "/api/v1", API: "openai"},
	// opencode: none found. Its documentation names only OPENCODE_CONFIG / OPENCODE_CONFIG_CONTENT (inline
	// JSON config, https://opencode.ai/docs/config "Precedence order"); a provider's base URL is the config's
	// provider.<id>.options.baseURL, not an environment variable. Brokering opencode needs that config
	// (through OPENCODE_CONFIG_CONTENT), which this table does not describe.
	"opencode": {Endpoint: "openrouter.ai", Path: "/api/v1", API: "openai"},
	// pi: none. badlogic/pi-mono (snapshot of 2026-03-15) reads no OPENROUTER_BASE_URL; the only base-URL
	// variable in packages/ai/src is AZURE_OPENAI_BASE_URL (providers/azure-openai-responses.ts). A built-in
	// provider is re-pointed in models.json (packages/coding-agent/docs/models.md, "Overriding Built-in
	// Providers": {"providers": {"openrouter": {"baseUrl": ...}}}) under PI_CODING_AGENT_DIR.
	"pi": {Endpoint: "openrouter.ai", Path: "/api/v1", API: "openai"},
	// lemonade: no cloud credential and a local server; nothing to broker.
	"lemonade": {},
}

// BrokeredBaseURL is the base-URL facts of a built-in runner; false for a name that is not a built-in.
func BrokeredBaseURL(runner string) (BaseURL, bool) {
	b, ok := baseURLs[runner]
	return b, ok
}

// BaseURLVariable is the environment variable a built-in runner's agent reads its API base URL from, "" when
// there is none (then the runner cannot be brokered); false for a name that is not a built-in.
func BaseURLVariable(runner string) (string, bool) {
	b, ok := baseURLs[runner]
	return b.Variable, ok
}

// CredentialHeader is how a credential travels to its API: in Header, as "<Scheme> <value>" when Scheme is
// set. It matches egress.BrokerCredential's Header and Scheme.
type CredentialHeader struct {
	Header string
	Scheme string
}

// credentialHeaders are the headers of the credentials the built-ins declare (and their usual companions).
var credentialHeaders = map[string]CredentialHeader{
	// Claude Code sends ANTHROPIC_API_KEY "as X-Api-Key header" and ANTHROPIC_AUTH_TOKEN in the Authorization
	// header "prefixed with Bearer" (https://code.claude.com/docs/en/env-vars). CLAUDE_CODE_OAUTH_TOKEN (from
	// `claude setup-token`) is an OAuth access token and travels as a bearer token too (not stated on that page).
	"ANTHROPIC_API_KEY":       {Header: "x-api-key"},
	"CLAUDE_CODE_OAUTH_TOKEN": {Header: "Authorization", Scheme: "Bearer"},
	"ANTHROPIC_AUTH_TOKEN":    {Header: "Authorization", Scheme: "Bearer"},
	// OpenRouter and OpenAI keys are bearer tokens (OpenAI-compatible SDKs send Authorization: Bearer).
	"OPENROUTER_API_KEY": {Header: "Authorization", Scheme: "Bearer"},
	"OPENAI_API_KEY":     {Header: "Authorization", Scheme: "Bearer"},
}

// CredentialHeaderOf is the header that carries a credential; false for a name kewplan does not know.
func CredentialHeaderOf(name string) (CredentialHeader, bool) {
	h, ok := credentialHeaders[name]
	return h, ok
}
