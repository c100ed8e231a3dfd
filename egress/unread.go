package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// A request Go's server refuses before any handler has it (headers over the bound, a malformed header) is
// answered with a sentence instead of Go's bare status text (limits.go); when its request line addresses a
// brokered node, the sentence is in that node's API's JSON error shape, so that the agent's SDK shows it as it
// shows every other refusal of the broker.

// brokerAPIOfHead is the API of the brokered node whose broker path the request line in head names; "" for a
// request that is not a brokered one (or whose line did not arrive).
func (s *Server) brokerAPIOfHead(head []byte) string {
	if s.broker == nil {
		return ""
	}
	line, _, _ := bytes.Cut(head, []byte("\n"))
	_, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return ""
	}
	target, _, _ := bytes.Cut(rest, []byte(" "))
	path := string(target)
	if u, err := url.Parse(path); err == nil && u.IsAbs() {
		path = u.EscapedPath()
	}
	after, ok := strings.CutPrefix(path, BrokerPathPrefix)
	if !ok {
		return ""
	}
	node, _, _ := strings.Cut(after, "/")
	if bn := s.broker.nodes[node]; bn != nil {
		return bn.api
	}
	return ""
}

// brokerAPI is the API shape of the connection's current request's refusal.
func (c *trackedConn) brokerAPI() string {
	if c.t.brokerAPI == nil {
		return ""
	}
	return c.t.brokerAPI(c.head[:c.headN])
}

// writeRawAPIError is writeAPIError on a raw connection: the status, the API's error body and the connection
// closed after it.
func writeRawAPIError(w io.Writer, api string, status int, sentence string) {
	body := apiErrorBody(api, status, sentence)
	_, _ = fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Kewplan-Broker: refused\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), RefusalHeader, headerSafe(sentence), len(body), body)
}

// apiErrorBody is a refusal's body in the API's error shape, with its newline.
func apiErrorBody(api string, status int, sentence string) []byte {
	kind := map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
		http.StatusBadRequest: "invalid_request_error", http.StatusBadGateway: "api_error",
		http.StatusPaymentRequired: "billing_error", http.StatusRequestEntityTooLarge: "request_too_large",
		http.StatusRequestHeaderFieldsTooLarge: "invalid_request_error"}[status]
	if kind == "" {
		kind = "api_error"
	}
	var body any
	if api == BrokerAPIAnthropic {
		body = map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": sentence}}
	} else {
		body = map[string]any{"error": map[string]any{"message": sentence, "type": kind, "code": status}}
	}
	b, _ := json.Marshal(body)
	return append(b, '\n')
}

// exchangeFailed is the sentence of an allowed request whose exchange with its host failed after the dial was
// judged (the host reset the connection, or timed out): goproxy's own answer would be the Go error's text.
func exchangeFailed(r *http.Request) string {
	host := "its host"
	if r != nil && r.URL != nil && r.URL.Host != "" {
		host = headerSafe(clip(r.URL.Host))
	}
	return fmt.Sprintf("the proxy forwarded this request to %s, but the exchange with it failed before an answer arrived; retry, or check that the host answers", host)
}
