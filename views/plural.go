package views

import "fmt"

// plural is the noun for n things: one when n is 1, many otherwise.
func plural[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count is n followed by its noun: "1 node", "3 nodes".
func count(n int, one, many string) string { return fmt.Sprintf("%d %s", n, plural(n, one, many)) }
