// Package testtools holds what only kewplan's tests, benchmarks and make targets use: golden (golden files), testkit
// (the engine or a skip, a throwaway repository), redacttest (a credential's encodings and a leak checker),
// sockrelay (a socket relay to the engine a test cuts and restores), k8stest (a local control plane), k8stools (the
// script that builds its binaries), benchplan (make bench's configurations and measurements), advreport (make
// adversarial's table) and collector (a real OpenTelemetry Collector, built from the module otelcol beside it). No
// package of the kewplan binary imports them.
package testtools
