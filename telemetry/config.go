package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard variables that switch export on: an endpoint for all signals or for one of the two kewplan sends.
var endpointVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// Enabled says whether an apply exports: an OTLP endpoint is set in the environment, or force (apply --otel,
// which without an endpoint sends to the collector's default local address). OTEL_SDK_DISABLED=true turns it off
// whatever else is set, as the specification says.
func Enabled(getenv func(string) string, force bool) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if force {
		return true
	}
	for _, v := range endpointVars {
		if strings.TrimSpace(getenv(v)) != "" {
			return true
		}
	}
	return false
}

// Options configure an Exporter. The exporters themselves read the standard variables (endpoint, headers,
// timeout, TLS, compression) from the process environment; Getenv only decides the protocol.
type Options struct {
	// Getenv reads the environment (os.Getenv); the protocol variables are read through it.
	Getenv func(string) string
	// Secrets are the values masked in every exported string (the credentials the plan forwards); the run's own
	// secrets are added as the engine registers them (executor.SecretHook).
	Secrets []string
	// PlanDigest and Engine are recorded on the apply's span.
	PlanDigest string
	Engine     string
	// Version is kewplan's version, the service.version resource attribute.
	Version string
	// Warn receives what went wrong with the export (a collector that does not answer, dropped data); the apply
	// goes on. Nil drops the warnings.
	Warn func(string)
	// FlushTimeout bounds the final flush at the apply's end; 0 means DefaultFlushTimeout.
	FlushTimeout time.Duration
}

// DefaultFlushTimeout bounds how long the end of an apply waits for its last spans and metrics to reach the
// collector. When an export already failed during the run the wait is shortFlush instead: a collector that did
// not answer then is not waited for again.
const (
	DefaultFlushTimeout = 5 * time.Second
	shortFlush          = 250 * time.Millisecond
)

// Queue bounds: spans wait in the batch processor's queue (dropped past it, counted and warned of), and node
// events in the exporter's own queue before the ledger is read for them.
const (
	maxSpanQueue  = 8192
	maxEventQueue = 4096
	batchTimeout  = time.Second
	metricPeriod  = 10 * time.Second
)

// protocol is the OTLP protocol of a signal: OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL,
// then http/protobuf (the specification's default).
func protocol(getenv func(string) string, signal string) (string, error) {
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"))
	if p == "" {
		p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	}
	return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q is not one kewplan exports with: set it to http/protobuf (the default) or grpc", p)
}

// exportRetry retries a failed batch briefly: long enough for a collector restarting, short enough that a dead one
// costs the run's end at most the flush timeout.
var (
	traceRetryHTTP  = otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 3 * time.Second}
	traceRetryGRPC  = otlptracegrpc.RetryConfig(traceRetryHTTP)
	metricRetryHTTP = otlpmetrichttp.RetryConfig(traceRetryHTTP)
	metricRetryGRPC = otlpmetricgrpc.RetryConfig(traceRetryHTTP)
)

func newSpanExporter(ctx context.Context, proto string) (sdktrace.SpanExporter, error) {
	if proto == "grpc" {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(traceRetryGRPC))
	}
	return otlptracehttp.New(ctx, otlptracehttp.WithRetry(traceRetryHTTP))
}

func newMetricExporter(ctx context.Context, proto string) (sdkmetric.Exporter, error) {
	if proto == "grpc" {
		return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithRetry(metricRetryGRPC))
	}
	return otlpmetrichttp.New(ctx, otlpmetrichttp.WithRetry(metricRetryHTTP))
}

// newResource is service.name kewplan (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it) with kewplan's
// version and the SDK's own attributes.
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	if version == "" {
		version = "dev"
	}
	r, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "kewplan"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && r == nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	return r, nil
}
