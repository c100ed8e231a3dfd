package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	units "github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/kewplan/kewplan/planner"
)

// MinEngineAPIVersion is the oldest Engine API kewplan talks to (Docker Engine 19.03).
const MinEngineAPIVersion = client.MinAPIVersion

// ErrEngineUnavailable is wrapped by Connect when no engine answers.
var ErrEngineUnavailable = errors.New("docker engine unavailable")

// engineError reads as its message alone and wraps ErrEngineUnavailable.
type engineError struct{ msg string }

func (e *engineError) Error() string { return e.msg }
func (e *engineError) Unwrap() error { return ErrEngineUnavailable }

func engineErrorf(format string, args ...any) error {
	return &engineError{msg: fmt.Sprintf(format, args...)}
}

// ErrNotFound is wrapped by the inspect operations when the object does not exist.
var ErrNotFound = errors.New("not found")

// Engine is a connection to one Docker Engine, its API version negotiated.
type Engine struct {
	cli        *client.Client
	host       string
	apiVersion string
	health     *health // reconnect.go
}

// Connect reaches the engine named by DOCKER_HOST (and DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) in environ, or the
// local default socket, pings it explicitly and negotiates the API version, so that an absent or too-old engine is
// reported here, in words, rather than as a confusing failure of the first real call.
func Connect(ctx context.Context, environ []string) (*Engine, error) {
	env := EnvMap(environ)
	opts := []client.Opt{}
	host := client.DefaultDockerHost
	if h := env["DOCKER_HOST"]; h != "" {
		host = h
		opts = append(opts, client.WithHost(h))
	}
	if certPath := env["DOCKER_CERT_PATH"]; certPath != "" {
		opts = append(opts, client.WithTLSClientConfig(certPath+"/ca.pem", certPath+"/cert.pem", certPath+"/key.pem"))
	}
	within, err := reconnectWithin(env)
	if err != nil {
		return nil, err
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, engineErrorf("DOCKER_HOST %q: %v; set DOCKER_HOST to the engine's address (for example unix:///var/run/docker.sock)", host, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ping, err := cli.Ping(pingCtx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		_ = cli.Close()
		if ping.APIVersion != "" && versions.LessThan(ping.APIVersion, MinEngineAPIVersion) {
			return nil, engineErrorf("the Docker Engine at %s speaks API %s, older than %s, the oldest kewplan supports; upgrade Docker Engine to 19.03 or later",
				host, ping.APIVersion, MinEngineAPIVersion)
		}
		return nil, engineErrorf("no Docker Engine answered at %s (%v); start the Docker daemon, or set DOCKER_HOST to the address of one that runs",
			host, err)
	}
	return &Engine{cli: cli, host: host, apiVersion: cli.ClientVersion(), health: &health{bound: within}}, nil
}

// ComponentVersions reports the engine's version ("Engine") and the versions of the components it names ("runc",
// "containerd", ...), as `docker version` shows them.
func (e *Engine) ComponentVersions(ctx context.Context) (map[string]string, error) {
	res, err := e.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return nil, fmt.Errorf("engine version: %w", err)
	}
	out := map[string]string{"Engine": res.Version}
	for _, c := range res.Components {
		if c.Name != "Engine" || out["Engine"] == "" {
			out[c.Name] = c.Version
		}
	}
	return out, nil
}

// Runtimes lists the container runtimes the engine has registered, as `docker info` shows them ("runc", and
// "runsc" once gVisor is registered in daemon.json), with the engine's default runtime.
func (e *Engine) Runtimes(ctx context.Context) (names []string, defaultRuntime string, err error) {
	res, err := e.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("engine info: %w", err)
	}
	for name := range res.Info.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, res.Info.DefaultRuntime, nil
}

// Close releases the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// Host is the engine address in use.
func (e *Engine) Host() string { return e.host }

// APIVersion is the negotiated Engine API version.
func (e *Engine) APIVersion() string { return e.apiVersion }

// ImageInfo is what kewplan needs to know about a local image.
type ImageInfo struct {
	Ref        string
	ID         string
	User       string
	Env        []string
	WorkingDir string
	Entrypoint []string
	Cmd        []string
	Labels     map[string]string
}

// InspectImage reports a locally present image. kewplan never pulls: a missing image is an error wrapping
// ErrNotFound that says how to build or load it.
func (e *Engine) InspectImage(ctx context.Context, ref string) (*ImageInfo, error) {
	res, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q is not present in the local engine (%w); kewplan never pulls: build it with `docker build -t %s …` or load it with `docker load -i FILE`, then try again",
				ref, ErrNotFound, ref)
		}
		return nil, fmt.Errorf("inspect image %q: %w", ref, err)
	}
	info := &ImageInfo{Ref: ref, ID: res.ID}
	if res.Config != nil {
		info.User = res.Config.User
		info.Env = res.Config.Env
		info.WorkingDir = res.Config.WorkingDir
		info.Entrypoint = res.Config.Entrypoint
		info.Cmd = res.Config.Cmd
		info.Labels = res.Config.Labels
	}
	return info, nil
}

// NetworkInfo is what kewplan checks about a network before it puts a container on it.
type NetworkInfo struct {
	Name     string
	ID       string
	Driver   string
	Internal bool
	// Options are the driver options ("com.docker.network.bridge.inhibit_ipv4" and the like).
	Options map[string]string
}

// InspectNetwork reports a network; a missing one is an error wrapping ErrNotFound.
func (e *Engine) InspectNetwork(ctx context.Context, name string) (*NetworkInfo, error) {
	res, err := e.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("network %q: %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("inspect network %q: %w", name, err)
	}
	return &NetworkInfo{Name: res.Network.Name, ID: res.Network.ID, Driver: res.Network.Driver, Internal: res.Network.Internal, Options: res.Network.Options}, nil
}

// CreateNetwork creates a bridge network; internal ones have no route out.
func (e *Engine) CreateNetwork(ctx context.Context, name string, internal bool, labels map[string]string) (string, error) {
	res, err := e.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: internal, Labels: labels})
	if err != nil {
		return "", fmt.Errorf("create network %q: %w", name, err)
	}
	return res.ID, nil
}

// RemoveNetwork removes a network; a missing one is not an error.
func (e *Engine) RemoveNetwork(ctx context.Context, name string) error {
	if _, err := e.cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove network %q: %w", name, err)
	}
	return nil
}

// ContainerSpec is the Engine API configuration of one container. ContainerConfig derives it from a
// planner.Container; callers such as smoke and conform may then override Entrypoint, Cmd or Env on a copy.
type ContainerSpec struct {
	Name             string
	Config           *container.Config
	HostConfig       *container.HostConfig
	NetworkingConfig *network.NetworkingConfig
}

// ContainerConfig derives the Engine API configuration from the same planner.Container fields Argv renders, flag
// by flag, so what a reviewer approved in the plan is what the engine runs. env holds the values of kewplan's own
// environment: a credential is forwarded as NAME=value only when its name is set there, exactly as `docker run
// -e NAME` would; an unset name stays unset in the container. The values never leave this struct.
func ContainerConfig(c *planner.Container, env map[string]string) (*ContainerSpec, error) {
	return ProxiedContainerConfig(c, env, nil)
}

// ProxiedContainerConfig is ContainerConfig for a container whose egress goes through a proxy: proxyEnv holds the
// values of c.ProxyEnv() (the node's proxy URL, which carries its proxy secret), supplied by apply from the proxy it
// started and never from kewplan's own environment. A proxy variable without a value there stays unset, as a
// credential does. The Engine API gets c.FixedEnv() as written, the tmpfs mounts with their sizes and the --dns
// upstreams, exactly as the argv shows them.
func ProxiedContainerConfig(c *planner.Container, env, proxyEnv map[string]string) (*ContainerSpec, error) {
	if c == nil {
		return nil, errors.New("no container: the node's plan has errors")
	}
	for _, p := range []string{c.Checkout, c.RunID} {
		if p == planner.CheckoutPlaceholder || p == planner.RunPlaceholder || p == "" {
			return nil, fmt.Errorf("container %s: placeholder %q is not filled in", c.Name, p)
		}
	}
	cfg := &container.Config{
		Image:        c.Image,
		Cmd:          append([]string(nil), c.Args...),
		WorkingDir:   planner.WorkDir,
		Labels:       map[string]string{planner.LabelNode: c.Node, planner.LabelRun: c.RunID},
		AttachStdout: true,
		AttachStderr: true,
	}
	for i, name := range c.Env {
		// The planner refuses such names; this is the last check before the engine, for a container that did
		// not come from a plan. The entry is not echoed: it may be a secret pasted in the wrong place.
		if !isEnvName(name) {
			return nil, fmt.Errorf("container %s: credential entry %d is not an environment variable name (letters, digits and _, not starting with a digit); refusing to forward it", c.Name, i+1)
		}
		if v, ok := env[name]; ok {
			cfg.Env = append(cfg.Env, name+"="+v)
		}
	}
	if c.BaseURL != "" {
		// A brokered node: the base URL of kewplan's broker, from the proxy apply started, as the argv shows.
		if !isEnvName(c.BaseURL) {
			return nil, fmt.Errorf("container %s: the base-URL variable is not an environment variable name; refusing it", c.Name)
		}
		if v, ok := proxyEnv[c.BaseURL]; ok {
			cfg.Env = append(cfg.Env, c.BaseURL+"="+v)
		}
	}
	for _, name := range c.ProxyEnv() {
		if v, ok := proxyEnv[name]; ok {
			cfg.Env = append(cfg.Env, name+"="+v)
		}
	}
	cfg.Env = append(cfg.Env, c.FixedEnv()...)
	var dns []netip.Addr
	for _, d := range c.DNS {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return nil, fmt.Errorf("container %s: --dns %q is not an IP address", c.Name, d)
		}
		dns = append(dns, a)
	}
	pids := c.PidsLimit
	host := &container.HostConfig{
		Binds:          []string{c.Checkout + ":" + planner.WorkDir},
		NetworkMode:    container.NetworkMode(c.Network),
		AutoRemove:     true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs:          c.TmpfsMounts(),
		DNS:            dns,
	}
	host.PidsLimit = &pids
	// --runtime: the isolation tier the plan showed. "" leaves the engine's default runtime (no flag in the argv).
	host.Runtime = c.Runtime
	if c.Memory != "" {
		m, err := units.RAMInBytes(c.Memory)
		if err != nil {
			return nil, fmt.Errorf("container %s: memory %q: %w", c.Name, c.Memory, err)
		}
		host.Memory = m
	}
	if c.CPUs != "" {
		n, err := ParseCPUs(c.CPUs)
		if err != nil {
			return nil, fmt.Errorf("container %s: cpus %q: %w", c.Name, c.CPUs, err)
		}
		host.NanoCPUs = n
	}
	return &ContainerSpec{
		Name:       c.Name,
		Config:     cfg,
		HostConfig: host,
		NetworkingConfig: &network.NetworkingConfig{
			EndpointsConfig: map[string]*network.EndpointSettings{c.Network: {}},
		},
	}, nil
}

// isEnvName reports whether s matches [A-Za-z_][A-Za-z0-9_]*, the credential names kewplan forwards.
func isEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ParseCPUs converts a --cpus value ("2", "1.5") to nano-CPUs the way the docker CLI does: exact decimal, refusing
// more precision than a nano-CPU.
func ParseCPUs(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 {
		return 0, fmt.Errorf("%q is not a non-negative decimal number", s)
	}
	n := new(big.Rat).Mul(r, big.NewRat(1e9, 1))
	if !n.IsInt() {
		return 0, fmt.Errorf("%q is too precise (at most 9 decimal places)", s)
	}
	return n.Num().Int64(), nil
}

// Clone returns a deep copy of the spec, for callers that override parts of it.
func (s *ContainerSpec) Clone() *ContainerSpec {
	out := &ContainerSpec{Name: s.Name}
	cfg := *s.Config
	cfg.Cmd = append([]string(nil), s.Config.Cmd...)
	cfg.Entrypoint = append([]string(nil), s.Config.Entrypoint...)
	cfg.Env = append([]string(nil), s.Config.Env...)
	cfg.Labels = make(map[string]string, len(s.Config.Labels))
	for k, v := range s.Config.Labels {
		cfg.Labels[k] = v
	}
	out.Config = &cfg
	host := *s.HostConfig
	host.Binds = append([]string(nil), s.HostConfig.Binds...)
	host.CapDrop = append([]string(nil), s.HostConfig.CapDrop...)
	host.SecurityOpt = append([]string(nil), s.HostConfig.SecurityOpt...)
	host.Tmpfs = make(map[string]string, len(s.HostConfig.Tmpfs))
	for k, v := range s.HostConfig.Tmpfs {
		host.Tmpfs[k] = v
	}
	host.DNS = append([]netip.Addr(nil), s.HostConfig.DNS...)
	if s.HostConfig.PidsLimit != nil {
		p := *s.HostConfig.PidsLimit
		host.PidsLimit = &p
	}
	out.HostConfig = &host
	if s.NetworkingConfig != nil {
		nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{}}
		for k := range s.NetworkingConfig.EndpointsConfig {
			nc.EndpointsConfig[k] = &network.EndpointSettings{}
		}
		out.NetworkingConfig = nc
	}
	return out
}

// SetEntrypoint overrides the image's entrypoint and the container command (smoke and conform run probes this way).
func (s *ContainerSpec) SetEntrypoint(entrypoint []string, cmd []string) {
	s.Config.Entrypoint = append([]string(nil), entrypoint...)
	s.Config.Cmd = append([]string(nil), cmd...)
}

// RunOptions tune Engine.Run.
type RunOptions struct {
	// Stdout and Stderr receive the container's demultiplexed output. A slow writer slows the stream (back
	// pressure), it never makes the engine buffer without bound. nil discards.
	Stdout, Stderr io.Writer
	// Timeout kills the container at the deadline; 0 means none.
	Timeout time.Duration
	// Created, when set, is called with the container id as soon as it exists (for last-resort cleanup).
	Created func(id string)
	// Started, when set, is called with the container id once the container started.
	Started func(id string)
	// Reconnected, when set, is called when the engine answered again after the container's connection broke
	// and Run follows the container again; lostFor is how long the engine did not answer.
	Reconnected func(lostFor time.Duration)
	// StreamGrace bounds how long Run waits for the output streams to end after the container is gone (backstop
	// only: they normally end when the container's stdio closes). 0 means 60s.
	StreamGrace time.Duration
}

// StartError is Run's error when the container could not be created, attached or started: the engine failed
// before the agent ran (an engine_error a retry block may retry), as opposed to what happened while it ran, which
// RunResult reports.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// RunResult is what happened to one container.
type RunResult struct {
	ID       string
	ExitCode int64 // -1 when the container never reported one
	// TimedOut is set when Run killed the container at its deadline; Cancelled when ctx ended first.
	TimedOut  bool
	Cancelled bool
	// StreamErr is the first error demultiplexing or writing the output streams.
	StreamErr error
	// CleanupErr is set when the container could not be confirmed removed: a container may be left behind.
	CleanupErr error
	// EngineLost is set (an *EngineLostError) when the engine stopped answering while the container ran and did
	// not answer again within the reconnect bound: the container was left as it was, perhaps still running.
	EngineLost error
	// OutputLost says what of the container's output could not be read back after the engine answered again.
	OutputLost string
}

// cleanupTimeout bounds each cleanup call; cleanup runs on a fresh context so a cancelled apply still cleans up.
const cleanupTimeout = 30 * time.Second

// Run creates the container, attaches to it before it starts (so no output is lost), starts it, waits for it to
// exit, to be killed at opts.Timeout, or for ctx to end (then it is killed too), drains both output streams, and
// makes sure the container is removed. An error means the container could not be created, attached or started; it
// was removed in that case too. Everything after start is reported in RunResult. A broken connection to the engine
// is never read as the container's exit (reconnect.go): Run waits for the engine within its reconnect bound and
// follows the container again, or returns with RunResult.EngineLost, the container left as it is.
func (e *Engine) Run(ctx context.Context, spec *ContainerSpec, opts RunOptions) (*RunResult, error) {
	res := &RunResult{ExitCode: -1}
	id, err := e.create(ctx, spec)
	if err != nil {
		return res, &StartError{Err: e.lostOr(ctx, err)}
	}
	res.ID = id
	if opts.Created != nil {
		opts.Created(id)
	}
	removeOnError := func(cause error) (*RunResult, error) {
		cause = e.lostOr(ctx, cause)
		if errors.Is(cause, ErrEngineLost) {
			return res, &StartError{Err: cause} // nothing can remove it now; the next apply's sweep does
		}
		res.CleanupErr = e.ForceRemove(id)
		return res, &StartError{Err: cause}
	}

	attach, err := e.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return removeOnError(fmt.Errorf("attach to container %s: %w", spec.Name, err))
	}
	defer attach.Close()
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	out := &runOutput{stdout: &countingWriter{w: stdout}, stderr: &countingWriter{w: stderr}}
	st := out.follow(attach.Reader, func() { attach.Close() })

	// Register the wait before start so the exit cannot be missed; with AutoRemove, wait for the removal itself
	// so that "returned" means "gone". The wait survives ctx: after a cancellation it observes the kill.
	cond := container.WaitConditionNextExit
	if spec.HostConfig.AutoRemove {
		cond = container.WaitConditionRemoved
	}
	waitCtx, cancelWait := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWait()
	wait := e.cli.ContainerWait(waitCtx, id, client.ContainerWaitOptions{Condition: cond})

	started := time.Now()
	var waitErr error
	if _, err := e.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		err = fmt.Errorf("start container %s: %w", spec.Name, err)
		if !e.startedAnyway(ctx, id, err) {
			st.stop()
			return removeOnError(err)
		}
		waitErr = err // the engine started it, but its answer was lost with the connection: follow it again below
	}
	if opts.Started != nil {
		opts.Started(id)
	}
	var deadline time.Time
	if opts.Timeout > 0 {
		deadline = started.Add(opts.Timeout)
	}

	if waitErr == nil {
		waitErr = e.awaitExit(ctx, id, wait, deadline, res)
	}
	for reattached := 0; waitErr != nil && !res.TimedOut && !res.Cancelled && reattached < maxReattach; reattached++ {
		// The wait ended without the container's exit: its connection broke, or the engine went away. The agent
		// may still run; ask the engine again before anything is decided.
		st.stop()
		lostAt := time.Now()
		if err := e.awaitEngine(ctx, waitErr); err != nil {
			if errors.Is(err, ErrEngineLost) {
				res.EngineLost = err
				return res, nil
			}
			res.Cancelled = true // ctx ended while the engine did not answer
			res.CleanupErr = e.ForceRemove(id)
			return res, nil
		}
		var gone bool
		wait, st, gone, waitErr = e.reattach(ctx, waitCtx, id, spec.HostConfig.AutoRemove, started, out, res)
		if waitErr == nil && opts.Reconnected != nil {
			opts.Reconnected(time.Since(lostAt))
		}
		if gone {
			break
		}
		if waitErr == nil {
			waitErr = e.awaitExit(ctx, id, wait, deadline, res)
		}
	}

	// The container is gone (or going): ensure removal before anything reads what it left in the checkout.
	res.CleanupErr = e.ForceRemove(id)
	if waitErr != nil && res.CleanupErr == nil && res.ExitCode < 0 && !res.TimedOut && !res.Cancelled {
		res.StreamErr = fmt.Errorf("wait for container %s: %w", spec.Name, waitErr)
	}
	drainOutput(spec.Name, st.done, st.close, opts.StreamGrace, res)
	return res, nil
}

// create creates the container, saying in words why the engine refused it.
func (e *Engine) create(ctx context.Context, spec *ContainerSpec) (string, error) {
	created, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name, Config: spec.Config, HostConfig: spec.HostConfig, NetworkingConfig: spec.NetworkingConfig,
	})
	if err == nil {
		return created.ID, nil
	}
	if ctx.Err() != nil {
		// The request may have reached the engine before the cancellation: remove a container of this name
		// only when it carries exactly this spec's labels, so another apply's container is never touched.
		e.removeIfOurs(spec)
	}
	if cerrdefs.IsConflict(err) {
		return "", fmt.Errorf("create container %s: a container of that name already exists (%v); another apply may be running it — if not, remove it with `docker rm -f %s`", spec.Name, err, spec.Name)
	}
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("create container %s: %w (kewplan never pulls: build or load the image first)", spec.Name, err)
	}
	return "", fmt.Errorf("create container %s: %w", spec.Name, err)
}

// awaitExit waits for the started container to exit, killing it at its deadline (zero: none) or when ctx ends,
// and records the exit code, TimedOut or Cancelled in res. After a kill it waits at most cleanupTimeout for the
// engine to report the exit. It returns the wait's own error, if any.
func (e *Engine) awaitExit(ctx context.Context, id string, wait client.ContainerWaitResult, deadlineAt time.Time, res *RunResult) error {
	var deadline <-chan time.Time
	if !deadlineAt.IsZero() {
		t := time.NewTimer(time.Until(deadlineAt))
		defer t.Stop()
		deadline = t.C
	}
	kill := func() {
		kctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_, _ = e.cli.ContainerKill(kctx, id, client.ContainerKillOptions{Signal: "KILL"})
	}
	var waitErr error
	select {
	case r := <-wait.Result:
		res.ExitCode = r.StatusCode
	case waitErr = <-wait.Error:
	case <-deadline:
		res.TimedOut = true
		kill()
	case <-ctx.Done():
		res.Cancelled = true
		kill()
	}
	if res.TimedOut || res.Cancelled {
		backstop := time.NewTimer(cleanupTimeout)
		select {
		case r := <-wait.Result:
			res.ExitCode = r.StatusCode
		case waitErr = <-wait.Error:
		case <-backstop.C:
			waitErr = errors.New("the engine did not report the killed container's exit")
		}
		backstop.Stop()
	}
	return waitErr
}

// drainOutput waits for the container's output to end, at most grace (default 60s) after the container is gone:
// a process that inherited the stream must not hold apply forever. What is cut off is reported in res.StreamErr.
func drainOutput(name string, streamDone <-chan error, closeAttach func(), grace time.Duration, res *RunResult) {
	if grace <= 0 {
		grace = 60 * time.Second
	}
	gt := time.NewTimer(grace)
	defer gt.Stop()
	select {
	case err := <-streamDone:
		if err != nil && res.StreamErr == nil {
			res.StreamErr = fmt.Errorf("output of container %s: %w", name, err)
		}
	case <-gt.C:
		closeAttach()
		<-streamDone
		if res.StreamErr == nil {
			res.StreamErr = fmt.Errorf("output of container %s did not end %s after the container was gone; the rest was dropped", name, grace)
		}
	}
}

func (e *Engine) removeIfOurs(spec *ContainerSpec) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	f := client.Filters{}.Add("name", "^/"+spec.Name+"$")
	for k, v := range spec.Config.Labels {
		f.Add("label", k+"="+v)
	}
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		_ = e.ForceRemove(c.ID)
	}
}

// ForceRemove kills and removes a container and confirms it is gone. A container that is already gone is not an
// error. It runs on its own context so cancelled callers still clean up.
func (e *Engine) ForceRemove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	// AutoRemove may still be in progress: poll the engine (bounded) until the container is gone.
	for i := 0; ; i++ {
		_, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("confirm container %s is removed: %w", shortID(id), err)
		}
		if i == 0 {
			if _, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
				return fmt.Errorf("remove container %s: %w", shortID(id), err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s is still present after %s; remove it with `docker rm -f %s`", shortID(id), cleanupTimeout, shortID(id))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill stops a container with SIGKILL and waits (bounded) until it no longer runs, leaving it and what it wrote
// to its bind mounts in place: an orphan is stopped first, its work kept, and only then is it removed. A container
// already stopped or gone is not an error.
func (e *Engine) Kill(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	wait := e.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil &&
		!cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("kill container %s: %w", shortID(id), err)
	}
	select {
	case <-wait.Result:
		return nil
	case err := <-wait.Error:
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("wait for container %s to stop: %w", shortID(id), err)
	}
}

func isRemovalInProgress(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is already in progress")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ContainerSummary is one listed container.
type ContainerSummary struct {
	ID     string
	Name   string
	State  string
	Labels map[string]string
	// BindSources are the host paths bind-mounted into it.
	BindSources []string
}

// ListContainers lists containers (running or not) that carry the label key (any value) or key=value.
func (e *Engine) ListContainers(ctx context.Context, label string) ([]ContainerSummary, error) {
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("list containers with label %s: %w", label, err)
	}
	out := make([]ContainerSummary, 0, len(res.Items))
	for _, c := range res.Items {
		s := ContainerSummary{ID: c.ID, State: string(c.State), Labels: c.Labels}
		if len(c.Names) > 0 {
			s.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		for _, m := range c.Mounts {
			if m.Type == "bind" {
				s.BindSources = append(s.BindSources, m.Source)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// ContainerExists reports whether a container of that name or id exists.
func (e *Engine) ContainerExists(ctx context.Context, nameOrID string) (bool, error) {
	_, err := e.cli.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect container %s: %w", nameOrID, err)
	}
	return true, nil
}

// CaptureResult is the bounded output of RunCapture.
type CaptureResult struct {
	*RunResult
	Stdout, Stderr []byte
	// Truncated is set when a stream exceeded the limit; the excess was dropped.
	Truncated bool
}

// RunCapture runs a container like Run and keeps at most limit bytes of each output stream (smoke and conform
// probes use it).
func (e *Engine) RunCapture(ctx context.Context, spec *ContainerSpec, timeout time.Duration, limit int) (*CaptureResult, error) {
	out, errb := &limitedBuffer{max: limit}, &limitedBuffer{max: limit}
	res, err := e.Run(ctx, spec, RunOptions{Stdout: out, Stderr: errb, Timeout: timeout})
	return &CaptureResult{RunResult: res, Stdout: out.buf.Bytes(), Stderr: errb.buf.Bytes(), Truncated: out.over || errb.over}, err
}

type limitedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

// BuildImage builds an image from a Dockerfile and files (name -> content, mode 0755 for names in executables)
// with the engine's classic builder, tagging it tag. Nothing is pulled unless the Dockerfile's FROM needs it, so
// test images are built `FROM scratch`.
func (e *Engine) BuildImage(ctx context.Context, tag string, files map[string][]byte, executables map[string]bool) error {
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for name, data := range files {
		mode := int64(0o644)
		if executables[name] {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := e.cli.ImageBuild(ctx, &ctxTar, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Dockerfile: "Dockerfile"})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	var tail []string
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("build image %s: reading the build output: %w", tag, err)
		}
		if msg.Stream != "" {
			tail = append(tail, strings.TrimRight(msg.Stream, "\n"))
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if msg.Error != "" {
			return fmt.Errorf("build image %s: %s\n%s", tag, msg.Error, strings.Join(tail, "\n"))
		}
	}
	return nil
}

// RemoveImage removes an image by reference; a missing one is not an error.
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	if _, err := e.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// InspectedContainer is the subset of `docker inspect` the argv-agreement checks compare.
type InspectedContainer struct {
	Image      string
	Cmd        []string
	WorkingDir string
	Labels     map[string]string
	// EnvNames are the names of environment entries with a value (NAME=value); values are never kept.
	EnvNames []string
	// EnvWithoutValue are bare NAME entries: what the docker CLI sends for `-e NAME` when NAME is unset in its
	// environment. kewplan never sends one (an unset credential stays unset).
	EnvWithoutValue []string
	ReadonlyRootfs  bool
	Tmpfs           map[string]string
	CapDrop         []string
	SecurityOpt     []string
	PidsLimit       int64
	AutoRemove      bool
	NetworkMode     string
	Binds           []string
	Memory          int64
	NanoCPUs        int64
	User            string
	// Runtime is the container's runtime as the engine recorded it ("runc" for its default, "runsc", ...).
	Runtime string
	DNS     []string
	// EnvValueDigests are SHA-256 digests (first 8 bytes, hex) of each NAME=value entry, sorted, so two containers' values
	// can be compared without keeping any.
	EnvValueDigests []string
}

// InspectContainer reports a container's configuration (env values are reduced to names).
func (e *Engine) InspectContainer(ctx context.Context, nameOrID string) (*InspectedContainer, error) {
	res, err := e.cli.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("container %s: %w", nameOrID, ErrNotFound)
		}
		return nil, fmt.Errorf("inspect container %s: %w", nameOrID, err)
	}
	c := res.Container
	out := &InspectedContainer{}
	if c.Config != nil {
		out.Image = c.Config.Image
		out.Cmd = c.Config.Cmd
		out.WorkingDir = c.Config.WorkingDir
		out.Labels = c.Config.Labels
		out.User = c.Config.User
		for _, kv := range c.Config.Env {
			if name, _, ok := strings.Cut(kv, "="); ok {
				out.EnvNames = append(out.EnvNames, name)
				sum := sha256.Sum256([]byte(kv))
				out.EnvValueDigests = append(out.EnvValueDigests, hex.EncodeToString(sum[:8]))
			} else {
				out.EnvWithoutValue = append(out.EnvWithoutValue, kv)
			}
		}
	}
	if h := c.HostConfig; h != nil {
		out.ReadonlyRootfs = h.ReadonlyRootfs
		out.Tmpfs = h.Tmpfs
		out.CapDrop = h.CapDrop
		out.SecurityOpt = h.SecurityOpt
		if h.PidsLimit != nil {
			out.PidsLimit = *h.PidsLimit
		}
		out.AutoRemove = h.AutoRemove
		out.NetworkMode = string(h.NetworkMode)
		out.Binds = h.Binds
		out.Memory = h.Memory
		out.NanoCPUs = h.NanoCPUs
		out.Runtime = h.Runtime
		// The order of environment entries means nothing, and the CLI puts NAME=value flags before -e NAME ones.
		slices.Sort(out.EnvNames)
		slices.Sort(out.EnvValueDigests)
		for _, d := range h.DNS {
			out.DNS = append(out.DNS, d.String())
		}
	}
	return out, nil
}

// CreateContainer creates (does not start) a container from spec and returns its id; tests and probes use it to
// inspect a configuration without running anything.
func (e *Engine) CreateContainer(ctx context.Context, spec *ContainerSpec) (string, error) {
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name, Config: spec.Config, HostConfig: spec.HostConfig, NetworkingConfig: spec.NetworkingConfig,
	})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	return res.ID, nil
}

func EnvMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// TagImage gives a local image another reference.
func (e *Engine) TagImage(ctx context.Context, source, target string) error {
	if _, err := e.cli.ImageTag(ctx, client.ImageTagOptions{Source: source, Target: target}); err != nil {
		return fmt.Errorf("tag image %s as %s: %w", source, target, err)
	}
	return nil
}
