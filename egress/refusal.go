package egress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// RefusalHeader carries a refusal's sentence on the proxy's answer, beside the same sentence in the body: a client
// that shows only headers for a failed CONNECT (curl -v) still shows why.
const RefusalHeader = "X-Kewplan-Refusal"

// maxListedEntries bounds the allowlist a refusal sentence names: the sentence stays one readable line.
const maxListedEntries = 12

// refusalError is a dial the proxy refused, with its sentence: goproxy hands it back to errorResponse, which
// answers the agent with the sentence instead of goproxy's own text.
type refusalError struct {
	status   int
	sentence string
}

func (e *refusalError) Error() string { return e.sentence }

// refuse answers a refused request: the status, the sentence in RefusalHeader and as the body, and the connection
// closed after it, so a refused client holds no slot of the proxy.
func refuse(w http.ResponseWriter, status int, sentence string) {
	h := w.Header()
	h.Set(RefusalHeader, headerSafe(sentence))
	h.Set("Connection", "close")
	http.Error(w, "kewplan egress proxy: "+sentence, status)
}

// writeRefusal is refuse on a raw (hijacked or not yet served) connection.
func writeRefusal(w io.Writer, status int, sentence string) {
	body := "kewplan egress proxy: " + sentence + "\n"
	_, _ = fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), RefusalHeader, headerSafe(sentence), len(body), body)
}

// headerSafe keeps a sentence a valid header value: printable ASCII only, anything else as '?'.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// dialRefusal is the error a refused dial returns: the refusal when it is one.
func dialRefusal(err error) (*refusalError, bool) {
	var r *refusalError
	ok := errors.As(err, &r)
	return r, ok
}

// refusalSentence says in one sentence what was refused and why, for the agent's transcript and the ledger. It
// names the node, the target and the node's own allowlist, never a secret: the node's proxy credentials are not
// part of any decision it is built from.
func (s *Server) refusalSentence(node, method string, tgt target, reason string) string {
	hp := tgt.hostPort()
	if tgt.port == 0 {
		hp = strconv.Quote(tgt.host)
	}
	who := "node " + node + "'s"
	switch reason {
	case ReasonNoCredentials:
		return fmt.Sprintf("%s %s was refused because the request carried no proxy credentials; send the node's proxy URL (HTTPS_PROXY) with its user and password", method, hp)
	case ReasonBadCredentials:
		return fmt.Sprintf("%s %s was refused because its proxy credentials name no node of this run or carry a wrong secret; use the proxy URL apply gave the node (HTTPS_PROXY)", method, hp)
	case ReasonIPLiteral:
		return fmt.Sprintf("%s is an IP address, and the proxy connects only to host names from the plan's egress allowlist; %s", hp, s.allowedClause(node))
	case ReasonInvalidHost:
		return fmt.Sprintf("%s is not a host name the proxy accepts (lowercase letters, digits, '-' and dots, as the plan writes it); %s", hp, s.allowedClause(node))
	case ReasonMalformedRequest:
		return fmt.Sprintf("%s %s was refused because the request target is not host:port (CONNECT) or an absolute http:// URL (plain HTTP)", method, hp)
	case ReasonScheme:
		return fmt.Sprintf("%s %s was refused because the proxy forwards only http:// requests and CONNECT tunnels; use CONNECT (an https:// URL) for TLS", method, hp)
	case ReasonHostNotAllowed:
		return fmt.Sprintf("%s is not in %s egress allowlist; %s", hp, who, s.allowedClause(node))
	case ReasonOtherNodesHost:
		return fmt.Sprintf("%s is in another node's egress allowlist, not in %s; %s", hp, who, s.allowedClause(node))
	case ReasonPortNotAllowed:
		return fmt.Sprintf("%s is not in %s egress allowlist: its host is allowed on other ports only; %s", hp, who, s.allowedClause(node))
	case ReasonPlainHTTP:
		return fmt.Sprintf("plain HTTP to %s is not in %s egress allowlist (a host allowed on port 443 is reached over CONNECT only, an https:// URL); %s", hp, who, s.allowedClause(node))
	case ReasonRefusedAddress:
		return fmt.Sprintf("%s resolves only to addresses the proxy refuses (loopback, link-local, metadata, or private ranges for a host not in %s private_hosts); a private host is reached only when the plan names it in private_hosts", hp, who)
	case ReasonResolveFailed:
		return fmt.Sprintf("%s does not resolve from the proxy, so no connection was made", hp)
	case ReasonUpstreamRefused:
		return fmt.Sprintf("%s is allowed, but the proxy's connection to it failed", hp)
	}
	return fmt.Sprintf("%s %s was refused: %s", method, hp, reason)
}

// allowedClause is "the plan allows a:443, b:443" for a node, bounded.
func (s *Server) allowedClause(node string) string {
	n := s.nodes[node]
	if n == nil {
		return "the plan allows this node no host"
	}
	if len(n.patterns) == 0 {
		return "the plan allows node " + node + " no host"
	}
	names := make([]string, 0, len(n.patterns))
	for i, p := range n.patterns {
		if i == maxListedEntries {
			names = append(names, fmt.Sprintf("and %d more", len(n.patterns)-maxListedEntries))
			break
		}
		names = append(names, p.Host+":"+strconv.Itoa(p.Port))
	}
	return "the plan allows " + strings.Join(names, ", ")
}

// loadSentence is the refusal of a request the proxy had no room for.
func loadSentence(what string, limit int) string {
	return fmt.Sprintf("the proxy refused this connection for load: %s already hold %d connections, the most it allows; close idle connections and retry", what, limit)
}
