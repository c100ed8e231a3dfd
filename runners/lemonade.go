package runners

// lemonade runs pi against a Lemonade server (lemonade-sdk/lemonade): a local model server, not a coding agent.
// It is what `lemonade launch pi` sets up, reproduced without the interactive launcher.
//
// Image entrypoint, after the prompt-file check and the git bootstrap (the entrypoint also writes pi's
// models.json with a "lemonade" provider whose baseUrl is the server's /v1 and whose apiKey is the placeholder
// "lemonade"):
//
//	exec pi "$@" <"$PROMPT_FILE"
//
// Container args: --mode json --no-session --provider lemonade --model <model>, where model is the Lemonade
// model id (for example Qwen3.5-35B-A3B-GGUF).
//
// Credentials: none. The model server is local and needs no cloud key, so the runner declares nothing to
// forward — and a runner with no in-container credential is refused for containment by the planner rather than
// contained (the contract's table). It exists so that configurations can name it and be told why.
//
// Vocabulary: pi's (see pi), with one difference: the cost is 0. The model runs on local hardware, and a price
// pi computed for a custom model would be a made-up figure either way.
var lemonade = &builtin{
	name:        "lemonade",
	protocol:    "lemonade",
	credentials: nil,
	args: func(model string) []string {
		return []string{"--mode", "json", "--no-session", "--provider", "lemonade", "--model", model}
	},
}

type lemonadeMeter struct{ piMeter }

func newLemonadeMeter(routed string) *lemonadeMeter {
	return &lemonadeMeter{piMeter{tally: tally{routed: routed}}}
}

func (m *lemonadeMeter) Totals() RunTotals {
	rt := m.piMeter.Totals()
	rt.CostUSD = costOf(0)
	return rt
}
