// Package telemetry exports every apply as OpenTelemetry traces and metrics over OTLP, configured the standard way
// (OTEL_EXPORTER_OTLP_ENDPOINT, _PROTOCOL, _HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): one trace per
// apply with a span per node, per attempt and per brokered model call, and meters of tokens, cost, durations,
// retries, denials and budget stops. It is an executor.Hook reading the ledger after each node; it never prints,
// never slows the apply on a collector that does not answer (bounded queues, a bounded final flush, a warning),
// and masks every string it exports with the run's secrets. It exports nothing unless asked to.
package telemetry
