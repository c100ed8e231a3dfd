package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/config"
)

// What a brokered request can make the provider fetch. The forward proxy's allowlist judges every connection an
// agent opens, but a model provider can open connections of its own on the agent's behalf: a web search, a page
// fetched, an MCP server connected to, an image downloaded from a URL the agent names. Those leave from the
// provider's servers, where no allowlist reaches, so the broker reads each brokered request's body and
// anthropic-beta header and refuses what would make the provider fetch, unless the node opted in to that
// feature (BrokerConfig.ProviderFetch, the plan's provider_fetch). What it cannot classify it refuses: a tool type,
// plugin, source type or beta it does not know is taken to fetch.

// maxBodyDepth bounds the nesting of a brokered body (a tool's input schema nests a few levels; nothing an SDK
// writes comes near).
const maxBodyDepth = 256

// Reasons of the broker's body and header refusals, stable for the ledger.
const (
	ReasonProviderFetch  = "provider fetch not allowed"
	ReasonBetaNotAllowed = "anthropic-beta not allowed"
	ReasonBodyNotJSON    = "body not judged"
)

// fetchRefusal is why the broker refuses a request's body or headers.
type fetchRefusal struct {
	status   int
	reason   string
	sentence string
}

// judgeProviderFetch judges a brokered request's body, read whole by admitBrokered, against the node's
// provider_fetch: a compressed body cannot be judged, and one that is not a JSON object is refused. nil: the
// request may go.
func judgeProviderFetch(bn *brokerNode, r *http.Request, body []byte) *fetchRefusal {
	if ce := strings.TrimSpace(r.Header.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "identity") {
		return &fetchRefusal{http.StatusBadRequest, ReasonBodyNotJSON, fmt.Sprintf(
			"kewplan's credential broker refused this request to node %q because its body is sent with Content-Encoding %q; the broker judges what a body would make the provider fetch, and reads only bodies sent uncompressed.",
			bn.name, clip(ce))}
	}
	if len(body) == 0 {
		return nil
	}
	return judgeBody(bn, body)
}

// fetchUse is one thing a body asks the provider to fetch: the feature (one of config.ProviderFetchFeatures, or
// "" when the broker cannot tell what it fetches), where in the body it is, and what it is, for people.
type fetchUse struct {
	feature string
	path    string
	what    string
}

// judgeBody parses the body strictly (a JSON object, no key twice in one object, nothing after it) and refuses
// the first use of a feature the node did not opt in to.
func judgeBody(bn *brokerNode, body []byte) *fetchRefusal {
	v, err := parseStrictJSON(body)
	if err != nil {
		return &fetchRefusal{http.StatusBadRequest, ReasonBodyNotJSON, fmt.Sprintf(
			"kewplan's credential broker refused this request to node %q because its body is not a JSON object it can judge (%s), so the broker cannot tell what it would make the provider fetch.",
			bn.name, clip(err.Error()))}
	}
	obj, ok := v.(jsonObject)
	if !ok {
		return &fetchRefusal{http.StatusBadRequest, ReasonBodyNotJSON, fmt.Sprintf(
			"kewplan's credential broker refused this request to node %q because its body is JSON but not an object, which no model API takes.", bn.name)}
	}
	for _, u := range bodyFetches(obj) {
		if u.feature != "" && slices.Contains(bn.providerFetch, u.feature) {
			continue
		}
		return &fetchRefusal{http.StatusForbidden, ReasonProviderFetch, fetchSentence(bn.name, u)}
	}
	return nil
}

// fetchSentence is the refusal of one use: what it is, where it is, and the configuration that would allow it.
func fetchSentence(node string, u fetchUse) string {
	if u.feature == "" {
		return fmt.Sprintf("kewplan's credential broker refused this request because %s (at %s) may make the provider fetch or connect on the agent's behalf, around kewplan's egress allowlist, and kewplan cannot tell what it reaches; no provider_fetch feature allows it. Leave it out of the request, or define a tool the agent runs itself.",
			u.what, u.path)
	}
	return fmt.Sprintf("kewplan's credential broker refused this request because %s (at %s) makes the provider fetch on the agent's behalf (%s), around kewplan's egress allowlist, and node %q does not allow it. To allow it, add provider_fetch = [%q] to the egress block of node %q (egress { provider_fetch = [%q] }) in kewplan's configuration.",
		u.what, u.path, u.feature, node, u.feature, node, u.feature)
}

// Tool types that make the provider fetch nothing: the agent runs client tools itself (Anthropic's computer,
// bash, text editor and memory tools are defined by Anthropic but executed by the client), and the tool search
// tools search the request's own tool list.
var (
	clientToolType     = regexp.MustCompile(`^(computer|bash|text_editor|memory)_[0-9]{8}$`)
	toolSearchToolType = regexp.MustCompile(`^tool_search_tool_(regex|bm25)(_[0-9]{8})?$`)
)

// OpenRouter plugins that fetch nothing: PDF parsing of files in the request (a file by URL is a url source,
// judged apart), JSON repair of the answer, and compression of the prompt.
var quietPlugins = []string{"file-parser", "response-healing", "context-compression"}

// bodyFetches lists what a request body asks the provider to fetch, in the order found. Anthropic's and the
// OpenAI-style shapes are judged alike on every API: a body meant for one API sent to another still reaches a
// provider that may honour it.
func bodyFetches(obj jsonObject) []fetchUse {
	var out []fetchUse
	add := func(feature, path, what string) { out = append(out, fetchUse{feature, path, what}) }
	for _, m := range obj {
		key := strings.ToLower(m.key)
		switch key {
		case "mcp_servers":
			if present(m.value) {
				add(config.ProviderFetchMCPServers, m.key, "the MCP connector (mcp_servers)")
			}
		case "container":
			if present(m.value) {
				add(config.ProviderFetchCodeExecution, m.key, "a code-execution container")
			}
		case "web_search_options":
			if present(m.value) {
				add(config.ProviderFetchWebSearch, m.key, "web search (web_search_options)")
			}
		case "model":
			if s, ok := str(m.value); ok && onlineModel(s) {
				add(config.ProviderFetchWebSearch, m.key, fmt.Sprintf("the model %q (an :online model searches the web)", clip(s)))
			}
		case "models":
			for i, e := range asArray(m.value) {
				if s, ok := str(e); ok && onlineModel(s) {
					add(config.ProviderFetchWebSearch, index(m.key, i), fmt.Sprintf("the model %q (an :online model searches the web)", clip(s)))
				}
			}
		case "plugins":
			for i, e := range asArray(m.value) {
				out = append(out, pluginFetch(index(m.key, i), e)...)
			}
		case "tools":
			for i, e := range asArray(m.value) {
				out = append(out, toolFetch(index(m.key, i), e)...)
			}
		case "betas", "anthropic_beta":
			for i, e := range asArray(m.value) {
				s, _ := str(e)
				if feature, ok := betaFeature(s); !ok || feature != "" {
					add(feature, index(m.key, i), fmt.Sprintf("the beta %q", clip(s)))
				}
			}
		case "messages":
			for i, msg := range asArray(m.value) {
				if mo, ok := msg.(jsonObject); ok {
					if c, ok := mo.get("content"); ok {
						out = append(out, contentFetches(index(m.key, i)+".content", c)...)
					}
				}
			}
		case "system":
			out = append(out, contentFetches(m.key, m.value)...)
		}
	}
	return out
}

// toolFetch judges one entry of tools: a custom tool (no type, "custom", or OpenAI's "function") and a client
// tool fetch nothing; a server tool is named by its feature, and one the broker does not know fetches.
func toolFetch(path string, e any) []fetchUse {
	t, ok := e.(jsonObject)
	if !ok {
		return nil
	}
	tv, ok := t.get("type")
	if !ok || tv == nil {
		return nil
	}
	typ, isString := str(tv)
	if isString && (typ == "custom" || typ == "function" || clientToolType.MatchString(typ) || toolSearchToolType.MatchString(typ)) {
		return nil
	}
	what := fmt.Sprintf("a %s tool", clip(typ))
	if !isString {
		what = "a tool whose type is not a string"
	}
	lower := strings.ToLower(typ)
	feature := ""
	switch {
	case strings.Contains(lower, "web_search"):
		feature = config.ProviderFetchWebSearch
	case strings.Contains(lower, "web_fetch"):
		feature = config.ProviderFetchWebFetch
	case strings.Contains(lower, "code_execution"), strings.Contains(lower, "code_interpreter"):
		feature = config.ProviderFetchCodeExecution
	case strings.Contains(lower, "mcp"):
		feature = config.ProviderFetchMCPServers
	}
	return []fetchUse{{feature, path, what}}
}

// pluginFetch judges one entry of OpenRouter's plugins.
func pluginFetch(path string, e any) []fetchUse {
	var id string
	if p, ok := e.(jsonObject); ok {
		if v, ok := p.get("id"); ok {
			id, _ = str(v)
		}
	}
	lower := strings.ToLower(id)
	switch {
	case slices.Contains(quietPlugins, lower):
		return nil
	case lower == "web":
		return []fetchUse{{config.ProviderFetchWebSearch, path, "the web plugin"}}
	case strings.Contains(lower, "fetch"):
		return []fetchUse{{config.ProviderFetchWebFetch, path, fmt.Sprintf("the %s plugin", clip(id))}}
	case id == "":
		return []fetchUse{{"", path, "a plugin without an id"}}
	}
	return []fetchUse{{"", path, fmt.Sprintf("the %s plugin", clip(id))}}
}

// onlineModel reports an OpenRouter model slug that searches the web (":online").
func onlineModel(s string) bool {
	return strings.HasSuffix(strings.ToLower(strings.TrimSpace(s)), ":online")
}

// Source types of Anthropic's image and document blocks that carry their content (or name an uploaded file):
// the provider downloads nothing for them.
var inlineSourceTypes = []string{"base64", "text", "content", "file"}

// contentFetches judges message content (a string, or an array of blocks): Anthropic's url sources, nested in
// tool results, documents and search results as deep as they go, and OpenAI-style parts that name a URL.
func contentFetches(path string, c any) []fetchUse {
	blocks, ok := c.([]any)
	if !ok {
		return nil
	}
	var out []fetchUse
	for i, b := range blocks {
		bo, ok := b.(jsonObject)
		if !ok {
			continue
		}
		bp := index(path, i)
		typ := ""
		if tv, ok := bo.get("type"); ok {
			typ, _ = str(tv)
		}
		if typ == "container_upload" {
			out = append(out, fetchUse{config.ProviderFetchCodeExecution, bp, "a container_upload block (a file put into a code-execution container)"})
		}
		if sv, ok := bo.get("source"); ok {
			if so, ok := sv.(jsonObject); ok {
				st := ""
				if v, ok := so.get("type"); ok {
					st, _ = str(v)
				}
				switch {
				case st == "url":
					out = append(out, fetchUse{config.ProviderFetchURLSources, bp + ".source", fmt.Sprintf("a %s block whose source is a URL", orBlock(typ))})
				case !slices.Contains(inlineSourceTypes, st):
					out = append(out, fetchUse{config.ProviderFetchURLSources, bp + ".source", fmt.Sprintf("a %s block whose source type %q the broker cannot tell from a URL", orBlock(typ), clip(st))})
				}
				if inner, ok := so.get("content"); ok {
					out = append(out, contentFetches(bp+".source.content", inner)...)
				}
			}
		}
		if inner, ok := bo.get("content"); ok {
			out = append(out, contentFetches(bp+".content", inner)...)
		}
		// OpenAI-style parts keep their payload under the part's type: {"type": "image_url", "image_url":
		// {"url": ...}}, {"type": "file", "file": {"file_data": ...}}.
		if typ != "" && typ != "source" && typ != "content" {
			if pv, ok := bo.get(typ); ok {
				out = append(out, partURLs(bp+"."+typ, typ, pv)...)
			}
		}
	}
	return out
}

// partURLs finds the URLs of an OpenAI-style part's payload that are not data: URLs (a data: URL carries its
// content; anything else the provider downloads).
func partURLs(path, typ string, v any) []fetchUse {
	var out []fetchUse
	check := func(p string, s string) {
		if t := strings.ToLower(strings.TrimSpace(s)); t != "" && !strings.HasPrefix(t, "data:") && (strings.Contains(t, "://") || strings.HasPrefix(t, "//")) {
			out = append(out, fetchUse{config.ProviderFetchURLSources, p, fmt.Sprintf("a %s part that names a URL", clip(typ))})
		}
	}
	if s, ok := str(v); ok {
		check(path, s)
	}
	if p, ok := v.(jsonObject); ok {
		for _, m := range p {
			switch m.key {
			case "url", "file_data", "file_url", "image_url", "video_url", "audio_url":
				if s, ok := str(m.value); ok {
					check(path+"."+m.key, s)
				}
			}
		}
	}
	return out
}

func orBlock(typ string) string {
	if typ == "" {
		return "content"
	}
	return clip(typ)
}

// present reports a value that asks for something: not null, not an empty array or object.
func present(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		return len(x) > 0
	case jsonObject:
		return len(x) > 0
	}
	return true
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Anthropic betas. A beta is "<family>-<date>" (the date as 2025-05-14 or 20250219); the broker passes a beta
// whose family it knows fetches nothing, passes one that turns on a provider-fetch feature only when the node
// opted in to that feature, and refuses every other: a beta it does not know may turn on a fetch.
var (
	// quietBetas are the families that make the provider fetch nothing: client identity and OAuth, thinking,
	// streaming, caching, token counting, longer output and context, context management, tool use the client
	// runs (computer use, tool search, tool examples), PDFs and search results the request carries, structured
	// output and effort.
	quietBetas = []string{
		"advanced-tool-use", "claude-code", "computer-use", "context-1m", "context-management", "effort",
		"extended-cache-ttl", "fine-grained-tool-streaming", "interleaved-thinking", "max-tokens-3-5-sonnet",
		"mid-conversation-system-clear-at", "model-context-window-exceeded", "oauth", "output-128k", "pdfs",
		"prompt-caching", "prompt-caching-scope", "redact-thinking", "search-results", "structured-outputs",
		"thinking-token-count", "token-counting", "token-efficient-tools", "tool-examples", "tool-search-tool",
	}
	// fetchBetas are the families that turn on a provider-fetch feature.
	fetchBetas = map[string]string{
		"web-search":     config.ProviderFetchWebSearch,
		"web-fetch":      config.ProviderFetchWebFetch,
		"code-execution": config.ProviderFetchCodeExecution,
		"skills":         config.ProviderFetchCodeExecution,
		"mcp-client":     config.ProviderFetchMCPServers,
	}
	betaDate = regexp.MustCompile(`^([a-z0-9]+(?:-[a-z0-9]+)*?)-([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8})$`)
)

// betaFeature classifies one beta value: ok with feature "" for a quiet beta, ok with a feature for a beta that
// turns one on, and not ok for a beta the broker does not know.
func betaFeature(v string) (feature string, ok bool) {
	m := betaDate.FindStringSubmatch(strings.ToLower(strings.TrimSpace(v)))
	if m == nil {
		return "", false
	}
	if slices.Contains(quietBetas, m[1]) {
		return "", true
	}
	f, ok := fetchBetas[m[1]]
	return f, ok
}

// judgeBetas judges every value of the anthropic-beta headers (OpenRouter reads x-anthropic-beta too).
func judgeBetas(bn *brokerNode, h http.Header) *fetchRefusal {
	for _, name := range []string{"Anthropic-Beta", "X-Anthropic-Beta"} {
		for _, line := range h.Values(name) {
			for _, v := range strings.Split(line, ",") {
				v = strings.TrimSpace(v)
				if v == "" {
					continue
				}
				feature, known := betaFeature(v)
				switch {
				case !known:
					return &fetchRefusal{http.StatusBadRequest, ReasonBetaNotAllowed, fmt.Sprintf(
						"kewplan's credential broker refused this request because its %s header names %q, which is not among the betas kewplan knows to make the provider fetch nothing on the agent's behalf; no configuration allows it. Leave the beta out of the request.",
						strings.ToLower(name), clip(v))}
				case feature != "" && !slices.Contains(bn.providerFetch, feature):
					return &fetchRefusal{http.StatusForbidden, ReasonBetaNotAllowed, fmt.Sprintf(
						"kewplan's credential broker refused this request because its %s header names %q, which turns on a provider-fetch feature (%s) that node %q does not allow. To allow it, add provider_fetch = [%q] to the egress block of node %q (egress { provider_fetch = [%q] }) in kewplan's configuration.",
						strings.ToLower(name), clip(v), feature, bn.name, feature, bn.name, feature)}
				}
			}
		}
	}
	return nil
}

// jsonObject is a JSON object with its members in order; parseStrictJSON refuses a key twice in one.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value any
}

func (o jsonObject) get(key string) (any, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// jsonString is a string value as written, between its quotes: most of a request's text is never looked at, so
// it is decoded only when read (str).
type jsonString []byte

// jsonNumber stands for any number: the broker never reads one.
type jsonNumber struct{}

// str is v's text when v is a string.
func str(v any) (string, bool) {
	s, ok := v.(jsonString)
	if !ok {
		return "", false
	}
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s), true
	}
	var out string
	if err := json.Unmarshal(append(append([]byte{'"'}, s...), '"'), &out); err != nil {
		return "", false
	}
	return out, true
}

// parseStrictJSON parses one JSON value (RFC 8259): objects as jsonObject, a key twice in one object refused (the
// provider and the broker could read different members), arrays as []any, strings as jsonString, numbers as
// jsonNumber, bools and nil; nesting bounded, nothing but white space after the value. It is written by hand
// because encoding/json's decoder offers no duplicate-key check but through its Token method, twenty times as slow
// on a request of a megabyte.
func parseStrictJSON(data []byte) (any, error) {
	p := &jsonParser{data: data}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.data) {
		return nil, p.errorf("more than one JSON value")
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) errorf(format string, a ...any) error {
	return fmt.Errorf("byte %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	p.space()
	if p.pos >= len(p.data) {
		return nil, p.errorf("the JSON ends early")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		if depth >= maxBodyDepth {
			return nil, p.errorf("nested more than %d levels deep", maxBodyDepth)
		}
		return p.object(depth)
	case c == '[':
		if depth >= maxBodyDepth {
			return nil, p.errorf("nested more than %d levels deep", maxBodyDepth)
		}
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return jsonNumber{}, p.number()
	}
	for _, lit := range []struct {
		text  string
		value any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if bytes.HasPrefix(p.data[p.pos:], []byte(lit.text)) {
			p.pos += len(lit.text)
			return lit.value, nil
		}
	}
	return nil, p.errorf("invalid character %q", p.data[p.pos])
}

func (p *jsonParser) object(depth int) (any, error) {
	p.pos++ // {
	obj := jsonObject{}
	var seen map[string]bool // past a few members; before, a look along the slice is quicker
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, nil
	}
	for {
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("an object key must be a string")
		}
		raw, err := p.string()
		if err != nil {
			return nil, err
		}
		key, ok := str(raw)
		if !ok {
			return nil, p.errorf("an object key is not a valid string")
		}
		dup := false
		if seen != nil {
			dup = seen[key]
		} else {
			_, dup = obj.get(key)
		}
		if dup {
			return nil, fmt.Errorf("the key %q appears twice in one object", clip(key))
		}
		if len(obj) == 8 {
			seen = make(map[string]bool, 16)
			for _, m := range obj {
				seen[m.key] = true
			}
		}
		if seen != nil {
			seen[key] = true
		}
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("an object key must be followed by ':'")
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		obj = append(obj, jsonMember{key, v})
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.errorf("the JSON ends early")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, nil
		default:
			return nil, p.errorf("invalid character %q after an object member", p.data[p.pos])
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	p.pos++ // [
	arr := []any{}
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return arr, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.errorf("the JSON ends early")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return arr, nil
		default:
			return nil, p.errorf("invalid character %q after an array element", p.data[p.pos])
		}
	}
}

// string reads a string from its opening quote and returns what is between the quotes, escapes checked.
func (p *jsonParser) string() (jsonString, error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := jsonString(p.data[start:p.pos])
			p.pos++
			return s, nil
		case c == '\\':
			if p.pos+1 >= len(p.data) {
				return nil, p.errorf("the JSON ends early")
			}
			switch p.data[p.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos += 2
			case 'u':
				if p.pos+6 > len(p.data) || !isHex4(p.data[p.pos+2:p.pos+6]) {
					return nil, p.errorf("invalid \\u escape")
				}
				p.pos += 6
			default:
				return nil, p.errorf("invalid escape in a string")
			}
		case c < 0x20:
			return nil, p.errorf("a control character in a string")
		default:
			p.pos++
		}
	}
	return nil, p.errorf("the JSON ends early")
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number checks a number's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() error {
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return p.errorf("invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	return nil
}
