package runners

import (
	"regexp"
	"sort"
	"strings"
)

// PricesAsOf is the date the built-in price table was last checked against its sources. Prices change: a
// `pricing "MODEL"` block in configuration overrides any entry, and `kewplan pricing` shows the table in force.
const PricesAsOf = "2026-12-01"

// PriceSources are where the built-in prices come from.
var PriceSources = []string{
	"https://platform.claude.com/docs/en/about-claude/pricing (Anthropic's published per-million-token prices; cache_write is the 5-minute cache write)",
	"OpenRouter lists Anthropic's models (anthropic/<model>) at Anthropic's own prices",
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Cost is the USD cost of token counts at this price.
func (p Price) Cost(input, output, cacheRead, cacheWrite int64) float64 {
	return (float64(input)*p.Input + float64(output)*p.Output + float64(cacheRead)*p.CacheRead +
		float64(cacheWrite)*p.CacheWrite) / 1e6
}

// OriginBuiltinPrice is the origin of a price from the built-in table; a pricing block's origin is its "file:line".
const OriginBuiltinPrice = "builtin"

// PriceEntry is one model's price and where it came from.
type PriceEntry struct {
	Model  string `json:"model"`
	Price  Price  `json:"price"`
	Origin string `json:"origin"` // OriginBuiltinPrice or the pricing block's "file:line"
}

// Anthropic's published prices (cache_write: the 5-minute write, 1.25 × input; cache_read: 0.1 × input).
var (
	priceOpus45  = Price{Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25}   // Opus 4.5 and later 4.x, Opus 5
	priceOpus4   = Price{Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75} // Opus 4 and 4.1
	priceSonnet4 = Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}   // Sonnet 4, 4.5, 4.6
	priceHaiku45 = Price{Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25}
	priceHaiku35 = Price{Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1}
)

// builtinPrices holds the models of the built-in runners' documented routes: Anthropic ids for claude-code, and
// the OpenRouter ids (anthropic/<model with dots>) that opencode, pi and hermes route through OpenRouter.
var builtinPrices = map[string]Price{
	"claude-opus-5":     priceOpus45,
	"claude-opus-4-8":   priceOpus45,
	"claude-opus-4-7":   priceOpus45,
	"claude-opus-4-6":   priceOpus45,
	"claude-opus-4-5":   priceOpus45,
	"claude-opus-4-1":   priceOpus4,
	"claude-opus-4-0":   priceOpus4,
	"claude-opus-4":     priceOpus4,
	"claude-sonnet-4-6": priceSonnet4,
	"claude-sonnet-4-5": priceSonnet4,
	"claude-sonnet-4-0": priceSonnet4,
	"claude-sonnet-4":   priceSonnet4,
	"claude-haiku-4-5":  priceHaiku45,
	"claude-3-5-haiku":  priceHaiku35,

	"anthropic/claude-opus-4.5":   priceOpus45,
	"anthropic/claude-opus-4.6":   priceOpus45,
	"anthropic/claude-opus-4.1":   priceOpus4,
	"anthropic/claude-opus-4":     priceOpus4,
	"anthropic/claude-sonnet-4.6": priceSonnet4,
	"anthropic/claude-sonnet-4.5": priceSonnet4,
	"anthropic/claude-sonnet-4":   priceSonnet4,
	"anthropic/claude-haiku-4.5":  priceHaiku45,
	"anthropic/claude-3.5-haiku":  priceHaiku35,
}

// PriceTable is the built-in prices with a configuration's overrides. The zero value is not usable; start from
// BuiltinPriceTable.
type PriceTable struct {
	entries map[string]PriceEntry
}

// BuiltinPriceTable returns a fresh table of the built-in prices.
func BuiltinPriceTable() *PriceTable {
	t := &PriceTable{entries: make(map[string]PriceEntry, len(builtinPrices))}
	for m, p := range builtinPrices {
		t.entries[m] = PriceEntry{Model: m, Price: p, Origin: OriginBuiltinPrice}
	}
	return t
}

// Override sets the price of model as written in a pricing block; origin is the block's "file:line".
func (t *PriceTable) Override(model string, p Price, origin string) {
	t.entries[model] = PriceEntry{Model: model, Price: p, Origin: origin}
}

// dateSuffix is the snapshot date Anthropic appends to a model id (claude-sonnet-4-5-20250929).
var dateSuffix = regexp.MustCompile(`-20\d{6}$`)

// Lookup finds a model's price: the id as routed, then without opencode's "openrouter/" provider prefix, then
// without a snapshot date suffix. False when the model has no known price: an unknown price is never zero.
func (t *PriceTable) Lookup(model string) (PriceEntry, bool) {
	for _, m := range priceCandidates(model) {
		if e, ok := t.entries[m]; ok {
			return e, true
		}
	}
	return PriceEntry{}, false
}

func priceCandidates(model string) []string {
	out := []string{model}
	m := strings.TrimPrefix(model, "openrouter/")
	if m != model {
		out = append(out, m)
	}
	if d := dateSuffix.ReplaceAllString(m, ""); d != m {
		out = append(out, d)
	}
	return out
}

// Entries lists the table sorted by model.
func (t *PriceTable) Entries() []PriceEntry {
	out := make([]PriceEntry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// ReportsTurnsLive says whether a vocabulary shows each model turn as it happens (its meter is a TurnCounter), so
// that a max_turns can be enforced: all but Hermes, whose stream has no turn count.
func ReportsTurnsLive(protocol string) bool {
	switch protocol {
	case "claude-code", "opencode", "pi", "lemonade":
		return true
	}
	return false
}

// ReportsCostLive says whether a vocabulary carries the agent's own cost per model call, so that the cost so far
// is known while the run goes on: opencode (step_finish.part.cost), pi (each assistant message_end's
// usage.cost.total) and lemonade (pi's vocabulary, cost zero on local hardware). Claude Code's total_cost_usd
// arrives only in its final result, and Hermes reports no cost at all: both need a price to be capped live.
func ReportsCostLive(protocol string) bool {
	switch protocol {
	case "opencode", "pi", "lemonade":
		return true
	}
	return false
}
