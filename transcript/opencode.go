package transcript

import "encoding/json"

// opencodeVocab reads opencode's `run --format json` events. A tool_use line carries the call and its finished
// state together; each step_finish is one model call's usage and cost. Version 1.18.33 has no terminal event
// (the result comes from Finish); later ones end with "done".
type opencodeVocab struct{}

type opencodeLine struct {
	Type string `json:"type"`
	Part struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Tool   string `json:"tool"`
		CallID string `json:"callID"`
		State  struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
			Time   struct {
				Start *int64 `json:"start"`
				End   *int64 `json:"end"`
			} `json:"time"`
		} `json:"state"`
		Reason string `json:"reason"`
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost *float64 `json:"cost"`
	} `json:"part"`
	Error json.RawMessage `json:"error"`
}

func (opencodeVocab) line(p *Parser, line []byte) bool {
	var l opencodeLine
	if !decode(line, &l) {
		return false
	}
	part := &l.Part
	switch l.Type {
	case "text":
		if part.Text != "" {
			p.emit(Event{Kind: KindText, Role: RoleAssistant, Text: part.Text})
		}
	case "reasoning":
		if part.Text != "" {
			p.emit(Event{Kind: KindText, Role: RoleReasoning, Text: part.Text})
		}
	case "tool_use":
		st := &part.State
		p.emit(Event{Kind: KindToolCall, Tool: part.Tool, CallID: part.CallID, Summary: Summarize(part.Tool, st.Input), Input: st.Input})
		switch st.Status {
		case "completed", "error":
			e := Event{Kind: KindToolResult, Tool: part.Tool, CallID: part.CallID, Output: st.Output, IsError: st.Status == "error"}
			if e.IsError && e.Output == "" {
				e.Output = st.Error
			}
			if st.Time.Start != nil && st.Time.End != nil && *st.Time.End >= *st.Time.Start {
				e.DurationMS = ptr(*st.Time.End - *st.Time.Start)
			}
			p.emit(e)
		}
	case "step_finish":
		e := Event{Kind: KindUsage, StopReason: part.Reason, CostUSD: part.Cost}
		if t := part.Tokens; t != nil {
			e.InputTokens, e.OutputTokens = ptr(t.Input), ptr(t.Output+t.Reasoning)
			e.CacheReadTokens, e.CacheWriteTokens = ptr(t.Cache.Read), ptr(t.Cache.Write)
		}
		p.emit(e)
	case "error":
		p.emit(opencodeError(l.Error))
	case "done":
		p.emitResult(Event{StopReason: p.lastStop, Text: p.lastText})
	}
	return true
}

func opencodeError(raw json.RawMessage) Event {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message    string `json:"message"`
			StatusCode int64  `json:"statusCode"`
		} `json:"data"`
	}
	decode(raw, &e)
	msg := e.Data.Message
	switch {
	case msg == "" && e.Name == "":
		var s string
		if json.Unmarshal(raw, &s) == nil {
			msg = s
		}
	case msg == "":
		msg = e.Name
	case e.Name != "":
		msg = e.Name + ": " + msg
	}
	return Event{Kind: KindError, Message: msg, Status: e.Data.StatusCode}
}

func (opencodeVocab) finish(*Parser) {}
