package engine

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// ServiceSpec is a long-running helper container apply starts beside its agents (kewplan's egress proxy; tests use
// it for stubs). It is hardened like an agent, whatever the caller asks: read-only root, every capability dropped,
// no-new-privileges, a pids and a memory limit, and the image's non-root user (or User).
type ServiceSpec struct {
	Name   string
	Image  string
	Cmd    []string // nil keeps the image's
	User   string   // "" keeps the image's USER
	Labels map[string]string
	// Networks are joined in order: the first at creation, the others before the container starts (Engine API
	// 1.41 takes one network at creation). At least one, unless NetworkOf is set.
	Networks []string
	// NetworkOf is the id of a running container whose network namespace the service joins, with its addresses
	// on all its networks, instead of Networks (Docker's --network container:<id>): a service started again
	// in it answers at the same addresses. Aliases and DNS are then the other container's.
	NetworkOf string
	// Binds are host directories mounted read-write (host path -> path in the container), for a service that
	// keeps state across its own restarts.
	Binds map[string]string
	// Aliases are extra DNS names of the container, per network.
	Aliases map[string][]string
	// DNS are the upstreams of the container's embedded resolver (--dns); nil keeps the engine's.
	DNS       []netip.Addr
	Memory    int64 // bytes; 0 means 128 MiB
	PidsLimit int64 // 0 means 256
	// Tmpfs are writable scratch mounts (path -> options), for a service that needs one.
	Tmpfs map[string]string
}

// Service is a started ServiceSpec. Its output streams until Stop.
type Service struct {
	ID   string
	Name string
	e    *Engine

	attach     client.HijackedResponse
	streamDone chan error
	stopOnce   sync.Once
	stopErr    error

	mu       sync.Mutex
	stopping bool
	logs     io.Closer // the log followed after a reconnect, closed by Stop
}

// StartService creates the container, attaches to its streams (stdin too when stdin is not nil: it is written,
// then closed, so the process reads it to its end), joins its networks and starts it. stdout and stderr receive
// its output until Stop; nil discards. On error nothing is left behind.
func (e *Engine) StartService(ctx context.Context, spec ServiceSpec, stdin []byte, stdout, stderr io.Writer) (*Service, error) {
	if (len(spec.Networks) == 0) == (spec.NetworkOf == "") {
		return nil, fmt.Errorf("service %s: give it networks or another container's network, one of the two", spec.Name)
	}
	mem, pids := spec.Memory, spec.PidsLimit
	if mem <= 0 {
		mem = 128 << 20
	}
	if pids <= 0 {
		pids = 256
	}
	cfg := &container.Config{
		Image: spec.Image, Cmd: spec.Cmd, User: spec.User, Labels: spec.Labels,
		AttachStdout: true, AttachStderr: true,
		AttachStdin: stdin != nil, OpenStdin: stdin != nil, StdinOnce: stdin != nil,
	}
	var mode container.NetworkMode
	var endpoints map[string]*network.EndpointSettings
	endpoint := func(n string) *network.EndpointSettings {
		return &network.EndpointSettings{Aliases: append([]string(nil), spec.Aliases[n]...)}
	}
	if spec.NetworkOf != "" {
		mode = container.NetworkMode("container:" + spec.NetworkOf)
	} else {
		mode = container.NetworkMode(spec.Networks[0])
		endpoints = map[string]*network.EndpointSettings{spec.Networks[0]: endpoint(spec.Networks[0])}
	}
	host := &container.HostConfig{
		NetworkMode:    mode,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		DNS:            spec.DNS,
		Tmpfs:          spec.Tmpfs,
	}
	host.Memory = mem
	host.PidsLimit = &pids
	for src, dst := range spec.Binds {
		host.Binds = append(host.Binds, src+":"+dst+":rw")
	}
	created, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name, Config: cfg, HostConfig: host,
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: endpoints},
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("create container %s: a container of that name already exists; remove it with `docker rm -f %s`", spec.Name, spec.Name)
		}
		return nil, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	s := &Service{ID: created.ID, Name: spec.Name, e: e, streamDone: make(chan error, 1)}
	fail := func(cause error) (*Service, error) {
		if s.attach.Conn != nil {
			s.attach.Close()
		}
		_ = e.ForceRemove(s.ID)
		return nil, cause
	}
	for _, n := range spec.Networks[min(1, len(spec.Networks)):] {
		if _, err := e.cli.NetworkConnect(ctx, n, client.NetworkConnectOptions{Container: s.ID, EndpointConfig: endpoint(n)}); err != nil {
			return fail(fmt.Errorf("connect container %s to network %q: %w", spec.Name, n, err))
		}
	}
	att, err := e.cli.ContainerAttach(ctx, s.ID, client.ContainerAttachOptions{Stream: true, Stdin: stdin != nil, Stdout: true, Stderr: true})
	if err != nil {
		return fail(fmt.Errorf("attach to container %s: %w", spec.Name, err))
	}
	s.attach = att.HijackedResponse
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	go s.follow(stdout, stderr)
	if _, err := e.cli.ContainerStart(ctx, s.ID, client.ContainerStartOptions{}); err != nil {
		return fail(fmt.Errorf("start container %s: %w", spec.Name, err))
	}
	if stdin != nil {
		if _, err := s.attach.Conn.Write(stdin); err != nil {
			return fail(fmt.Errorf("write to container %s: %w", spec.Name, err))
		}
		if err := s.attach.CloseWrite(); err != nil {
			return fail(fmt.Errorf("close the input of container %s: %w", spec.Name, err))
		}
	}
	return s, nil
}

// follow delivers the service's output until it ends. When its stream ends but the service was not being stopped,
// the engine may only have lost the connection (reconnect.go): once the engine answers again and the container
// still runs, its output is followed on from its log, from the byte the stream had reached.
func (s *Service) follow(stdout, stderr io.Writer) {
	out := &runOutput{stdout: &countingWriter{w: stdout}, stderr: &countingWriter{w: stderr}}
	_, err := stdcopy.StdCopy(out.stdout, out.stderr, s.attach.Reader)
	for range maxReattach {
		if s.isStopping() || s.e.awaitEngine(context.Background(), err) != nil || s.isStopping() {
			break
		}
		ictx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		res, ierr := s.e.cli.ContainerInspect(ictx, s.ID, client.ContainerInspectOptions{})
		cancel()
		if ierr != nil || res.Container.State == nil || !res.Container.State.Running {
			break // it ended (or cannot be found): its stream ended with it
		}
		logs, lerr := s.e.cli.ContainerLogs(context.Background(), s.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if lerr != nil {
			break
		}
		s.mu.Lock()
		stopping := s.stopping
		s.logs = logs
		s.mu.Unlock()
		if stopping {
			logs.Close()
			break
		}
		_, err = stdcopy.StdCopy(&skipWriter{w: out.stdout, skip: out.stdout.n}, &skipWriter{w: out.stderr, skip: out.stderr.n}, logs)
		logs.Close()
	}
	s.streamDone <- err
}

func (s *Service) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// IPAddress is the service's address on a network it joined.
func (s *Service) IPAddress(ctx context.Context, networkName string) (netip.Addr, error) {
	res, err := s.e.cli.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("inspect container %s: %w", s.Name, err)
	}
	c := res.Container
	if c.NetworkSettings != nil {
		if ep := c.NetworkSettings.Networks[networkName]; ep != nil && ep.IPAddress.IsValid() {
			return ep.IPAddress, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("container %s has no address on network %q", s.Name, networkName)
}

// Wait blocks until the service's process is not running (it exited, was killed or removed) and returns its
// exit status (-1 when the engine gives none), or ctx's error when ctx ends first. A wait whose connection to the
// engine broke is not the service's exit (reconnect.go): it waits again once the engine answers, and returns an
// error wrapping ErrEngineLost when the engine did not answer within the bound.
func (s *Service) Wait(ctx context.Context) (int, error) {
	for reattached := 0; ; reattached++ {
		wait := s.e.cli.ContainerWait(ctx, s.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		var err error
		select {
		case r := <-wait.Result:
			if r.Error != nil && r.Error.Message != "" {
				return int(r.StatusCode), fmt.Errorf("wait for container %s: %s", s.Name, r.Error.Message)
			}
			return int(r.StatusCode), nil
		case err = <-wait.Error:
		}
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if cerrdefs.IsNotFound(err) {
			return -1, nil // removed: not running either
		}
		if !connectionFailed(err) || reattached == maxReattach {
			return -1, fmt.Errorf("wait for container %s: %w", s.Name, err)
		}
		if lost := s.e.awaitEngine(ctx, err); lost != nil {
			return -1, fmt.Errorf("wait for container %s: %w", s.Name, lost)
		}
	}
}

// Running reports whether the service's process still runs, and its exit code when it does not.
func (s *Service) Running(ctx context.Context) (bool, int, error) {
	res, err := s.e.cli.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
	if err != nil {
		return false, -1, fmt.Errorf("inspect container %s: %w", s.Name, err)
	}
	st := res.Container.State
	if st == nil {
		return false, -1, nil
	}
	return st.Running, st.ExitCode, nil
}

// Stop kills and removes the container and waits (at most 10s) for its output to end. It is idempotent and runs on
// its own context, so a cancelled apply still stops its services.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		s.stopErr = s.e.ForceRemove(s.ID)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-s.streamDone: // a killed container's stream may end in any error: nothing that matters is lost
		case <-t.C:
		}
		s.attach.Close()
		s.mu.Lock()
		if s.logs != nil {
			s.logs.Close()
		}
		s.mu.Unlock()
	})
	return s.stopErr
}

// CreateBridge creates a user-defined bridge network with driver options (for example
// "com.docker.network.bridge.enable_icc": "false"); internal ones have no route out.
func (e *Engine) CreateBridge(ctx context.Context, name string, internal bool, labels, options map[string]string) (string, error) {
	res, err := e.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: internal, Labels: labels, Options: options})
	if err != nil {
		return "", fmt.Errorf("create network %q: %w", name, err)
	}
	return res.ID, nil
}
