// Package engine is kewplan's adapter to the Docker Engine API and the only package that imports the Docker SDK
// (engine.go for containers, reconnect.go for an engine that stops answering, engine_probe.go for images).
// Everything the apply loop and the smoke and conform checks do with an engine goes through the Engine type, so the
// hardening a container runs under is decided in exactly one place, ContainerConfig, from the planner.Container the
// plan displayed. It decides nothing about a plan: it runs what it is given.
package engine
