package main

import "errors"

// TelemetryCmd is a STUB: the issue that owns `kewplan telemetry` replaces this file.
type TelemetryCmd struct{}

// Run is not implemented yet.
func (TelemetryCmd) Run(env *Env) error { return errors.New("kewplan telemetry is not implemented yet") }
