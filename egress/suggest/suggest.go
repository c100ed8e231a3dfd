package suggest

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
)

// Suggestion is what `kewplan egress suggest` proposes for one run.
type Suggestion struct {
	RunID string
	// Sandbox are the entries every node of the run asked for: the sandbox egress block's allow list.
	Sandbox []string
	// Nodes are the other entries, by node block, in name order.
	Nodes []NodeAllow
	// NotSuggested are denials no allow entry would have let through (no valid proxy credentials, an IP address,
	// a name resolving to a refused address, a malformed request, plain HTTP to port 443, a refusal for load),
	// each (node, method, host, port, reason) once.
	NotSuggested []ledger.EgressDenial
}

// NodeAllow is the allow list proposed for one node block.
type NodeAllow struct {
	Node  string
	Allow []string
}

// Empty reports whether there is nothing to propose.
func (s *Suggestion) Empty() bool { return len(s.Sandbox) == 0 && len(s.Nodes) == 0 }

// allowable are the reasons an allow entry answers: the name is valid and the proxy would have connected had the
// node's allowlist held it.
var allowable = map[string]bool{
	egress.ReasonHostNotAllowed: true,
	egress.ReasonOtherNodesHost: true,
	egress.ReasonPortNotAllowed: true,
	egress.ReasonPlainHTTP:      true,
}

// Build proposes entries for a run's denials. nodes are the run's nodes (instances are folded into their node
// block: `fix["api"]` is block fix); only denials of those nodes count, and a host is sandbox-wide when the run
// has more than one node block and every one of them asked for it.
func Build(runID string, nodes []string, denials []ledger.EgressDenial) *Suggestion {
	s := &Suggestion{RunID: runID}
	blocks := map[string]bool{}
	for _, n := range nodes {
		blocks[BlockName(n)] = true
	}
	byEntry := map[string]map[string]bool{} // entry -> node blocks that asked
	seenSkip := map[string]bool{}
	for _, d := range denials {
		block := BlockName(d.Node)
		if d.Node != "" && !blocks[block] {
			continue
		}
		entry, ok := entryFor(d)
		if !ok || d.Node == "" {
			key := strings.Join([]string{d.Node, d.Method, d.Host, strconv.Itoa(d.Port), d.Reason}, "\x00")
			if !seenSkip[key] {
				seenSkip[key] = true
				s.NotSuggested = append(s.NotSuggested, d)
			}
			continue
		}
		if byEntry[entry] == nil {
			byEntry[entry] = map[string]bool{}
		}
		byEntry[entry][block] = true
	}
	perNode := map[string][]string{}
	for entry, asked := range byEntry {
		// With one node block there is no "every node" to speak of: its own block is the narrower place.
		if len(blocks) > 1 && len(asked) == len(blocks) {
			s.Sandbox = append(s.Sandbox, entry)
			continue
		}
		for b := range asked {
			perNode[b] = append(perNode[b], entry)
		}
	}
	sortEntries(s.Sandbox)
	for _, b := range slices.Sorted(maps.Keys(perNode)) {
		list := perNode[b]
		sortEntries(list)
		s.Nodes = append(s.Nodes, NodeAllow{Node: b, Allow: list})
	}
	return s
}

// entryFor is the allow entry that would have let a denial through, as the configuration writes it ("host" for
// port 443, "host:port" otherwise); false when none would.
func entryFor(d ledger.EgressDenial) (string, bool) {
	if !allowable[d.Reason] || d.Port < 1 || d.Port > 65535 {
		return "", false
	}
	if d.Reason == egress.ReasonPlainHTTP && d.Port == config.DefaultEgressPort {
		return "", false // an entry on 443 is never open to plain HTTP; the agent must use https://
	}
	p, why := config.ParseHostPattern(d.Host + ":" + strconv.Itoa(d.Port))
	if why != "" || p.Wildcard() {
		return "", false
	}
	return p.String(), true
}

// BlockName is the node block an apply node (or instance address) comes from.
func BlockName(node string) string {
	if i := strings.IndexByte(node, '['); i > 0 {
		return node[:i]
	}
	return node
}

func sortEntries(list []string) {
	sort.Slice(list, func(i, j int) bool {
		a, _ := config.ParseHostPattern(list[i])
		b, _ := config.ParseHostPattern(list[j])
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Port < b.Port
	})
}
