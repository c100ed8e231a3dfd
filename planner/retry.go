package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// Origins of a retry attribute.
const (
	RetryOriginDefault = "default" // no retry block set it
	RetryOriginSandbox = "sandbox" // followed by " file:line"
	RetryOriginNode    = "node"    // followed by " file:line"
)

// RetryPolicy is a node's effective retry policy: its own retry block's attributes, else the sandbox's, else the
// defaults. Each attribute says where it came from. The nodes without a retry block share one policy's On and
// Origins: never modify them.
type RetryPolicy struct {
	Attempts int           // total attempts, the first included; 1 means no retry
	Backoff  time.Duration // the first wait; doubled each attempt, jittered, capped at config.MaxRetryBackoff
	On       []string      // retry classes (config.RetryClasses), in their canonical order
	// Origins says where each attribute came from, by its configuration name ("attempts", "backoff", "on"):
	// "default", or "sandbox file:line" / "node file:line" (the retry block that set it).
	Origins map[string]string
}

// Retries reports whether a failed attempt of class can be followed by another: the class is in On and at
// least one attempt is left after attempt (1-based).
func (r RetryPolicy) Retries(class string, attempt int) bool {
	return attempt < r.Attempts && slices.Contains(r.On, class)
}

// Configured is true when a retry block applies to the node (any attribute not at its default).
func (r RetryPolicy) Configured() bool {
	for _, o := range r.Origins {
		if o != RetryOriginDefault {
			return true
		}
	}
	return false
}

// effectiveRetry resolves a node's retry policy, attribute by attribute: node block, sandbox block, default.
func effectiveRetry(sb, node *config.Retry) RetryPolicy {
	p := RetryPolicy{Attempts: config.DefaultRetryAttempts, Backoff: config.DefaultRetryBackoff,
		On: slices.Clone(config.RetryClasses), Origins: map[string]string{
			"attempts": RetryOriginDefault, "backoff": RetryOriginDefault, "on": RetryOriginDefault}}
	for _, layer := range []struct {
		r      *config.Retry
		origin string
	}{{sb, RetryOriginSandbox}, {node, RetryOriginNode}} {
		r := layer.r
		if r.AttemptsSet() {
			p.Attempts, p.Origins["attempts"] = int(r.Attempts), originAt(layer.origin, r.DeclRange)
		}
		if r.BackoffSet() {
			p.Backoff, p.Origins["backoff"] = r.Backoff, originAt(layer.origin, r.DeclRange)
		}
		if r.OnSet() {
			p.On, p.Origins["on"] = canonicalClasses(r.On), originAt(layer.origin, r.DeclRange)
		}
	}
	return p
}

func originAt(kind string, r hcl.Range) string {
	return fmt.Sprintf("%s %s:%d", kind, r.Filename, r.Start.Line)
}

// canonicalClasses orders retry classes as config.RetryClasses does, so that equal policies render alike.
func canonicalClasses(on []string) []string {
	out := []string{}
	for _, c := range config.RetryClasses {
		if slices.Contains(on, c) {
			out = append(out, c)
		}
	}
	return out
}

// Jitter bounds: each wait is the nominal one times a factor in [1-RetryJitter, 1+RetryJitter). Nodes that failed
// together on the same rate limit then do not all come back in the same second.
const RetryJitter = 0.2

// RetryWait is the wait before the attempt after failedAttempt (1-based): backoff doubled for each attempt
// already made, times a jitter factor drawn from rnd (a number in [0, 1); nil uses math/rand/v2), capped at
// config.MaxRetryBackoff. A zero backoff retries at once.
func RetryWait(backoff time.Duration, failedAttempt int, rnd func() float64) time.Duration {
	if backoff <= 0 {
		return 0
	}
	if failedAttempt < 1 {
		failedAttempt = 1
	}
	limit := config.MaxRetryBackoff
	d := backoff
	for i := 1; i < failedAttempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if rnd == nil {
		rnd = rand.Float64
	}
	f := rnd()
	if f < 0 || f >= 1 {
		f = 0.5
	}
	jittered := time.Duration(float64(d) * (1 - RetryJitter + 2*RetryJitter*f))
	return min(jittered, limit)
}

// RetrySchedule is the nominal waits (without jitter) between the attempts of a policy: Attempts-1 entries.
func RetrySchedule(p RetryPolicy) []time.Duration {
	var out []time.Duration
	for a := 1; a < p.Attempts; a++ {
		out = append(out, RetryWait(p.Backoff, a, func() float64 { return 0.5 }))
	}
	return out
}

// Describe is the one-line human form of a policy, e.g. "3 attempts on api_error, engine_error, timeout;
// backoff 10s doubling, capped 5m".
func (r RetryPolicy) Describe() string {
	if r.Attempts <= 1 {
		return "1 attempt (no retry)"
	}
	on := "nothing (no retry)"
	if len(r.On) > 0 {
		on = strings.Join(r.On, ", ")
	}
	return fmt.Sprintf("%d attempts on %s; backoff %s doubling, capped %s", r.Attempts, on,
		config.FormatDuration(r.Backoff), config.FormatDuration(config.MaxRetryBackoff))
}
