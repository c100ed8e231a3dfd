package views

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/egress/suggest"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// EgressSuggest is the view of `kewplan egress suggest`.
type EgressSuggest interface {
	Suggestion(s *suggest.Suggestion) error
}

// NewEgressSuggest returns egress suggest's view: HCL blocks to review (as `kewplan fmt` writes them), or JSON.
func NewEgressSuggest(vt ViewType, s Streams) EgressSuggest {
	return &egressSuggestView{NewView(s), vt}
}

type egressSuggestView struct {
	*View
	vt ViewType
}

// egressSuggestJSON is `kewplan egress suggest --json`.
type egressSuggestJSON struct {
	RunID        string             `json:"run_id"`
	Sandbox      egressAllowJSON    `json:"sandbox"`
	Nodes        []egressNodeJSON   `json:"nodes"`
	NotSuggested []egressDenialJSON `json:"not_suggested"`
}

type egressAllowJSON struct {
	Allow []string `json:"allow"`
}

type egressNodeJSON struct {
	Node  string   `json:"node"`
	Allow []string `json:"allow"`
}

func (v *egressSuggestView) Suggestion(s *suggest.Suggestion) error {
	if v.vt == viewJSON {
		doc := egressSuggestJSON{RunID: termsafe.Flatten(s.RunID), Sandbox: egressAllowJSON{Allow: nonNilList(s.Sandbox)},
			Nodes: []egressNodeJSON{}, NotSuggested: egressDenialsJSON(s.NotSuggested)}
		for _, n := range s.Nodes {
			doc.Nodes = append(doc.Nodes, egressNodeJSON{Node: termsafe.Flatten(n.Node), Allow: nonNilList(n.Allow)})
		}
		enc := json.NewEncoder(v.streams.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	_, err := v.streams.Stdout.Write(egressSuggestHCL(s))
	return err
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// egressSuggestHCL writes the proposal as configuration blocks, formatted as `kewplan fmt` leaves them, with
// comments for what it could not propose. Entries and node names are written as HCL strings (escaped by
// hclwrite), and every comment line is flattened: the denials' hosts are what an agent asked for.
func egressSuggestHCL(s *suggest.Suggestion) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	comment := func(text string) {
		body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte("# " + termsafe.Flatten(text) + "\n")}})
	}
	comment(fmt.Sprintf("Egress entries that would have allowed the denials of run %s.", s.RunID))
	comment("Review each host before adding it to the configuration's egress blocks: kewplan changed nothing.")
	if s.Empty() {
		comment("No recorded denial of this run is answered by an allow entry.")
	}
	list := func(b *hclwrite.Body, entries []string) {
		vals := make([]cty.Value, len(entries))
		for i, e := range entries {
			vals[i] = cty.StringVal(e)
		}
		b.SetAttributeValue("allow", cty.ListVal(vals))
	}
	if len(s.Sandbox) > 0 {
		body.AppendNewline()
		sb := body.AppendNewBlock("sandbox", nil).Body()
		list(sb.AppendNewBlock("egress", nil).Body(), s.Sandbox)
	}
	for _, n := range s.Nodes {
		body.AppendNewline()
		nb := body.AppendNewBlock("node", []string{n.Node}).Body()
		list(nb.AppendNewBlock("egress", nil).Body(), n.Allow)
	}
	if len(s.NotSuggested) > 0 {
		body.AppendNewline()
		comment("Denials no allow entry answers, each with its reason:")
		for _, d := range s.NotSuggested {
			node := d.Node
			if node == "" {
				node = "-"
			}
			comment(fmt.Sprintf("  %s %s %s (%s)", node, d.Method, d.HostPort(), d.Reason))
		}
	}
	out := hclwrite.Format(f.Bytes())
	return []byte(strings.TrimLeft(string(out), "\n"))
}
