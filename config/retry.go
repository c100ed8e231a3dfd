package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Retry defaults and bounds. A node is tried once unless a retry block says otherwise.
const (
	DefaultRetryAttempts = 1
	DefaultRetryBackoff  = 10 * time.Second
	// MaxRetryAttempts bounds attempts: each attempt may spend a whole node budget, so a larger figure is a typo
	// far more often than a wish (and a provider down for that long will not come back within one apply).
	MaxRetryAttempts = 10
	// MaxRetryBackoff caps every wait between attempts, after doubling and jitter.
	MaxRetryBackoff = 5 * time.Minute
)

// Retry classes: why an attempt failed in a way worth trying again.
const (
	RetryOnAPIError    = "api_error"    // the agent's stream reports a transient model-API failure (429, 529, 5xx)
	RetryOnEngineError = "engine_error" // the container could not be created or started
	RetryOnTimeout     = "timeout"      // the node's timeout killed the attempt
)

// RetryClasses lists every retry class, in the order they are shown.
var RetryClasses = []string{RetryOnAPIError, RetryOnEngineError, RetryOnTimeout}

// Retry is a `retry` block, in the sandbox (the default of every node) or in a node (replacing the sandbox's
// attributes one by one). An attribute that was not written keeps a zero range and is inherited.
type Retry struct {
	Attempts      int64 // 0 when not written
	AttemptsRange hcl.Range
	Backoff       time.Duration // meaningful only when BackoffRange is set
	BackoffRange  hcl.Range
	On            []string // nil when not written; [] when written empty
	OnRange       hcl.Range
	DeclRange     hcl.Range
}

// AttemptsSet, BackoffSet and OnSet report whether the attribute was written in this block.
func (r *Retry) AttemptsSet() bool { return r != nil && r.AttemptsRange.Filename != "" }

// BackoffSet reports whether backoff was written in this block.
func (r *Retry) BackoffSet() bool { return r != nil && r.BackoffRange.Filename != "" }

// OnSet reports whether on was written in this block.
func (r *Retry) OnSet() bool { return r != nil && r.OnRange.Filename != "" }

var retrySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "attempts"},
		{Name: "backoff"},
		{Name: "on"},
	},
}

// decodeRetryBlocks reads the retry blocks of a sandbox or node body: at most one. where names the owner for
// the reader, e.g. `the sandbox block` or `node "fix"`.
func decodeRetryBlocks(blocks hcl.Blocks, where string) (*Retry, hcl.Diagnostics) {
	var r *Retry
	var diags hcl.Diagnostics
	for _, b := range blocks {
		if b.Type != "retry" {
			continue
		}
		if r != nil {
			diags = append(diags, errorDiag("Duplicate retry block",
				fmt.Sprintf("The %s already has a retry block at %s. Write one retry block and merge the two.", where, rangeString(r.DeclRange)),
				b.DefRange))
			continue
		}
		rb, d := decodeRetryBlock(b, where)
		diags = append(diags, d...)
		r = rb
	}
	return r, diags
}

func decodeRetryBlock(block *hcl.Block, owner string) (*Retry, hcl.Diagnostics) {
	r := &Retry{DeclRange: block.DefRange}
	where := "the retry block of " + owner
	content, diags := bodyContent(block.Body, retrySchema, "a retry block")
	if attr, ok := content.Attributes["attempts"]; ok {
		n, d := constWholeNumber(attr, where)
		diags = append(diags, d...)
		switch {
		case d.HasErrors():
		case n < 1:
			diags = append(diags, errorDiag("Invalid retry attempts",
				fmt.Sprintf("The attempts of %s is %d, but a node runs at least once. attempts counts every try, the first included: write 1 for no retry, or 3 to try up to three times.", where, n),
				attr.Expr.Range()))
		case n > MaxRetryAttempts:
			diags = append(diags, errorDiag("Too many retry attempts",
				fmt.Sprintf("The attempts of %s is %d, more than the %d kewplan allows: every attempt may spend a whole node budget, and a provider that fails that often will not recover within one apply. Write at most %d.", where, n, MaxRetryAttempts, MaxRetryAttempts),
				attr.Expr.Range()))
		default:
			r.Attempts, r.AttemptsRange = n, attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["backoff"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if dur, msg := parseBackoff(s); msg != "" {
				diags = append(diags, errorDiag("Invalid retry backoff", fmt.Sprintf("The backoff of %s is not valid: %s", where, msg), attr.Expr.Range()))
			} else {
				r.Backoff, r.BackoffRange = dur, attr.Expr.Range()
				if dur > MaxRetryBackoff {
					diags = append(diags, warningDiag("Retry backoff above the cap",
						fmt.Sprintf("The backoff of %s is %s, but every wait is capped at %s, so each retry waits %s. Write %q or less to say what happens.", where, dur, FormatDuration(MaxRetryBackoff), FormatDuration(MaxRetryBackoff), FormatDuration(MaxRetryBackoff)),
						attr.Expr.Range()))
				}
			}
		}
	}
	if attr, ok := content.Attributes["on"]; ok {
		on, d := decodeRetryOn(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			r.On, r.OnRange = on, attr.Expr.Range()
		}
	}
	return r, diags
}

// parseBackoff reads a backoff duration and returns a diagnostic detail when it is not one.
func parseBackoff(s string) (time.Duration, string) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%q is not a duration. Write a number with a unit, such as \"10s\" or \"1m\".", s)
	case d < 0:
		return 0, fmt.Sprintf("%q is negative. Write the first wait between attempts, such as \"10s\", or \"0s\" to retry at once.", s)
	}
	return d, ""
}

// decodeRetryOn reads `on = [...]`: known classes only, each once.
func decodeRetryOn(attr *hcl.Attribute, where string) ([]string, hcl.Diagnostics) {
	list, ranges, diags := constStringList(attr, where)
	if diags.HasErrors() {
		return nil, diags
	}
	on := []string{}
	seen := map[string]hcl.Range{}
	for i, s := range list {
		if !contains(RetryClasses, s) {
			diags = append(diags, errorDiag("Unknown retry class",
				fmt.Sprintf("The on list of %s names %q, which is not a failure kewplan retries.%s The classes are %s; an agent that exits non-zero, a budget stop, a held verdict or a cancellation is never retried.", where, s, didYouMean(s, RetryClasses), quotedList(RetryClasses)),
				ranges[i]))
			continue
		}
		if prev, ok := seen[s]; ok {
			diags = append(diags, errorDiag("Duplicate retry class",
				fmt.Sprintf("The on list of %s names %q twice (first at %s). Name each class once.", where, s, rangeString(prev)),
				ranges[i]))
			continue
		}
		seen[s] = ranges[i]
		on = append(on, s)
	}
	return on, diags
}

// FormatDuration renders a duration the way configurations write it: "10s", "5m", "1m30s", "1h30m", "0s". Every
// duration kewplan writes back (a plan's retry backoff and timeout, a diagnostic's detail) is formatted here.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
