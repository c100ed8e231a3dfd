// Package benchplan generates the configurations `make bench` plans (a chain, a fan-out and a for_each fan-out of
// any size) and holds the benchmark that compares `kewplan plan --json` with parsing the same files.
package benchplan
