package transcript

import (
	"encoding/json"
	"strconv"
)

// piVocab reads pi's `--mode json` events (and lemonade's, which is pi's). Everything is taken from message_end:
// an assistant message gives its text, tool calls, one usage event and, when it stopped with an error, an error
// event; a toolResult message gives the tool's result. The same messages repeated in message_update, turn_end
// and agent_end are ignored, and so are tool_execution_* (the toolResult message says the same). The run ends
// at agent_settled.
type piVocab struct{}

type piLine struct {
	Type    string `json:"type"`
	Message struct {
		Role         string          `json:"role"`
		Content      json.RawMessage `json:"content"`
		Provider     string          `json:"provider"`
		Model        string          `json:"model"`
		StopReason   string          `json:"stopReason"`
		ErrorMessage string          `json:"errorMessage"`
		ToolCallID   string          `json:"toolCallId"`
		ToolName     string          `json:"toolName"`
		IsError      bool            `json:"isError"`
		DurationMS   *int64          `json:"durationMs"`
		Usage        *struct {
			Input      int64 `json:"input"`
			Output     int64 `json:"output"`
			CacheRead  int64 `json:"cacheRead"`
			CacheWrite int64 `json:"cacheWrite"`
			Cost       struct {
				Total *float64 `json:"total"`
			} `json:"cost"`
		} `json:"usage"`
	} `json:"message"`
	Aborted     bool   `json:"aborted"`
	Success     *bool  `json:"success"`
	Attempt     int64  `json:"attempt"`
	MaxAttempts int64  `json:"maxAttempts"`
	FinalError  string `json:"finalError"`
}

type piBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (piVocab) line(p *Parser, line []byte) bool {
	var l piLine
	if !decode(line, &l) {
		return false
	}
	switch l.Type {
	case "message_end":
		switch l.Message.Role {
		case "assistant":
			piAssistant(p, &l)
		case "toolResult":
			m := &l.Message
			p.emit(Event{Kind: KindToolResult, Tool: m.ToolName, CallID: m.ToolCallID, Output: blockText(m.Content),
				IsError: m.IsError, DurationMS: m.DurationMS})
		}
	case "auto_retry_end":
		if l.Success != nil && !*l.Success {
			msg := "retries exhausted"
			if l.Attempt > 0 {
				msg += " after attempt " + strconv.FormatInt(l.Attempt, 10)
			}
			if l.FinalError != "" {
				msg += ": " + l.FinalError
			}
			p.emit(Event{Kind: KindError, Message: msg})
		}
	case "agent_settled":
		e := Event{StopReason: p.lastStop, Text: p.lastText}
		if l.Aborted {
			e.StopReason, e.IsError = "aborted", true
		}
		p.emitResult(e)
	}
	return true
}

func piAssistant(p *Parser, l *piLine) {
	m := &l.Message
	var blocks []piBlock
	decode(m.Content, &blocks)
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != "" {
				p.emit(Event{Kind: KindText, Role: RoleAssistant, Text: b.Text})
			}
		case "thinking":
			if b.Thinking != "" {
				p.emit(Event{Kind: KindText, Role: RoleReasoning, Text: b.Thinking})
			}
		case "toolCall":
			p.emit(Event{Kind: KindToolCall, Tool: b.Name, CallID: b.ID, Summary: Summarize(b.Name, b.Arguments), Input: b.Arguments})
		}
	}
	switch m.StopReason {
	case "error", "aborted", "length":
		msg := m.ErrorMessage
		if msg == "" {
			msg = "the model call stopped: " + m.StopReason
		}
		p.emit(Event{Kind: KindError, Message: msg})
	}
	if u := m.Usage; u != nil {
		p.emit(Event{Kind: KindUsage, Model: m.Model, StopReason: m.StopReason,
			InputTokens: ptr(u.Input), OutputTokens: ptr(u.Output), CacheReadTokens: ptr(u.CacheRead),
			CacheWriteTokens: ptr(u.CacheWrite), CostUSD: u.Cost.Total})
	}
}

func (piVocab) finish(*Parser) {}
