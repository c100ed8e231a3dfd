package transcript

import (
	"encoding/json"
	"strings"
)

// hermesVocab reads Hermes' `--format stream-json`. Its text lines are raw streaming deltas; they are coalesced
// into one text event, emitted when another event arrives (or 64 KiB have gathered, or the stream ends). Tokens
// exist only in the result, so there is no per-call usage event.
type hermesVocab struct {
	text     strings.Builder
	textLine int64
}

type hermesLine struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	Input      json.RawMessage `json:"input"`
	Output     string          `json:"output"`
	IsError    bool            `json:"is_error"`
	DurationMS *int64          `json:"duration_ms"`
	ExitCode   *int64          `json:"exit_code"`
	Error      string          `json:"error"`
}

func (v *hermesVocab) line(p *Parser, line []byte) bool {
	var l hermesLine
	if !decode(line, &l) {
		return false
	}
	if l.Type == "text" {
		if v.text.Len() == 0 {
			v.textLine = p.line
		}
		v.text.WriteString(l.Text)
		if v.text.Len() >= maxKeptText {
			v.flush(p)
		}
		return true
	}
	v.flush(p)
	switch l.Type {
	case "tool_use":
		p.emit(Event{Kind: KindToolCall, Tool: l.Name, CallID: l.ToolCallID, Summary: Summarize(l.Name, l.Input), Input: l.Input})
	case "tool_result":
		p.emit(Event{Kind: KindToolResult, Tool: l.Name, CallID: l.ToolCallID, Output: l.Output, IsError: l.IsError, DurationMS: l.DurationMS})
	case "result":
		failed := l.Error != "" || (l.ExitCode != nil && *l.ExitCode != 0)
		if l.Error != "" {
			p.emit(Event{Kind: KindError, Message: l.Error})
		}
		e := Event{Text: l.Text, ExitCode: l.ExitCode, DurationMS: l.DurationMS, IsError: failed, StopReason: "completed"}
		if failed {
			e.StopReason = "error"
			if l.ExitCode != nil && *l.ExitCode == 130 {
				e.StopReason = "interrupted"
			}
		}
		p.emitResult(e)
	}
	return true
}

func (v *hermesVocab) flush(p *Parser) {
	if v.text.Len() == 0 {
		return
	}
	p.emit(Event{Kind: KindText, Role: RoleAssistant, Text: v.text.String(), Line: v.textLine})
	v.text.Reset()
}

func (v *hermesVocab) finish(p *Parser) { v.flush(p) }
