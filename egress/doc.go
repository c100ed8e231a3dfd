// Package egress is kewplan's egress proxy: an HTTP forward proxy (on github.com/elazarl/goproxy) that lets each
// agent container, authenticated by its own proxy secret, CONNECT only to the hosts and ports of its node's
// allowlist, resolves names itself (agents have no DNS), refuses IP literals and addresses on the host's side of
// the network (a host the plan names in private_hosts may resolve to a private range), and writes every decision
// as one JSON line. Every refusal answers the agent with one sentence of what was refused and why (refusal.go),
// and the proxy bounds what it holds for its clients, per node and in all, so that no node can take egress away
// from the others (limits.go).
//
// On the same listener it is also a credential broker (broker.go): an agent whose base URL is
// /broker/<node>/<identity>/<endpoint>/ (identity.go: bound to the node's proxy secret) presents a per-run
// placeholder, and the proxy forwards its request, if its method and path are the node's (api_paths.go), over
// verified TLS to that endpoint with the node's real credential, which only the proxy holds; apply ends a node on
// /control/nodes/<node>/end, after which its placeholders are refused. The broker reserves a model call's worst
// case before forwarding it and refuses it when that would cross a cap (reserve.go), meters every answer as it
// passes (meter.go: the provider's own usage, never the stream held back), settles the reservation to it, and
// writes the figures on the request's decision line (broker_budget.go).
// Before a brokered request goes upstream the broker also reads its body and anthropic-beta header and refuses
// what would make the provider fetch on the agent's behalf (web search and fetch, code execution, MCP servers, URL
// sources) unless the node opted in to that feature (provider_fetch.go).
//
// It also holds what apply needs to run the proxy: the configuration file format (Config), per-node secrets and
// proxy URLs, the health probe, and the facts of its image built FROM scratch from kewplan's own binary (with, for a
// dynamically linked build, its ELF interpreter and shared libraries: RuntimeFiles).
// It does not talk to Docker: the executor starts the container, feeds the configuration on stdin and reads the
// decisions from its stdout.
package egress
