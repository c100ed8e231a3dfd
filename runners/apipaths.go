package runners

// The methods and paths a brokered runner's API is reached by. kewplan's proxy forwards a brokered request only
// when its method and path are listed here for the runner's API: every other path of the same endpoint (message
// batches, the Files API, fine-tuning, admin keys) is billed outside the answers the proxy meters, so a node that
// needs one has its credentials forwarded instead (credentials = "forward").

// APIPath is one method and path of a model API, relative to the API's base URL (BaseURL.Path): "{name}" stands
// for any one path segment. ModelCall marks a billed path: the proxy reserves its worst case and counts it
// against max_turns.
type APIPath struct {
	Method    string
	Path      string
	ModelCall bool
}

// apiPaths are each API's brokered paths.
var apiPaths = map[string][]APIPath{
	// Anthropic's Messages API (https://docs.anthropic.com/en/api/messages), token counting
	// (https://docs.anthropic.com/en/api/messages-count-tokens, free of charge) and the Models API
	// (https://docs.anthropic.com/en/api/models-list, /en/api/models). Claude Code calls these and no others.
	"anthropic": {
		{Method: "POST", Path: "/v1/messages", ModelCall: true},
		{Method: "POST", Path: "/v1/messages/count_tokens"},
		{Method: "GET", Path: "/v1/models"},
		{Method: "GET", Path: "/v1/models/{id}"},
	},
	// OpenAI-style chat completions under the base URL's path (OpenRouter's /api/v1:
	// https://openrouter.ai/docs/api-reference/chat-completion, /docs/api-reference/list-available-models).
	"openai": {
		{Method: "POST", Path: "/chat/completions", ModelCall: true},
		{Method: "GET", Path: "/models"},
	},
}

// BrokeredAPIPaths are the paths of an API ("anthropic" or "openai") the proxy forwards, relative to the base
// URL's path; nil for an API kewplan does not broker.
func BrokeredAPIPaths(api string) []APIPath {
	return append([]APIPath(nil), apiPaths[api]...)
}

// BrokeredRoute is where a brokered node's base URL points: its API's protocol ("anthropic" or "openai"), the
// endpoint among endpoints and the base path after it. A built-in runner's facts (BrokeredBaseURL) apply when
// its endpoint is one of endpoints; otherwise the first endpoint at its root, and the protocol from the runner's
// stream vocabulary (Claude Code's is Anthropic's API).
func BrokeredRoute(runner, protocol string, endpoints []string) (api, endpoint, path string) {
	api = "openai"
	if protocol == "claude-code" {
		api = "anthropic"
	}
	bu, builtin := baseURLs[runner]
	if builtin && bu.API != "" {
		api = bu.API
	}
	if len(endpoints) > 0 {
		endpoint = endpoints[0]
	}
	if builtin && bu.Endpoint != "" {
		for _, e := range endpoints {
			if e == bu.Endpoint {
				endpoint, path = bu.Endpoint, bu.Path
			}
		}
	}
	return api, endpoint, path
}

// DefaultMaxOutputTokens is the output a model of unknown maximum is reserved for when a call names no max_tokens.
const DefaultMaxOutputTokens = 128_000

// maxOutputTokens are the built-in models' largest output per call. Opus 4.5 "64K max output" (Microsoft Foundry's
// model card, aspire.dev Aspire.Hosting.Foundry Anthropic fields); Opus 4.6, 4.7, 4.8 and Sonnet 4.6 128,000,
// "the 4.5 models keep 64000" (Effect-TS/effect release @effect/ai-anthropic@4.0.0-beta.106, #7129). Opus 4 and
// 4.1 (32,000), Sonnet 4 and Haiku 4.5 (64,000) and Haiku 3.5 (8,192) are from Anthropic's models overview
// as remembered, not re-read here. A model not listed (Opus 5) reserves DefaultMaxOutputTokens; a figure too
// low here would under-reserve, so only a documented one is listed.
var maxOutputTokens = map[string]int64{
	"claude-opus-4-8": 128_000, "claude-opus-4-7": 128_000, "claude-opus-4-6": 128_000, "claude-sonnet-4-6": 128_000,
	"claude-opus-4-5": 64_000, "claude-opus-4-1": 32_000, "claude-opus-4-0": 32_000, "claude-opus-4": 32_000,
	"claude-sonnet-4-5": 64_000, "claude-sonnet-4-0": 64_000, "claude-sonnet-4": 64_000,
	"claude-haiku-4-5": 64_000, "claude-3-5-haiku": 8_192,

	"anthropic/claude-opus-4.6": 128_000, "anthropic/claude-sonnet-4.6": 128_000, "anthropic/claude-opus-4.5": 64_000,
	"anthropic/claude-opus-4.1": 32_000, "anthropic/claude-opus-4": 32_000, "anthropic/claude-sonnet-4.5": 64_000,
	"anthropic/claude-sonnet-4": 64_000, "anthropic/claude-haiku-4.5": 64_000, "anthropic/claude-3.5-haiku": 8_192,
}

// MaxOutputTokens is a model's largest output per call (looked up as prices are: the id, then without
// opencode's "openrouter/" prefix, then without a snapshot date), DefaultMaxOutputTokens for a model not listed.
func MaxOutputTokens(model string) int64 {
	for _, m := range priceCandidates(model) {
		if n, ok := maxOutputTokens[m]; ok {
			return n
		}
	}
	return DefaultMaxOutputTokens
}
