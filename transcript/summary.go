package transcript

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxSummaryRunes bounds a tool call's one-line summary.
const maxSummaryRunes = 160

// summaryKeys are the input fields that say best what a call does, most telling first: the command of a shell,
// the file of an editor, the pattern of a search, the address of a fetch.
var summaryKeys = []string{
	"command", "cmd", "file_path", "filePath", "path", "notebook_path", "pattern", "url", "query",
	"description", "prompt", "name",
}

// Summarize is a tool call's one-line summary: the tool's name in lower case and its most telling input field,
// "bash: echo hi", "edit: src/parse.go". An input without any known field is shown as compact JSON. Multi-line
// values keep their first line and say how many more there were; the summary is cut at 160 characters.
func Summarize(tool string, input json.RawMessage) string {
	name := strings.ToLower(strings.TrimSpace(tool))
	if name == "" {
		name = "tool"
	}
	detail := summaryDetail(input)
	if detail == "" {
		return cutRunes(name, maxSummaryRunes)
	}
	return cutRunes(name+": "+detail, maxSummaryRunes)
}

func summaryDetail(input json.RawMessage) string {
	if len(input) == 0 || string(input) == "null" {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) == nil {
		for _, k := range summaryKeys {
			var s string
			if json.Unmarshal(fields[k], &s) == nil && strings.TrimSpace(s) != "" {
				return firstLine(s)
			}
		}
		if len(fields) == 0 {
			return ""
		}
	}
	var s string
	if json.Unmarshal(input, &s) == nil { // some agents pass a tool's input as a bare string
		return firstLine(s)
	}
	var compact strings.Builder
	if len(input) > 4*maxSummaryRunes {
		input = input[:4*maxSummaryRunes]
	}
	for _, c := range string(input) {
		if c == '\n' || c == '\r' || c == '\t' {
			c = ' '
		}
		compact.WriteRune(c)
	}
	return compact.String()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	first, rest, more := strings.Cut(s, "\n")
	if !more {
		return s
	}
	n := strings.Count(rest, "\n") + 1
	suffix := " (+1 line)"
	if n > 1 {
		suffix = " (+" + strconv.Itoa(n) + " lines)"
	}
	return strings.TrimRight(first, "\r") + suffix
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
