// Package benchplan generates the configurations `make bench` plans (a chain, a fan-out and a for_each fan-out of
// any size) and holds the benchmark that compares `kewplan plan --json` with parsing the same files, and the
// allocation guards (guard_test.go) that hold `plan --json`, `show` and `diff` to a budget of allocations and
// bytes per node.
package benchplan
