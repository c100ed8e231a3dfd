package transcript

import "encoding/json"

// claudeVocab reads Claude Code's stream-json. One API response arrives as one "assistant" line per content
// block, all with the same message.id and the same usage: the usage event is emitted once per message id, after
// the message's last block (when a line of another message, or the end, arrives). Its output_tokens is the
// stream's placeholder, so a call's output count is left out; the real one is in the result.
type claudeVocab struct {
	pending   *Event // the usage of the message being streamed
	pendingID string
	seen      [64]string // recent message ids, so a late block never re-counts a message
	next      int
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type claudeLine struct {
	Type    string `json:"type"`
	Message struct {
		ID         string          `json:"id"`
		Model      string          `json:"model"`
		StopReason string          `json:"stop_reason"`
		Content    json.RawMessage `json:"content"`
		Usage      *struct {
			Input      int64 `json:"input_tokens"`
			Output     int64 `json:"output_tokens"`
			CacheRead  int64 `json:"cache_read_input_tokens"`
			CacheWrite int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Error          string          `json:"error"`
	IsAPIError     bool            `json:"is_api_error_message"`
	APIErrorStatus int64           `json:"api_error_status"`
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	StopReason     string          `json:"stop_reason"`
	TerminalReason string          `json:"terminal_reason"`
	Subtype        string          `json:"subtype"`
	Errors         json.RawMessage `json:"errors"`
	DurationMS     *int64          `json:"duration_ms"`
}

func (v *claudeVocab) line(p *Parser, line []byte) bool {
	var l claudeLine
	if !decode(line, &l) {
		return false
	}
	if !(l.Type == "assistant" && l.Message.ID != "" && l.Message.ID == v.pendingID) {
		v.flush(p)
	}
	switch l.Type {
	case "assistant":
		v.assistant(p, &l)
	case "user":
		var blocks []claudeBlock
		decode(l.Message.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				p.emit(Event{Kind: KindToolResult, CallID: b.ToolUseID, Output: blockText(b.Content), IsError: b.IsError})
			}
		}
	case "result":
		v.result(p, &l)
	}
	return true
}

func (v *claudeVocab) assistant(p *Parser, l *claudeLine) {
	var blocks []claudeBlock
	decode(l.Message.Content, &blocks)
	synthetic := l.Message.Model == "<synthetic>"
	if l.IsAPIError || (synthetic && l.Error != "") {
		// Claude Code reports a failed API call as a synthetic assistant message whose text is the error.
		msg := blockText(l.Message.Content)
		if msg == "" {
			msg = l.Error
		}
		p.emit(Event{Kind: KindError, Message: msg, Status: l.APIErrorStatus})
		return
	}
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
		case "tool_use", "server_tool_use":
			p.emit(Event{Kind: KindToolCall, Tool: b.Name, CallID: b.ID, Summary: Summarize(b.Name, b.Input), Input: b.Input})
		}
	}
	u := l.Message.Usage
	if u == nil || synthetic || l.Message.ID == v.pendingID || v.wasSeen(l.Message.ID) {
		return
	}
	e := &Event{Kind: KindUsage, Line: p.line, Model: l.Message.Model, StopReason: l.Message.StopReason,
		InputTokens: ptr(u.Input), CacheReadTokens: ptr(u.CacheRead), CacheWriteTokens: ptr(u.CacheWrite)}
	if l.Message.StopReason != "" { // a finished message: its output count is real, not the placeholder
		e.OutputTokens = ptr(u.Output)
	}
	if l.Message.ID == "" {
		p.emit(*e)
		return
	}
	v.pending, v.pendingID = e, l.Message.ID
	v.seen[v.next] = l.Message.ID
	v.next = (v.next + 1) % len(v.seen)
}

func (v *claudeVocab) wasSeen(id string) bool {
	if id == "" {
		return false
	}
	for _, s := range v.seen {
		if s == id {
			return true
		}
	}
	return false
}

func (v *claudeVocab) flush(p *Parser) {
	if v.pending != nil {
		p.emit(*v.pending)
	}
	v.pending, v.pendingID = nil, ""
}

func (v *claudeVocab) result(p *Parser, l *claudeLine) {
	var errs []string
	decode(l.Errors, &errs)
	for _, msg := range errs {
		p.emit(Event{Kind: KindError, Message: msg})
	}
	e := Event{StopReason: l.StopReason, IsError: l.IsError, DurationMS: l.DurationMS}
	if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
		e.IsError = true
		if l.TerminalReason != "" {
			e.StopReason = l.TerminalReason
		} else if l.Subtype != "success" {
			e.StopReason = l.Subtype
		}
		if p.errors == 0 && l.Result != "" {
			p.emit(Event{Kind: KindError, Message: l.Result, Status: l.APIErrorStatus})
		}
	} else {
		e.Text = l.Result
	}
	p.emitResult(e)
}

func (v *claudeVocab) finish(p *Parser) { v.flush(p) }
