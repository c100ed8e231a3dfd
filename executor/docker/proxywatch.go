package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// The egress proxy's watch. Agents reach kewplan's proxy by IP address (they have no DNS), so a proxy that dies
// mid-run must come back at the very addresses their proxy URLs and base URLs name. The addresses therefore
// belong to a container of their own, which runs nothing but a listener on its loopback (the proxy image's own
// program with no node); the proxy's process joins its network namespace (--network container:<id>). Docker
// cannot pin an address on a network created without a subnet, which is how allowlist networks are made, nor on
// the default bridge; a namespace that outlives the process keeps every address on every network.
//
// Apply waits on the proxy's container through the Engine API. When it exits while the run needs it, apply says so
// at once (the nodes running, the exit status, the proxy's last line on stderr), records it in the ledger, and
// starts the proxy again in the same namespace with the same configuration on stdin (secrets, allowlists,
// placeholders, control secret); the broker's state file, in a directory of the state directory mounted into the
// proxy (egress/state.go), carries its meters, attempts and ended nodes across. A proxy that cannot be started
// again (maxRestartTries in a row, maxProxyRestarts in a run, or the namespace itself gone) is lost: the nodes
// that need it fail with that reason, those running are stopped, and none starts after.

// Bounds of the watch.
const (
	// maxRestartTries is how many starts of a new proxy are tried after one death before it is lost.
	maxRestartTries = 3
	// maxProxyRestarts bounds the restarts of one run: a proxy that keeps dying is lost.
	maxProxyRestarts = 5
	// keeperListen is the keeper's listener: its loopback, which no agent and not the host can reach.
	keeperListen = "127.0.0.1:3129"
	// proxyStateMount is where the proxy's container sees its broker state directory.
	proxyStateMount = "/state"
)

// restartPause is the wait before the n-th start of a new proxy after a death (n from 2): pacing, not
// synchronisation.
func restartPause(n int) time.Duration { return time.Duration(n-1) * 500 * time.Millisecond }

// proxyRestart is what the watch needs to start the same proxy again, and its own state: restarts, ready, lost
// and ended are guarded by egressState.mu; the rest is set before the watch starts.
type proxyRestart struct {
	keeper   *engine.Service // holds the addresses
	spec     engine.ServiceSpec
	stdin    []byte // the configuration, secrets included: in memory only, like the first start's
	stateDir string // the broker's state directory on the host ("" when no node is brokered)
	probe    string // the proxy's health address, on the proxy network

	cancel   context.CancelFunc
	done     chan struct{}
	restarts int
	// ready is closed once the proxy answers again; nil while it runs. lost says why it will not.
	ready chan struct{}
	lost  string
	// ended are the brokered nodes apply told the proxy had ended (told again after a restart).
	ended map[string]bool
}

// startProxyContainers starts the keeper of the proxy's addresses on networks, then the proxy in its namespace
// with cfg on stdin and, when a node is brokered, its state directory mounted.
func (d *dockerEngine) startProxyContainers(ctx context.Context, image string, networks []string, cfg *egress.Config) (*engine.Service, *engine.Service, error) {
	st := d.egress
	labels := func(role string) map[string]string {
		return map[string]string{LabelRole: role, planner.LabelRun: d.run.ID, LabelPID: strconv.Itoa(d.run.PID), LabelStateDir: d.run.Dir.Root}
	}
	keeperCfg, err := json.Marshal(egress.Config{Listen: keeperListen})
	if err != nil {
		return nil, nil, err
	}
	keeper, err := d.engine.StartService(ctx, engine.ServiceSpec{
		Name: st.name, Image: image, User: egress.ImageUser, Labels: labels(RoleEgressNetwork),
		Networks: networks, Memory: 64 << 20, PidsLimit: 32,
	}, keeperCfg, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("kewplan's egress proxy could not start: %v", err)
	}
	d.track(keeper.ID, true)
	r := &proxyRestart{keeper: keeper, ended: map[string]bool{}}
	st.restart = r
	spec := engine.ServiceSpec{Name: st.name + "-proxy", Image: image, User: egress.ImageUser, Labels: labels(RoleEgressProxy),
		NetworkOf: keeper.ID, Memory: egressProxyMemory, PidsLimit: egressProxyPids}
	if len(st.broker) > 0 {
		r.stateDir = d.run.Dir.ProxyState(d.run.ID)
		if err := makeProxyStateDir(r.stateDir); err != nil {
			return nil, nil, err
		}
		spec.Binds = map[string]string{r.stateDir: proxyStateMount}
		cfg.StateFile = proxyStateMount + "/broker.json"
	}
	if r.stdin, err = json.Marshal(cfg); err != nil {
		return nil, nil, fmt.Errorf("egress proxy configuration: %w", err)
	}
	r.spec = spec
	svc, err := d.startProxy(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kewplan's egress proxy could not start: %v", err)
	}
	return svc, keeper, nil
}

// startProxy starts one proxy process from the kept spec, with a fresh decision log and stderr tail.
func (d *dockerEngine) startProxy(ctx context.Context) (*engine.Service, error) {
	st, r := d.egress, d.egress.restart
	lines, tail := adapter.NewProxyLog(d.run, st.users), &adapter.TailWriter{Max: 2048}
	st.mu.Lock()
	st.lines, st.stderr = lines, tail
	st.mu.Unlock()
	svc, err := d.engine.StartService(ctx, r.spec, r.stdin, lines, tail)
	if err != nil {
		return nil, err
	}
	d.track(svc.ID, true)
	st.mu.Lock()
	st.svc = svc
	st.mu.Unlock()
	return svc, nil
}

// makeProxyStateDir makes the broker's state directory, writable by the proxy's user whatever uid the engine maps
// it to: it holds meters, never a secret, and lies in the state directory's broker space, which only its owner
// can enter.
func makeProxyStateDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("the egress proxy's broker state %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the egress proxy's broker state %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return fmt.Errorf("the egress proxy's broker state %s: %w", dir, err)
	}
	return nil
}

// watchEgress starts following kewplan's proxy once it answers.
func (d *dockerEngine) watchEgress() {
	st := d.egress
	r := st.restart
	if r == nil {
		return
	}
	r.probe = st.controlAddr // the health endpoint shares the control endpoint's listener
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		d.followEgress(ctx)
	}()
}

// stopWatch ends the watch before apply removes the proxy, so that its removal is not taken for a death.
func (st *egressState) stopWatch() {
	if st.restart == nil || st.restart.cancel == nil {
		return
	}
	st.restart.cancel()
	<-st.restart.done
}

// followEgress waits on the proxy and on the keeper of its addresses until ctx ends, starting the proxy again
// each time it exits.
func (d *dockerEngine) followEgress(ctx context.Context) {
	st, r := d.egress, d.egress.restart
	keeperGone := make(chan int, 1)
	go func() {
		code, err := r.keeper.Wait(ctx)
		if errors.Is(err, engine.ErrEngineLost) {
			return // the engine is lost, not the keeper: the apply ends with its running nodes interrupted
		}
		keeperGone <- code
	}()
	type exit struct {
		code int
		err  error
	}
	for {
		st.mu.Lock()
		svc := st.svc
		st.mu.Unlock()
		exited := make(chan exit, 1)
		go func() {
			code, err := svc.Wait(ctx)
			exited <- exit{code, err}
		}()
		var e exit
		select {
		case <-ctx.Done():
			return
		case code := <-keeperGone:
			if ctx.Err() != nil {
				return
			}
			d.proxyLost(fmt.Sprintf("the container %s that holds kewplan's egress proxy's addresses exited (status %d), so the addresses the nodes' proxy and base URLs name are gone", r.keeper.Name, code), d.runningProxied())
			return
		case e = <-exited:
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(e.err, engine.ErrEngineLost) {
			return // as for the keeper: the loop ends the apply, each running node interrupted by its own run
		}
		if e.err != nil {
			d.proxyLost(fmt.Sprintf("kewplan lost sight of its egress proxy: %v", e.err), d.runningProxied())
			return
		}
		if !d.proxyExited(ctx, svc, e.code) {
			return
		}
	}
}

// proxyExited reports a death of the proxy and starts it again; false when it is lost (or ctx ended).
func (d *dockerEngine) proxyExited(ctx context.Context, dead *engine.Service, code int) bool {
	st, r := d.egress, d.egress.restart
	running := d.runningProxied()
	st.mu.Lock()
	tail := st.stderr
	r.restarts++
	n := r.restarts
	ready := make(chan struct{})
	r.ready = ready
	st.mu.Unlock()
	defer func() { // whatever the outcome, nothing waits on this restart any more
		st.mu.Lock()
		if r.ready == ready {
			close(ready)
			r.ready = nil
		}
		st.mu.Unlock()
	}()
	words := "(none)"
	if tail != nil && tail.LastLine() != "" {
		words = tail.LastLine()
	}
	death := fmt.Sprintf("kewplan's egress proxy %s exited with status %d while %s; its last line on stderr: %s", dead.Name, code, runningText(running), words)
	d.proxyEvent(ledger.RunEventProxyExited, running, death+"; kewplan starts it again at the same addresses, with the same configuration and the broker's meters")
	d.markRunning(death)
	// The dead container's output has ended; its decision log is read to its last line.
	_ = dead.Stop()
	d.track(dead.ID, false)
	st.mu.Lock()
	oldLines := st.lines
	st.mu.Unlock()
	if oldLines != nil {
		oldLines.Flush()
	}
	if n > maxProxyRestarts {
		d.proxyLost(fmt.Sprintf("%s, and it has exited %d times in this run, more than the %d restarts kewplan allows a run", death, n, maxProxyRestarts), running)
		return false
	}
	var err error
	for try := 1; try <= maxRestartTries; try++ {
		if try > 1 {
			t := time.NewTimer(restartPause(try))
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		if err = d.restartProxy(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		d.proxyLost(fmt.Sprintf("%s, and it could not be started again (%d tries): %v", death, maxRestartTries, err), running)
		return false
	}
	d.proxyEvent(ledger.RunEventProxyRestarted, running, fmt.Sprintf("kewplan's egress proxy runs again at the same addresses (restart %d of at most %d in this run); the nodes' proxy URLs, placeholders and base URLs are unchanged and the broker went on from its meters", n, maxProxyRestarts))
	return true
}

// restartProxy starts a new proxy in the keeper's namespace, waits until it answers, and tells it again which
// nodes ended (the state file says it too; this holds should its last save have failed).
func (d *dockerEngine) restartProxy(ctx context.Context) error {
	r := d.egress.restart
	// A container of the same name left by a failed try goes first.
	if ok, _ := d.engine.ContainerExists(ctx, r.spec.Name); ok {
		if err := d.engine.ForceRemove(r.spec.Name); err != nil {
			return err
		}
	}
	svc, err := d.startProxy(ctx)
	if err != nil {
		return err
	}
	if err := d.tellEnded(ctx, svc); err != nil {
		_ = svc.Stop()
		d.track(svc.ID, false)
		return err
	}
	return nil
}

// tellEnded waits until a new proxy answers, then tells it again which nodes ended.
func (d *dockerEngine) tellEnded(ctx context.Context, svc *engine.Service) error {
	st, r := d.egress, d.egress.restart
	if err := d.probeEgress(ctx, svc, r.probe); err != nil {
		return err
	}
	st.mu.Lock()
	ended := make([]string, 0, len(r.ended))
	for user := range r.ended {
		ended = append(ended, user)
	}
	st.mu.Unlock()
	for _, user := range ended {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := egress.EndNodeAt(cctx, st.controlAddr, st.control, user)
		cancel()
		if err != nil {
			return fmt.Errorf("the new proxy could not be told that a node ended: %v", err)
		}
	}
	return nil
}

// proxyEvent says what happened at once, as a warning of the run, and records it in the ledger.
func (d *dockerEngine) proxyEvent(kind string, nodes []string, msg string) {
	msg = d.maskEgress(msg)
	d.run.Warn("", msg)
	if d.run.RunEvent != nil {
		d.run.RunEvent(ledger.RunEvent{Kind: kind, Nodes: strings.Join(nodes, ","), Message: msg, Time: time.Now()})
	}
}

// proxyLost gives up on the proxy: the reason is recorded and said, the running attempts that need it are
// stopped with it, and no node that needs it starts after.
func (d *dockerEngine) proxyLost(reason string, running []string) {
	st, r := d.egress, d.egress.restart
	reason = d.maskEgress(reason)
	st.mu.Lock()
	r.lost = reason
	if r.ready != nil {
		close(r.ready)
		r.ready = nil
	}
	st.mu.Unlock()
	d.proxyEvent(ledger.RunEventProxyLost, running, reason+"; the nodes that reach hosts through it fail")
	d.mu.Lock()
	var live []*liveAttempt
	for la := range d.live {
		la.lost = reason
		live = append(live, la)
	}
	d.mu.Unlock()
	for _, la := range live {
		la.stop()
	}
}

// proxyLostReason is why the proxy will not come back, "" while it runs or is being started again.
func (d *dockerEngine) proxyLostReason() string {
	if d.egress == nil || d.egress.restart == nil {
		return ""
	}
	d.egress.mu.Lock()
	defer d.egress.mu.Unlock()
	return d.egress.restart.lost
}

// awaitProxy waits while the proxy is being started again (a control call made meanwhile would find nothing
// listening); it returns the reason when the proxy is lost.
func (d *dockerEngine) awaitProxy(ctx context.Context) string {
	if d.egress == nil || d.egress.restart == nil {
		return ""
	}
	st, r := d.egress, d.egress.restart
	st.mu.Lock()
	ready := r.ready
	st.mu.Unlock()
	if ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
		}
	}
	return d.proxyLostReason()
}

// nodeEndedAtProxy remembers that a brokered node's proxy user ended, to tell a restarted proxy again.
func (d *dockerEngine) nodeEndedAtProxy(user string) {
	if d.egress == nil || d.egress.restart == nil {
		return
	}
	d.egress.mu.Lock()
	d.egress.restart.ended[user] = true
	d.egress.mu.Unlock()
}

// liveAttempt is an attempt of a proxied node whose container runs: what the watch tells it (guarded by
// dockerEngine.mu).
type liveAttempt struct {
	node string
	stop func()
	// deaths are the proxy's deaths it ran through; lost is set, and stop called, when the proxy is lost.
	deaths []string
	lost   string
}

// liveProxied registers a proxied attempt whose container is about to start; done unregisters it and returns
// what happened to the proxy meanwhile. Nil for a node that does not reach hosts through kewplan's proxy.
func (d *dockerEngine) liveProxied(node string, stop func()) *liveAttempt {
	if !d.proxied(node) {
		return nil
	}
	la := &liveAttempt{node: node, stop: stop}
	d.mu.Lock()
	if d.live == nil {
		d.live = map[*liveAttempt]bool{}
	}
	d.live[la] = true
	d.mu.Unlock()
	return la
}

// done unregisters the attempt; its deaths and lost are settled from then on.
func (d *dockerEngine) attemptDone(la *liveAttempt) (deaths []string, lost string) {
	if la == nil {
		return nil, ""
	}
	d.mu.Lock()
	delete(d.live, la)
	deaths, lost = slices.Clone(la.deaths), la.lost
	d.mu.Unlock()
	return deaths, lost
}

// markRunning tells every running proxied attempt that the proxy died under it.
func (d *dockerEngine) markRunning(death string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for la := range d.live {
		la.deaths = append(la.deaths, death)
	}
}

// runningProxied are the proxied nodes whose containers run, sorted.
func (d *dockerEngine) runningProxied() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for la := range d.live {
		if !slices.Contains(out, la.node) {
			out = append(out, la.node)
		}
	}
	slices.Sort(out)
	return out
}

func runningText(nodes []string) string {
	switch len(nodes) {
	case 0:
		return "no node was running"
	case 1:
		return fmt.Sprintf("node %q was running", nodes[0])
	}
	return "nodes " + quoteList(nodes) + " were running"
}

// proxyFailure is the failure of an attempt that needs a proxy that is lost.
func proxyFailure(lost string) *adapter.Failure {
	return adapter.Failed(ledger.StatusFailed, "the node reaches hosts through kewplan's egress proxy, which is gone: "+lost)
}

// proxied reports whether a node reaches hosts through kewplan's own proxy.
func (d *dockerEngine) proxied(node string) bool {
	return d.egress != nil && d.egress.restart != nil && d.egress.urls[node] != ""
}
