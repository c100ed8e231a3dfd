package runners

import "math"

// tally is what every meter shares: the line counters and the routed-model fallback.
type tally struct {
	events, unparsed, oversized int64
	routed                      string
}

// Oversized records a line longer than MaxLineBytes that Feed skipped unread.
func (t *tally) Oversized() { t.oversized++ }

// totals starts a RunTotals with the counters and the model: the reported one, else the routed one.
func (t *tally) totals(reported string) RunTotals {
	rt := RunTotals{Events: t.events, UnparsedLines: t.unparsed, OversizedLines: t.oversized}
	switch {
	case reported != "":
		rt.Model, rt.ModelSource = reported, ModelReported
	case t.routed != "":
		rt.Model, rt.ModelSource = t.routed, ModelRouted
	}
	return rt
}

// object validates line as one JSON object and walks its top-level members, counting the line as an event or
// as unparsed. A trailing "\r" (a CRLF stream) is tolerated.
func (t *tally) object(line []byte, fn func(key, val []byte)) bool {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if !eachMember(line, fn) {
		t.unparsed++
		return false
	}
	t.events++
	return true
}

// usage is the token figures of one model response or of a whole run.
type usage struct {
	input, output, cacheRead, cacheWrite int64
}

func (u *usage) add(v usage) {
	u.input = addSat(u.input, v.input)
	u.output = addSat(u.output, v.output)
	u.cacheRead = addSat(u.cacheRead, v.cacheRead)
	u.cacheWrite = addSat(u.cacheWrite, v.cacheWrite)
}

func (u *usage) sub(v usage) {
	u.input -= v.input
	u.output -= v.output
	u.cacheRead -= v.cacheRead
	u.cacheWrite -= v.cacheWrite
}

func (u usage) into(rt *RunTotals) {
	rt.InputTokens, rt.OutputTokens = u.input, u.output
	rt.CacheReadTokens, rt.CacheWriteTokens = u.cacheRead, u.cacheWrite
}

// costOf reports a cost rounded to 1e-10 USD. Agents compute cost in float64 and print the noise
// (0.0072675000000000005); sums of per-step costs add more. Ten decimals keep every real figure and drop the
// noise, so the same run always renders the same number.
func costOf(c float64) *float64 {
	if c < 1e5 {
		c = math.Round(c*1e10) / 1e10
	}
	return &c
}

func int64Ptr(n int64) *int64 { return &n }

// blindMeter reads a vocabulary kewplan does not know: the run is logged and its lines counted, but it is
// cost-blind (the contract's "cost-blind, not broken").
type blindMeter struct{ tally }

func (m *blindMeter) Line(line []byte) { m.object(line, func(_, _ []byte) {}) }

func (m *blindMeter) Totals() RunTotals { return m.totals("") }
