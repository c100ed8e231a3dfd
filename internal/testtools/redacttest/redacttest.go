// Package redacttest holds the encodings of a credential that an agent commonly prints, and a checker that
// decodes text every way a reader could, so that the masker's tests and its users' tests (the executor's log
// writers, the transcript) assert one thing: the value never appears in any decoded form.
package redacttest

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Key is a realistic Anthropic API key: its prefix and 40 random characters.
const Key = "sk-ant-api03-" + "h7Qm2xVd9KpL4nRt8WbYc3FgJs6ZaE1uNoPq5TiX"

// Case is one way the key reaches a stream: Stdout is one claude-code stream line (a tool result whose output
// holds the encoding), Stderr a plain stderr line; either may be empty.
type Case struct {
	Name           string
	Stdout, Stderr string
}

// toolResult is a claude-code tool-result line whose "content" is the JSON string literal lit (quotes
// included), written as the agent's stream spells it.
func toolResult(lit string) string {
	return `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":` +
		lit + `,"is_error":false}]},"session_id":"s1"}`
}

// quoted is output as encoding/json writes it in a stream line.
func quoted(output string) string {
	b, _ := json.Marshal(output)
	return string(b)
}

// escapeEvery writes each byte of s whose index satisfies pick as a \uXXXX escape (upper-case hex when upper).
func escapeEvery(s string, pick func(int) bool, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if pick(i) {
			f := `\u%04x`
			if upper {
				f = `\u%04X`
			}
			fmt.Fprintf(&b, f, s[i])
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// percentAll URL-encodes every byte of s, as `urlencode -e` or a careful encoder does.
func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// wrap cuts s into lines of n characters, as GNU base64 and base32 do by default (76) and xxd -p does (60).
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	return b.String() + s
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// Cases are the encodings of key an agent commonly prints, each on stdout (in a tool result) or stderr.
func Cases(key string) []Case {
	env := "export ANTHROPIC_API_KEY=" + key + "\n" // what `env | grep KEY | base64` encodes
	b64 := base64.StdEncoding.EncodeToString
	half := len(key) / 2
	subset := func(i int) bool { return (i*7)%5 < 2 } // about two characters in five
	return []Case{
		{Name: "raw", Stdout: toolResult(quoted("ANTHROPIC_API_KEY=" + key + "\n")), Stderr: "using key " + key},
		{Name: "base64 unwrapped", Stdout: toolResult(quoted(b64([]byte(key)) + "\n")), Stderr: b64([]byte(key))},
		{Name: "base64 of echo KEY", Stdout: toolResult(quoted(b64([]byte(key+"\n")) + "\n")), Stderr: b64([]byte(key + "\n"))},
		{Name: "GNU base64 wrapped at 76", Stdout: toolResult(quoted(wrap(b64([]byte(env)), 76) + "\n")), Stderr: wrap(b64([]byte(env)), 76)},
		{Name: "base64url", Stdout: toolResult(quoted(base64.RawURLEncoding.EncodeToString([]byte("k="+key)) + "\n")),
			Stderr: base64.URLEncoding.EncodeToString([]byte(key))},
		{Name: "hex lower", Stdout: toolResult(quoted(hex.EncodeToString([]byte(env)))), Stderr: wrap(hex.EncodeToString([]byte(env)), 60)},
		{Name: "hex upper", Stdout: toolResult(quoted(strings.ToUpper(hex.EncodeToString([]byte(key))))), Stderr: strings.ToUpper(hex.EncodeToString([]byte(key)))},
		{Name: "base32", Stdout: toolResult(quoted(base32.StdEncoding.EncodeToString([]byte(key)) + "\n")),
			Stderr: wrap(base32.StdEncoding.EncodeToString([]byte(key)), 76)},
		{Name: "reversed", Stdout: toolResult(quoted(reverse(key) + "\n")), Stderr: reverse(key)},
		{Name: "URL-encoded once", Stdout: toolResult(quoted("https://x.test/?k=" + percentAll(key))), Stderr: "k=" + strings.ToLower(percentAll(key))},
		{Name: "URL-encoded twice", Stdout: toolResult(quoted("https://x.test/?u=" + url.QueryEscape("https://y.test/?k="+percentAll(key)))),
			Stderr: strings.ReplaceAll(percentAll(key), "%", "%25")},
		{Name: "split across two lines", Stdout: toolResult(quoted(key[:half] + "\n" + key[half:] + "\n")), Stderr: key[:half] + "\n" + key[half:]},
		{Name: "split across two lines (CRLF)", Stdout: toolResult(quoted(key[:20] + "\r\n" + key[20:])), Stderr: key[:33] + "\r\n" + key[33:]},
		{Name: "JSON escape of one character", Stdout: toolResult(`"` + escapeEvery(key, func(i int) bool { return i == 0 }, false) + `"`)},
		{Name: "JSON escape of every character", Stdout: toolResult(`"` + escapeEvery(key, func(int) bool { return true }, true) + `"`)},
		{Name: "JSON escape of a subset", Stdout: toolResult(`"` + escapeEvery(key, subset, false) + `\n"`)},
		{Name: "JSON escape escaped again", Stdout: toolResult(`"{\"k\":\"` + strings.ReplaceAll(escapeEvery(key, subset, false), `\u`, `\\u`) + `\"}"`)},
		{Name: "JSON escape of a base64 wrap", Stdout: toolResult(`"` + strings.ReplaceAll(wrap(b64([]byte(env)), 76), "\n", `\n`) + `"`)},
	}
}

var (
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/=_-]{8,}`)
	hexRun    = regexp.MustCompile(`[0-9A-Fa-f]{8,}`)
	base32Run = regexp.MustCompile(`[A-Z2-7=]{8,}`)
)

// Leaks reports the decodings of s (undone once or twice: JSON string escapes, URL escapes, line breaks,
// base64 in its four alphabets, hex, base32, reversal) in which key appears, described for a test message;
// none when key is hidden in every one.
func Leaks(s, key string) []string {
	var out []string
	seen := map[string]int{} // the most decodings left when s was visited
	var visit func(s, how string, depth int)
	visit = func(s, how string, depth int) {
		if d, ok := seen[s]; ok && d >= depth {
			return
		}
		seen[s] = depth
		if strings.Contains(s, key) {
			out = append(out, fmt.Sprintf("%s: %q", how, s))
			return
		}
		if depth == 0 {
			return
		}
		for _, d := range decodings(s) {
			visit(d.text, how+" → "+d.how, depth-1)
		}
	}
	visit(s, "as written", 3)
	return out
}

type decoding struct{ how, text string }

func decodings(s string) []decoding {
	var out []decoding
	add := func(how, t string) {
		if t != s && t != "" {
			out = append(out, decoding{how, t})
		}
	}
	add("line breaks removed", strings.NewReplacer("\r", "", "\n", "").Replace(s))
	add("reversed", reverse(s))
	if u, err := url.QueryUnescape(s); err == nil {
		add("URL-decoded", u)
	}
	if u, err := url.PathUnescape(s); err == nil {
		add("URL-decoded", u)
	}
	var j string
	if json.Unmarshal([]byte(`"`+s+`"`), &j) == nil {
		add("JSON-unescaped", j)
	}
	var v any
	if strings.HasPrefix(strings.TrimSpace(s), "{") && json.Unmarshal([]byte(s), &v) == nil {
		for _, str := range jsonStrings(v, nil) {
			add("a JSON string", str)
		}
	}
	for _, r := range base64Run.FindAllString(s, -1) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(r); err == nil {
				add("base64-decoded", string(b))
			}
		}
	}
	for _, r := range hexRun.FindAllString(s, -1) {
		if b, err := hex.DecodeString(r[:len(r)/2*2]); err == nil {
			add("hex-decoded", string(b))
		}
	}
	for _, r := range base32Run.FindAllString(s, -1) {
		for _, enc := range []*base32.Encoding{base32.StdEncoding, base32.StdEncoding.WithPadding(base32.NoPadding)} {
			if b, err := enc.DecodeString(r); err == nil {
				add("base32-decoded", string(b))
			}
		}
	}
	return out
}

// jsonStrings appends every string (keys included) of a decoded JSON value.
func jsonStrings(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, e := range v {
			out = jsonStrings(e, out)
		}
	case map[string]any:
		for k, e := range v {
			out = jsonStrings(e, append(out, k))
		}
	}
	return out
}
