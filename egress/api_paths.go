package egress

import (
	"fmt"
	"net/url"
	"strings"
)

// The broker forwards only the methods and paths a node's configuration lists (BrokerConfig.Paths, copied by the
// plan from the runner's API: runners.BrokeredAPIPaths). Every other path of the endpoint (batches, files, admin
// APIs) is billed or kept outside the answers the meter reads, so it is refused in the API's own error shape.

// ReasonPathNotAllowed is the reason of a brokered request whose method and path are not in the node's list.
const ReasonPathNotAllowed = "path not brokered"

// BrokerPath is one method and path the broker forwards. Path is the endpoint's own path, from its root
// ("/v1/messages", "/api/v1/chat/completions"); a segment written "{name}" matches any one non-empty segment
// ("/v1/models/{id}"). ModelCall marks a path whose answers are billed: the broker reserves its worst case
// before forwarding it and counts it against max_turns.
type BrokerPath struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	ModelCall bool   `json:"model_call,omitempty"`
}

// String is "METHOD /path", as the plan shows it.
func (p BrokerPath) String() string { return p.Method + " " + p.Path }

// checkBrokerPath says why a configured path is not one, "" when it is.
func checkBrokerPath(p BrokerPath) string {
	switch {
	case p.Method == "" || strings.ToUpper(p.Method) != p.Method || strings.ContainsAny(p.Method, " /"):
		return fmt.Sprintf("method %q is not an upper-case HTTP method", p.Method)
	case !strings.HasPrefix(p.Path, "/") || strings.ContainsAny(p.Path, "?# ") || strings.Contains(p.Path, "//"):
		return fmt.Sprintf("path %q is not an absolute path without a query", p.Path)
	}
	return ""
}

// matchBrokerPath finds the node's entry for a request's method and API path (escaped, as brokerTarget returns
// it); false when none matches. The path is compared segment by segment after unescaping, so an escaped slash
// or dot never matches a segment it is not.
func matchBrokerPath(paths []BrokerPath, method, escaped string) (BrokerPath, bool) {
	got := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, seg := range got {
		s, err := url.PathUnescape(seg)
		if err != nil || strings.Contains(s, "/") {
			return BrokerPath{}, false
		}
		got[i] = s
	}
	for _, p := range paths {
		if p.Method != method {
			continue
		}
		want := strings.Split(strings.TrimPrefix(p.Path, "/"), "/")
		if len(want) != len(got) {
			continue
		}
		ok := true
		for i, w := range want {
			if strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}") {
				ok = ok && got[i] != ""
			} else {
				ok = ok && got[i] == w
			}
		}
		if ok {
			return p, true
		}
	}
	return BrokerPath{}, false
}

// pathSentence is the refusal of a method and path the node's list does not hold: what is refused, why, and which
// configuration would allow it.
func pathSentence(node, method, path string, paths []BrokerPath) string {
	names := make([]string, 0, len(paths))
	for i, p := range paths {
		if i == maxListedEntries {
			names = append(names, fmt.Sprintf("and %d more", len(paths)-maxListedEntries))
			break
		}
		names = append(names, p.String())
	}
	allowed := "no path"
	if len(names) > 0 {
		allowed = strings.Join(names, ", ")
	}
	return fmt.Sprintf("kewplan's credential broker refused %s %s for node %s because it brokers only %s: any other path of the API "+
		"(batches, files and the like) is billed outside the answers its meter reads, so it would bypass the node's budget; "+
		"to use it, set credentials = \"forward\" for the node (its container then holds the real credential and the proxy does not meter it).",
		method, clip(path), node, allowed)
}
