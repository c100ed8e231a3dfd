package runners

import (
	"regexp"
	"strconv"
	"strings"
)

// Transient model-API failures.
//
// A run that ended because the model provider was overloaded (HTTP 529), rate-limited the key (429), failed on
// its side (5xx) or could not be reached is worth trying again later; a refused request (400), a bad key (401),
// a missing model (404) or an exhausted balance is not: a retry would fail the same way and bill for it. Each
// meter keeps the reason of the run's final API error when it is transient, in RunTotals.APIError, and "" for
// anything else. An error the agent recovered from (its own retries succeeded) does not count: only how the run
// ended does.
//
// The stream is agent-controlled text, so the classification reads only the fields the CLI itself writes for an
// API failure (claude-code's result with is_error and api_error_status, opencode's error event, pi's error stop
// reason, hermes' failed result), never the model's prose. The worst a forged line can do is earn a bounded
// number of extra attempts, which the retry block's attempts and the budgets limit.

// Short reasons of a transient API error, as RunTotals.APIError carries them (an HTTP status prefixes the first
// three when the stream gave one: "HTTP 529 overloaded").
const (
	APIOverloaded  = "overloaded"
	APIRateLimited = "rate limited"
	APIServerError = "server error"
	APIUnreachable = "API unreachable"
)

// TransientStatus reports whether an HTTP status from a model API is worth a retry: 408 (request timeout), 429
// (rate limit) and every 5xx, 529 (Anthropic's overloaded) included.
func TransientStatus(code int) bool {
	return code == 408 || code == 429 || code >= 500 && code <= 599
}

// statusReason is the short reason for a transient status.
func statusReason(code int) string {
	why := APIServerError
	switch code {
	case 429:
		why = APIRateLimited
	case 529:
		why = APIOverloaded
	case 408:
		why = "request timeout"
	}
	return "HTTP " + strconv.Itoa(code) + " " + why
}

// statusInText finds the HTTP status an agent wrote into its error text: "API Error: 529 …" (claude-code),
// "429: {…}" and "429 status code (no body)" (pi, after the OpenAI SDK), "Error code: 529 - …" (the Python SDKs
// under hermes), "RateLimitError: 429 …", "status 503", "HTTP 502".
var statusInText = regexp.MustCompile(`(?i)(?:^|error(?:\s*code)?:?\s*|status(?:\s*code)?[:=\s]\s*|http(?:/\d(?:\.\d)?)?\s+)([1-5]\d\d)\b`)

// transientWords are phrases of provider and SDK error texts that name a transient failure, with their reason.
var transientWords = []struct{ phrase, reason string }{
	{"overloaded", APIOverloaded},
	{"rate limit", APIRateLimited},
	{"rate_limit", APIRateLimited},
	{"ratelimit", APIRateLimited},
	{"too many requests", APIRateLimited},
	{"internal server error", APIServerError},
	{"server_error", APIServerError},
	{"service unavailable", APIServerError},
	{"bad gateway", APIServerError},
	{"gateway timeout", APIServerError},
	{"connection error", APIUnreachable},
	{"cannot connect", APIUnreachable},
	{"unable to connect", APIUnreachable},
	{"econnreset", APIUnreachable},
	{"econnrefused", APIUnreachable},
	{"etimedout", APIUnreachable},
	{"socket hang up", APIUnreachable},
	{"fetch failed", APIUnreachable},
}

// ClassifyAPIError decides whether an API failure an agent reported is transient, from its HTTP status (0 when
// the stream gave none) and its error texts, and returns a short reason ("HTTP 529 overloaded", "rate limited"),
// or "" when it is not transient. A status decides alone: a 400 whose text mentions a rate limit is still a
// refused request. Without one, a status written in a text decides, then the phrases of transientWords.
func ClassifyAPIError(status int, texts ...string) string {
	if status >= 100 && status <= 599 {
		if TransientStatus(status) {
			return statusReason(status)
		}
		return ""
	}
	for _, t := range texts {
		if m := statusInText.FindStringSubmatch(strings.TrimSpace(t)); m != nil {
			code, _ := strconv.Atoi(m[1])
			if TransientStatus(code) {
				return statusReason(code)
			}
			return ""
		}
	}
	for _, t := range texts {
		lower := strings.ToLower(t)
		for _, w := range transientWords {
			if strings.Contains(lower, w.phrase) {
				return w.reason
			}
		}
	}
	return ""
}

// jsonText is a JSON string token's text, bounded: error texts only need their first words.
func jsonText(val []byte) string {
	if !isString(val) {
		return ""
	}
	var s string
	setStr(&s, val)
	return s
}

// jsonStatus reads an HTTP status given as a number or a numeric string; 0 when absent or not one.
func jsonStatus(val []byte) int {
	if isString(val) {
		val = val[1 : len(val)-1]
	}
	n, ok := count(val)
	if !ok || n < 100 || n > 599 {
		return 0
	}
	return int(n)
}
