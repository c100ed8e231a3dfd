package transcript

import "encoding/json"

// Kind is what an Event is.
type Kind string

// The event kinds, the same for every vocabulary.
const (
	KindText       Kind = "text"        // the assistant's text (Role "assistant") or its visible reasoning ("reasoning")
	KindToolCall   Kind = "tool_call"   // a tool the agent called: Tool, CallID, Summary, Input
	KindToolResult Kind = "tool_result" // what a tool returned: Tool, CallID, Output, IsError
	KindError      Kind = "error"       // an API error, an agent failure or a failed retry: Message, Status
	KindUsage      Kind = "usage"       // one model call's tokens and cost
	KindResult     Kind = "result"      // the run's end: totals, stop reason, exit code, final answer
	KindStderr     Kind = "stderr"      // one line of the agent's stderr
	KindUnparsed   Kind = "unparsed"    // a stdout line that is not an event: Reason, Bytes, Excerpt
)

// Roles of a text event.
const (
	RoleAssistant = "assistant"
	RoleReasoning = "reasoning"
)

// Reasons of an unparsed event.
const (
	ReasonNotJSON   = "not_json"  // not a JSON object (garbage, a debug print, a truncated write)
	ReasonOversized = "oversized" // longer than MaxDecodeBytes: counted by the meter, not decoded
)

// Event is one normalised transcript event. Node, Seq and Kind are always set; the other fields belong to the
// kinds named in their comments and are omitted from JSON when empty. Strings are the stream's untrusted text,
// unescaped.
type Event struct {
	Node string `json:"node"`
	Seq  int64  `json:"seq"`  // 1, 2, 3… within one node's transcript
	Kind Kind   `json:"kind"` // see the Kind constants
	Line int64  `json:"line,omitempty"`

	Role string `json:"role,omitempty"` // text
	Text string `json:"text,omitempty"` // text, stderr; result: the final answer

	Tool    string          `json:"tool,omitempty"`    // tool_call, tool_result
	CallID  string          `json:"call_id,omitempty"` // tool_call, tool_result
	Summary string          `json:"summary,omitempty"` // tool_call: "bash: echo hi", "edit: src/parse.go"
	Input   json.RawMessage `json:"input,omitempty"`   // tool_call: the tool's input as the agent wrote it
	Output  string          `json:"output,omitempty"`  // tool_result
	IsError bool            `json:"is_error,omitempty"`

	Message string `json:"message,omitempty"` // error
	Status  int64  `json:"status,omitempty"`  // error: the HTTP status of an API error

	Model            string   `json:"model,omitempty"`              // usage, result
	InputTokens      *int64   `json:"input_tokens,omitempty"`       // usage, result
	OutputTokens     *int64   `json:"output_tokens,omitempty"`      // usage (absent when the call's output is not reported), result
	CacheReadTokens  *int64   `json:"cache_read_tokens,omitempty"`  // usage, result
	CacheWriteTokens *int64   `json:"cache_write_tokens,omitempty"` // usage, result
	CostUSD          *float64 `json:"cost_usd,omitempty"`           // usage, result: absent when the agent reported none
	StopReason       string   `json:"stop_reason,omitempty"`        // usage, result

	ExitCode   *int64 `json:"exit_code,omitempty"`   // result: when the stream states it (hermes)
	Turns      *int64 `json:"turns,omitempty"`       // result
	DurationMS *int64 `json:"duration_ms,omitempty"` // tool_result, result
	SessionID  string `json:"session_id,omitempty"`  // result

	Reason  string `json:"reason,omitempty"`  // unparsed: ReasonNotJSON or ReasonOversized
	Bytes   int64  `json:"bytes,omitempty"`   // unparsed: the line's length
	Excerpt string `json:"excerpt,omitempty"` // unparsed: its first ExcerptBytes bytes
}
