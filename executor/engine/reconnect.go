package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// When the engine stops answering.
//
// A container's output stream and its wait are two long-lived connections to the engine. When the engine's socket
// closes (the daemon restarts, a socket proxy dies, a remote DOCKER_HOST drops), both end with a connection error,
// never with the container's exit: the agent may well still run. Run never reads that as the agent's exit. It asks
// the engine again, with backoff, for at most the reconnect bound; one probe is shared by every caller, so an apply
// of many nodes waits the bound once. If the engine answers within it, Run finds the container where it is: still
// running (it waits on it again and follows its output from the engine's log, from the byte it had reached), ended
// but not yet removed, or gone (its exit code read from the engine's events). If not, the engine is lost for the
// rest of this connection: Run returns at once with RunResult.EngineLost and leaves the container as it is (nothing
// could stop it), and every later call that needs the engine gets the same error at once. A start request whose
// answer is lost the same way is taken for what the engine says once it answers again: a container that runs (or
// ran) is followed like one whose wait broke.

// DefaultReconnectWithin is how long kewplan keeps asking an engine that stopped answering before it gives up.
const DefaultReconnectWithin = 30 * time.Second

// ReconnectWithinEnv overrides DefaultReconnectWithin (a Go duration such as "5s"); tests shorten it.
const ReconnectWithinEnv = "KEWPLAN_ENGINE_RECONNECT_WITHIN"

// ErrEngineLost is wrapped by the errors of an engine that stopped answering and did not answer again within the
// reconnect bound.
var ErrEngineLost = errors.New("the Docker engine stopped answering")

// EngineLostError says which engine stopped answering, since when, and the last failure.
type EngineLostError struct {
	Host  string
	Since time.Time
	Bound time.Duration
	Err   error
}

func (e *EngineLostError) Error() string {
	return fmt.Sprintf("the Docker engine at DOCKER_HOST=%s stopped answering at %s and did not answer again within %s (last: %v)",
		e.Host, e.Since.UTC().Format(time.RFC3339), e.Bound, e.Err)
}

func (e *EngineLostError) Unwrap() error { return ErrEngineLost }

// maxReattach bounds how often one Run follows its container again: an engine that answers a ping but keeps
// breaking the wait is reported, not chased forever.
const maxReattach = 10

// reconnectWithin reads ReconnectWithinEnv from kewplan's environment.
func reconnectWithin(env map[string]string) (time.Duration, error) {
	v := env[ReconnectWithinEnv]
	if v == "" {
		return DefaultReconnectWithin, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration; set it like %s=30s, or unset it for the default (%s)",
			ReconnectWithinEnv, v, ReconnectWithinEnv, DefaultReconnectWithin)
	}
	return d, nil
}

// health is the shared state of the engine's reachability: at most one probe runs, and a lost engine stays lost.
type health struct {
	mu     sync.Mutex
	bound  time.Duration
	probe  chan struct{} // closed when the running probe ends; nil when none runs
	lost   *EngineLostError
	probes int // probes started, for tests
}

// Lost is the engine's loss once a probe gave up on it, else nil.
func (e *Engine) Lost() error {
	e.health.mu.Lock()
	defer e.health.mu.Unlock()
	if e.health.lost == nil {
		return nil
	}
	return e.health.lost
}

// awaitEngine returns nil once the engine answers a ping, an *EngineLostError when it did not within the bound
// (at once when an earlier probe already gave up), or ctx's error.
func (e *Engine) awaitEngine(ctx context.Context, cause error) error {
	h := e.health
	h.mu.Lock()
	if h.lost != nil {
		h.mu.Unlock()
		return h.lost
	}
	done := h.probe
	if done == nil {
		done = make(chan struct{})
		h.probe = done
		h.probes++
		go e.probeEngine(done, cause)
	}
	h.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		select {
		case <-done: // the probe's outcome wins over a cancellation that came with it (a node stopped for it)
		default:
			return ctx.Err()
		}
	}
	if err := e.Lost(); err != nil {
		return err
	}
	return nil
}

// probeEngine pings the engine with backoff until it answers or the bound has passed, and records the outcome.
func (e *Engine) probeEngine(done chan struct{}, cause error) {
	h := e.health
	since := time.Now()
	deadline := since.Add(h.bound)
	last := cause
	for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 2*time.Second) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		pctx, cancel := context.WithTimeout(context.Background(), min(left, 5*time.Second))
		_, err := e.cli.Ping(pctx, client.PingOptions{})
		cancel()
		if err == nil {
			last = nil
			break
		}
		last = err
		if left = time.Until(deadline); left <= 0 {
			break
		}
		time.Sleep(min(backoff, left)) // the engine's own time to come back; bounded by the deadline
	}
	h.mu.Lock()
	if last != nil {
		h.lost = &EngineLostError{Host: e.host, Since: since, Bound: h.bound, Err: last}
	}
	h.probe = nil
	h.mu.Unlock()
	close(done)
}

// connectionFailed reports whether err is the engine's connection failing rather than an answer of the engine.
func connectionFailed(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return client.IsErrConnectionFailed(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, net.ErrClosed)
}

// lostOr is err, or the engine's loss when err is a failed connection and the engine did not answer again within
// the bound.
func (e *Engine) lostOr(ctx context.Context, err error) error {
	if !connectionFailed(err) {
		return err
	}
	if lost := e.awaitEngine(ctx, err); errors.Is(lost, ErrEngineLost) {
		return fmt.Errorf("%w (%v)", lost, err)
	}
	return err
}

// startedAnyway reports whether a container whose start request failed with the engine's connection was started
// all the same: the engine answered again within the bound and has it running, or ran it (it ended, or it is gone,
// removed after its run).
func (e *Engine) startedAnyway(ctx context.Context, id string, err error) bool {
	if !connectionFailed(err) || e.awaitEngine(ctx, err) != nil {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	res, ierr := e.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(ierr) {
		return true // only a container that ran is removed by the engine itself
	}
	if ierr != nil || res.Container.State == nil {
		return false
	}
	s := res.Container.State
	return s.Running || s.StartedAt != "" && !strings.HasPrefix(s.StartedAt, "0001-")
}

// countingWriter counts what reached w. Only one output stream writes at a time (a follower starts after the one
// before it ended), so the counts need no lock.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// skipWriter drops the first skip bytes (what the writer already had before the engine's connection broke) and
// passes the rest on.
type skipWriter struct {
	w    io.Writer
	skip int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	total := len(p)
	if s.skip > 0 {
		k := min(s.skip, int64(len(p)))
		s.skip -= k
		p = p[k:]
	}
	if len(p) == 0 {
		return total, nil
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return total, nil
}

// runOutput is a container's two output streams as Run delivers them, counted so that a stream followed again
// after a reconnect resumes where the last one ended.
type runOutput struct {
	stdout, stderr *countingWriter
}

// outputStream is one follower of a container's output: the attach stream, or its log after a reconnect.
type outputStream struct {
	done  chan error
	close func()
}

// follow demultiplexes r into the outputs, skipping what they already hold, until r ends.
func (o *runOutput) follow(r io.Reader, closer func()) *outputStream {
	s := &outputStream{done: make(chan error, 1), close: closer}
	stdout, stderr := &skipWriter{w: o.stdout, skip: o.stdout.n}, &skipWriter{w: o.stderr, skip: o.stderr.n}
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, r)
		s.done <- err
	}()
	return s
}

// ended is a stream that has nothing more to deliver.
func ended() *outputStream {
	s := &outputStream{done: make(chan error, 1), close: func() {}}
	s.done <- nil
	return s
}

// stop closes the follower and waits for it to end (closing its connection ends the copy); its error is kept for
// the drain only when it is the last one.
func (s *outputStream) stop() {
	s.close()
	err := <-s.done
	s.done <- err
}

// reattach finds a container again once the engine answers after its connection broke. It returns the new wait
// (unset when the container is gone) and its output's follower; gone means the engine no longer has the
// container, whose exit code is then read from the engine's events into res when they still hold it.
func (e *Engine) reattach(ctx, waitCtx context.Context, id string, autoRemove bool, since time.Time, out *runOutput, res *RunResult) (wait client.ContainerWaitResult, st *outputStream, gone bool, err error) {
	ictx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	_, err = e.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
	cancel()
	if cerrdefs.IsNotFound(err) {
		if code, ok := e.exitFromEvents(ctx, id, since); ok {
			res.ExitCode = code
		}
		res.OutputLost = "the container ended while the engine did not answer and the engine removed it with its log: what it wrote from then on is lost"
		return wait, ended(), true, nil
	}
	if err != nil {
		return wait, ended(), false, fmt.Errorf("inspect container %s: %w", shortID(id), err)
	}
	// Wait first, then read the log: an exit after the inspection is not missed. "not-running" returns at once for
	// a container that already ended; an auto-removed one is waited on until it is gone, as Run's first wait is.
	cond := container.WaitConditionNotRunning
	if autoRemove {
		cond = container.WaitConditionRemoved
	}
	wait = e.cli.ContainerWait(waitCtx, id, client.ContainerWaitOptions{Condition: cond})
	logs, err := e.cli.ContainerLogs(waitCtx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		res.OutputLost = fmt.Sprintf("the container's output while the engine did not answer could not be read back (%v)", err)
		return wait, ended(), false, nil
	}
	return wait, out.follow(logs, func() { logs.Close() }), false, nil
}

// exitFromEvents reads the exit code of container id from the engine's "die" event since since, for a container
// removed while the engine did not answer; ok is false when the engine no longer holds the event.
func (e *Engine) exitFromEvents(ctx context.Context, id string, since time.Time) (code int64, ok bool) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	f := client.Filters{}.Add("type", "container").Add("container", id).Add("event", "die")
	r := e.cli.Events(ectx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Add(-time.Minute).Unix(), 10),
		Until:   strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: f,
	})
	for {
		select {
		case m, open := <-r.Messages:
			if !open {
				return code, ok
			}
			if c, err := strconv.ParseInt(m.Actor.Attributes["exitCode"], 10, 64); err == nil {
				code, ok = c, true
			}
		case <-r.Err:
			return code, ok
		case <-ectx.Done():
			return code, ok
		}
	}
}
