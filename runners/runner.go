package runners

// Runner is one agent adapter.
type Runner interface {
	// Name is the runner's name as written in configuration ("claude-code", ...).
	Name() string
	// Protocol is the stdout vocabulary its meter reads: "claude-code", "opencode", "pi", "hermes" or "lemonade".
	Protocol() string
	// RequiredCredentials are environment variable names forwarded into the container by name, in order.
	RequiredCredentials() []string
	// Endpoints are the hosts of the runner's model API (egress entries: "host" for port 443, or "host:port"),
	// which an allowlist node on this runner may reach without listing them. Lemonade has none: its server is
	// local, and the configuration names it.
	Endpoints() []string
	// ContainerArgs is the container command (the entrypoint's "$@") for a routed model.
	ContainerArgs(model string) []string
	// NewMeter starts metering one run; routedModel is the fallback when the stream names no model.
	NewMeter(routedModel string) Meter
}

// Meter reads one run's stdout, one line at a time. It is not safe for concurrent use.
type Meter interface {
	// Line observes one complete stdout line, without its trailing "\n" (a trailing "\r" is tolerated).
	Line(line []byte)
	// Oversized records a line longer than MaxLineBytes that was skipped unread.
	Oversized()
	// Totals reports the figures so far; after the last line it is the run's final RunTotals. Mid-run it is
	// the live figure for progress, never a double count: repeated usage is deduplicated, and where the
	// vocabulary gives the real figure only at its end (Claude Code's output tokens and cost, Hermes' tokens),
	// the live one is a lower bound or absent until Finished. Each call returns a fresh value.
	Totals() RunTotals
}

// TurnCounter is implemented by the meters whose vocabulary shows each model turn as it happens (claude-code,
// opencode, pi, lemonade); a budget's max_turns is enforced from it. Hermes reports no turns in its stream.
type TurnCounter interface {
	// LiveTurns is the number of model turns seen so far; false when the vocabulary does not show turns.
	LiveTurns() (int64, bool)
}

// MaxLineBytes is the longest stdout line a meter parses; longer lines are counted as oversized and skipped.
const MaxLineBytes = 16 << 20

// Model sources for RunTotals.ModelSource.
const (
	ModelReported = "reported" // the stream named the model
	ModelRouted   = "routed"   // the stream named none; the routed model stands in
)

// RunTotals is the telemetry of one run. Token figures are never guessed: a field the vocabulary does not carry
// stays zero, and CostUSD stays nil when the agent reported no cost.
type RunTotals struct {
	Model            string   `json:"model"`
	ModelSource      string   `json:"model_source"`
	SessionID        string   `json:"session_id"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	IsError          bool     `json:"is_error"`
	Turns            *int64   `json:"turns"`
	// Finished is true once the vocabulary's terminal event was seen (claude-code/hermes result, pi agent_settled).
	Finished       bool  `json:"finished"`
	Events         int64 `json:"events"`
	UnparsedLines  int64 `json:"unparsed_lines"`
	OversizedLines int64 `json:"oversized_lines"`
	// APIError is set when the run ended on a transient model-API failure the agent reported (overloaded, rate
	// limited, a server error, the API unreachable): a short reason such as "HTTP 529 overloaded". It is "" for
	// a success and for a permanent API error (a refused request, a bad key), which a retry would only repeat.
	// See ClassifyAPIError.
	APIError string `json:"api_error,omitempty"`
}
