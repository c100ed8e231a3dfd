package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/kewplan/kewplan/internal/redact"
	"github.com/kewplan/kewplan/runners"
)

// MaxDecodeBytes is the longest line decoded into events. A longer line (a huge tool result, a runaway print)
// becomes an unparsed event with a short excerpt; the meter still reads it, so the totals stay exact.
const MaxDecodeBytes = 1 << 20

// ExcerptBytes is how much of an unparsed line its event keeps.
const ExcerptBytes = 120

// maxKeptText caps the text a parser holds between lines (Hermes' coalesced deltas, the last assistant text kept
// as the final answer), so that an endless stream costs flat memory.
const maxKeptText = 64 << 10

// vocabulary decodes one vocabulary's lines. line is a JSON object of at most MaxDecodeBytes, already metered;
// it reports false when the object could not be decoded at all.
type vocabulary interface {
	line(p *Parser, line []byte) bool
	finish(p *Parser)
}

// Parser turns one node's stdout into events. It is not safe for concurrent use.
type Parser struct {
	node     string
	meter    runners.Meter
	vocab    vocabulary
	seq      int64
	line     int64
	out      []Event
	result   bool                          // a result event was emitted
	errors   int                           // error events emitted
	lastText string                        // the last assistant text, the final answer of a vocabulary that states none
	lastStop string                        // the last model call's stop reason
	calls    [64]struct{ id, tool string } // recent tool calls, to name a result that does not
	nextCall int
	mask     *redact.Masker // masks the node's secrets in every decoded string; nil masks nothing
}

// Protocols lists the vocabularies New accepts: the built-ins' and what a custom runner may declare.
func Protocols() []string { return []string{"claude-code", "hermes", "lemonade", "opencode", "pi"} }

// New starts the transcript of one node whose stdout speaks protocol (a runner's Protocol(): "claude-code",
// "opencode", "pi", "hermes", "lemonade"); routedModel is the model reported when the stream names none. It
// reports false for an unknown protocol.
func New(node, protocol, routedModel string) (*Parser, bool) {
	m, ok := runners.NewMeter(protocol, routedModel)
	if !ok {
		return nil, false
	}
	p := &Parser{node: node, meter: m}
	switch protocol {
	case "claude-code":
		p.vocab = &claudeVocab{}
	case "opencode":
		p.vocab = &opencodeVocab{}
	case "pi", "lemonade":
		p.vocab = &piVocab{}
	case "hermes":
		p.vocab = &hermesVocab{}
	default:
		return nil, false
	}
	return p, true
}

// Mask has every string of the events p makes masked by m, after the stream's JSON is decoded: a stored log is
// masked as it is written, but a reader sees what the transcript decodes (escapes undone, Hermes' deltas joined),
// and that is masked again here with the same masker. A nil m masks nothing.
func (p *Parser) Mask(m *redact.Masker) { p.mask = m }

// Totals is the meter's reading of the lines seen so far: the same figures `kewplan telemetry` reports.
func (p *Parser) Totals() runners.RunTotals { return p.meter.Totals() }

// Line reads one complete stdout line (without its "\n"; a trailing "\r" is tolerated) and returns the events
// it completes, possibly none. The returned slice is valid until the next call.
func (p *Parser) Line(line []byte) []Event {
	p.out = p.out[:0]
	p.line++
	if len(line) > runners.MaxLineBytes {
		p.meter.Oversized()
		p.unparsed(ReasonOversized, line, int64(len(line)))
		return p.out
	}
	p.meter.Line(line)
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return p.out
	}
	if len(line) > MaxDecodeBytes {
		p.unparsed(ReasonOversized, line, int64(len(line)))
		return p.out
	}
	if !isObject(line) || !p.vocab.line(p, line) {
		p.unparsed(ReasonNotJSON, line, int64(len(line)))
	}
	return p.out
}

// Oversized records a line longer than runners.MaxLineBytes that was not held in memory: head is its beginning
// (at least ExcerptBytes when the line is that long) and n its whole length.
func (p *Parser) Oversized(head []byte, n int64) []Event {
	p.out = p.out[:0]
	p.line++
	p.meter.Oversized()
	p.unparsed(ReasonOversized, head, n)
	return p.out
}

// Finish ends the stream: it emits what the vocabulary still held and, when the stream ended without its
// terminal event (opencode never has one; a killed agent), a result event with the totals so far and Reason
// "eof".
func (p *Parser) Finish() []Event {
	p.out = p.out[:0]
	p.vocab.finish(p)
	if !p.result && p.line > 0 {
		e := Event{Kind: KindResult, StopReason: p.lastStop, Reason: "eof", Text: p.lastText}
		p.emitResult(e)
	}
	return p.out
}

// Stderr makes the event of one stderr line. Stderr lines are numbered apart from stdout's.
func (p *Parser) Stderr(line []byte, lineNo int64) Event {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > MaxDecodeBytes {
		line = truncUTF8(line, MaxDecodeBytes)
	}
	p.seq++
	e := Event{Node: p.node, Seq: p.seq, Kind: KindStderr, Line: lineNo, Text: string(line)}
	p.redact(&e)
	return e
}

// redact masks the secrets in every string of e. A tool's input stays JSON: when masking would break it (a
// span cut inside an escape), the whole input becomes the mask.
func (p *Parser) redact(e *Event) {
	m := p.mask
	if m.Empty() {
		return
	}
	for _, s := range []*string{&e.Text, &e.Tool, &e.CallID, &e.Summary, &e.Output, &e.Message, &e.Model,
		&e.StopReason, &e.SessionID, &e.Excerpt} {
		if *s != "" {
			*s = m.String(*s)
		}
	}
	if len(e.Input) > 0 {
		in := m.Bytes(e.Input)
		if !json.Valid(in) {
			in = json.RawMessage(`"` + redact.Mask + `"`)
		}
		e.Input = in
	}
}

func (p *Parser) emit(e Event) {
	p.redact(&e)
	p.seq++
	e.Node, e.Seq = p.node, p.seq
	if e.Line == 0 {
		e.Line = p.line
	}
	switch e.Kind {
	case KindError:
		p.errors++
	case KindText:
		if e.Role == RoleAssistant {
			p.lastText = string(truncUTF8([]byte(e.Text), maxKeptText))
		}
	case KindToolCall:
		if e.CallID != "" {
			p.calls[p.nextCall].id, p.calls[p.nextCall].tool = e.CallID, e.Tool
			p.nextCall = (p.nextCall + 1) % len(p.calls)
		}
	case KindToolResult:
		for _, c := range p.calls {
			if e.Tool == "" && e.CallID != "" && c.id == e.CallID {
				e.Tool = c.tool
			}
		}
	case KindUsage:
		if e.StopReason != "" {
			p.lastStop = e.StopReason
		}
	}
	p.out = append(p.out, e)
}

// emitResult fills e with the meter's totals, the same figures telemetry reports, and emits it.
func (p *Parser) emitResult(e Event) {
	t := p.meter.Totals()
	e.Kind = KindResult
	e.Model, e.SessionID = t.Model, t.SessionID
	e.InputTokens, e.OutputTokens = ptr(t.InputTokens), ptr(t.OutputTokens)
	e.CacheReadTokens, e.CacheWriteTokens = ptr(t.CacheReadTokens), ptr(t.CacheWriteTokens)
	e.CostUSD, e.Turns = t.CostUSD, t.Turns
	e.IsError = e.IsError || t.IsError
	p.result = true
	p.emit(e)
}

func (p *Parser) unparsed(reason string, line []byte, n int64) {
	ex := line
	if !p.mask.Empty() {
		// Mask before cutting, so that a secret the cut would split is still whole.
		ex = p.mask.Bytes(ex[:min(len(ex), 4*ExcerptBytes)])
	}
	if len(ex) > ExcerptBytes {
		ex = truncUTF8(ex[:ExcerptBytes], ExcerptBytes)
	}
	p.emit(Event{Kind: KindUnparsed, Reason: reason, Bytes: n, Excerpt: string(ex)})
}

// isObject reports whether line is one syntactically valid JSON object.
func isObject(line []byte) bool {
	t := bytes.TrimLeft(line, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(line)
}

// decode fills v from a validated object, keeping what fits when a field has an unexpected type: agents add and
// change fields, and a new shape of one field must not hide the rest of the event.
func decode(line []byte, v any) bool {
	err := json.Unmarshal(line, v)
	var te *json.UnmarshalTypeError
	return err == nil || errors.As(err, &te)
}

func ptr[T any](v T) *T { return &v }

// truncUTF8 cuts b to at most n bytes without splitting a UTF-8 sequence.
func truncUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[:n]
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// blockText is the text of a content value that is a string or an array of {"type":"text","text":…} blocks.
func blockText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	decode(raw, &blocks)
	var b []byte
	for _, bl := range blocks {
		if bl.Type != "text" && bl.Type != "" {
			continue
		}
		if len(b) > 0 && bl.Text != "" {
			b = append(b, '\n')
		}
		b = append(b, bl.Text...)
	}
	return string(b)
}
