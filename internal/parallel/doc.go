// Package parallel runs independent pieces of work on every core; the caller keeps their results in order.
package parallel
