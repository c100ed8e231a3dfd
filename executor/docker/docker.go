package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/checkout"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/planner"
)

// The Docker engine of the apply loop (adapter.Engine): each attempt of a node is a fresh clone on this host, a
// prompt file, the container planner.Container describes (executor/engine runs it), then the reviewer's verdict
// read back from the checkout or the worker's commits handed to the host broker. The run's networks and kewplan's
// egress proxy are its shared objects (egress.go).

// dockerEngine runs an apply's nodes as containers on the Docker engine of kewplan's environment (DOCKER_HOST).
type dockerEngine struct {
	run      *adapter.Run
	engine   *engine.Engine
	env      map[string]string
	egress   *egressState // the apply's egress proxy; nil when no node is proxied
	mu       sync.Mutex
	imageIDs map[string]string // image ref -> id, from preflight and later inspections
	// live is what still runs or lies on disk, for Abort: containers by id, prompt files.
	containers map[string]bool
	prompts    map[*checkout.PromptFile]bool
	// live are the running attempts of proxied nodes, for the proxy's watch (proxywatch.go).
	live map[*liveAttempt]bool
}

var _ adapter.Engine = (*dockerEngine)(nil)
var _ adapter.ImageResolver = (*dockerEngine)(nil)
var _ adapter.LossReporter = (*dockerEngine)(nil)

// New returns the Docker engine for one apply; it connects in Preflight.
func New() adapter.Engine { return newEngine() }

func newEngine() *dockerEngine {
	return &dockerEngine{imageIDs: map[string]string{}, containers: map[string]bool{}, prompts: map[*checkout.PromptFile]bool{}}
}

// Preflight checks everything a node needs before any container starts, collecting every problem so one apply
// attempt tells the user all that is missing: git, the credentials in kewplan's environment, the engine, its
// runtimes, the images (present, not root) and the allowlist networks (present, --internal).
func (d *dockerEngine) Preflight(ctx context.Context, run *adapter.Run) (problems, warnings []string) {
	d.run, d.env = run, engine.EnvMap(run.Environ)
	if _, err := exec.LookPath("git"); err != nil {
		problems = append(problems, "git is not installed or not on PATH: kewplan clones each node's repository with the system git; install git")
	}
	for _, np := range run.Plan.Nodes {
		if adapter.NodePlanProblem(np) != "" {
			continue // the loop reports it
		}
		set := false
		for _, name := range np.Credentials {
			if d.env[name] != "" {
				set = true
				break
			}
		}
		if !set {
			problems = append(problems, fmt.Sprintf("node %q: none of runner %q's credentials is set in kewplan's environment (%s); export one of them, for example `export %s=…`",
				np.Name, np.Runner, strings.Join(np.Credentials, ", "), np.Credentials[0]))
		}
	}
	eng, err := engine.Connect(ctx, run.Environ)
	if err != nil {
		return append(problems, err.Error()), nil
	}
	d.engine = eng
	if versions, err := eng.ComponentVersions(ctx); err == nil {
		warnings = append(warnings, VersionFloorWarnings(versions)...)
	}
	problems = append(problems, d.runtimePreflight(ctx)...)
	images, networks := d.imagesAndNetworks()
	problems = append(problems, d.imagePreflight(ctx, images)...)
	p, w := d.networkPreflight(ctx, networks)
	return append(problems, p...), append(warnings, w...)
}

// imagesAndNetworks are the images and allowlist networks the plan's nodes use, each with the nodes using it.
func (d *dockerEngine) imagesAndNetworks() (images, networks map[string][]string) {
	images, networks = map[string][]string{}, map[string][]string{}
	for _, np := range d.run.Plan.Nodes {
		// A node whose values depend on another node's outputs has no container until apply re-plans it;
		// its image and network are known all the same.
		image, netName := np.Image, ""
		if np.Container != nil {
			image, netName = np.Container.Image, np.Container.Network
		} else if d.run.Config != nil && d.run.Config.Sandbox != nil {
			netName = d.run.Config.Sandbox.AllowlistNetwork
		}
		if image != "" {
			images[image] = append(images[image], np.Name)
		}
		if np.Network == config.NetworkAllowlist && netName != "" {
			networks[netName] = append(networks[netName], np.Name)
		}
	}
	return images, networks
}

// imagePreflight inspects every image: it must be present locally (nothing is pulled) and not run as root.
func (d *dockerEngine) imagePreflight(ctx context.Context, images map[string][]string) []string {
	var problems []string
	for _, ref := range slices.Sorted(maps.Keys(images)) {
		info, err := d.engine.InspectImage(ctx, ref)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %s: %v", quoteList(images[ref]), err))
			continue
		}
		if problem := rootImageProblem(info); problem != "" {
			problems = append(problems, fmt.Sprintf("node %s: %s", quoteList(images[ref]), problem))
			continue
		}
		d.imageIDs[ref] = info.ID
	}
	return problems
}

// networkPreflight checks every allowlist network: it must exist and be --internal, and should give the host no
// address on its bridge.
func (d *dockerEngine) networkPreflight(ctx context.Context, networks map[string][]string) (problems, warnings []string) {
	for _, name := range slices.Sorted(maps.Keys(networks)) {
		info, err := d.engine.InspectNetwork(ctx, name)
		if errors.Is(err, engine.ErrNotFound) {
			problems = append(problems, fmt.Sprintf("node %s: the allowlist network %q does not exist; kewplan fails closed and never falls back to another network: create it with `%s` and attach your egress proxy to it",
				quoteList(networks[name]), name, allowlistNetworkCommand(name)))
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if !info.Internal {
			// A network that merely has the allowlist's name is no allowlist: its containers reach any host.
			problems = append(problems, fmt.Sprintf("node %s: the allowlist network %q is not --internal, so containers on it could reach the internet directly instead of only through your egress proxy; kewplan fails closed: recreate it with `docker network rm %s && %s` and attach your egress proxy to it",
				quoteList(networks[name]), name, name, allowlistNetworkCommand(name)))
			continue
		}
		if info.Driver == "bridge" && info.Options[inhibitIPv4] != "true" {
			// An --internal bridge still gives the host an address on it, and the host's INPUT chain is not
			// Docker's: an agent reaches every service this host listens on all interfaces.
			warnings = append(warnings, fmt.Sprintf("the allowlist network %q gives this host an address on its bridge, so agents can reach any service the host listens on (all interfaces); recreate it without one: `docker network rm %s && %s`",
				name, name, allowlistNetworkCommand(name)))
		}
	}
	return problems, warnings
}

// Start prepares the networks and kewplan's egress proxy (egress.go).
func (d *dockerEngine) Start(ctx context.Context, run *adapter.Run) error {
	d.run = run
	return d.startNetworking(ctx)
}

// End removes the egress proxy (idempotent) and waits for its decision log to end.
func (d *dockerEngine) End(context.Context, *adapter.Run) { d.stopEgress() }

// Lost is the engine's loss once it stopped answering for longer than its reconnect bound (engine.ErrEngineLost).
func (d *dockerEngine) Lost() error {
	if d.engine == nil {
		return nil
	}
	return d.engine.Lost()
}

// Close releases the engine's connection.
func (d *dockerEngine) Close() error {
	if d.engine == nil {
		return nil
	}
	return d.engine.Close()
}

// Abort deletes every prompt file still on disk and kills and removes every container still running, within ctx.
func (d *dockerEngine) Abort(ctx context.Context) []error {
	if d.egress != nil {
		d.egress.stopWatch() // the proxy removed below is not to be started again
	}
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.containers))
	prompts := slices.Collect(maps.Keys(d.prompts))
	d.mu.Unlock()
	var errs []error
	for _, p := range prompts {
		if err := p.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.engine == nil {
		return errs
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if err := d.engine.ForceRemove(id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(id)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		runID := ""
		if d.run != nil {
			runID = d.run.ID
		}
		mu.Lock()
		errs = append(errs, fmt.Errorf("cleanup did not finish in time; check `docker ps -a --filter label=%s=%s`", planner.LabelRun, runID))
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(errs)
}

func (d *dockerEngine) track(id string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.containers[id] = true
	} else {
		delete(d.containers, id)
	}
}

func (d *dockerEngine) trackPrompt(p *checkout.PromptFile, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.prompts[p] = true
	} else {
		delete(d.prompts, p)
	}
}

// Attempt is one attempt of a node on Docker: a fresh checkout, the node's slot, its container, then the
// reviewer's verdict or the worker's push.
func (d *dockerEngine) Attempt(ctx context.Context, at *adapter.Attempt) *adapter.Failure {
	if lost := d.proxyLostReason(); lost != "" && d.proxied(at.Node.Name) {
		return proxyFailure(lost + "; nothing ran")
	}
	step := time.Now()
	repo, base, f := d.prepareCheckout(ctx, at)
	at.Step(adapter.StepCheckout, step)
	if f != nil {
		return f
	}
	if f := at.TakeSlot(ctx); f != nil {
		return f
	}
	if f := d.attemptStarts(ctx, at); f != nil {
		return f
	}
	step = time.Now()
	f = d.runAgent(ctx, at)
	at.Step(adapter.StepContainer, step)
	if f != nil {
		d.keepWork(ctx, at, repo, base, f, false)
		return f
	}
	step = time.Now()
	if at.Node.Role == config.RoleReviewer {
		f = judgeReview(at, base)
		at.Step(adapter.StepVerdict, step)
		return f
	}
	f = d.publish(ctx, at, repo, base)
	at.Step(adapter.StepPush, step)
	d.keepWork(ctx, at, repo, base, f, true)
	return f
}

// VersionFloorWarnings names each engine component older than the release that fixes a container-escape or
// sandbox-egress CVE (security notes §6 C12). It warns rather than refuses: a distribution may have backported the
// fix without changing the upstream version number.
func VersionFloorWarnings(versions map[string]string) []string {
	var out []string
	if v, ok := parseVersion(versions["Engine"]); ok {
		fixed := v[0] >= 26 || v[0] == 25 && !versionLess(v, [3]int{25, 0, 4}) || v[0] == 23 && !versionLess(v, [3]int{23, 0, 11})
		if !fixed {
			out = append(out, fmt.Sprintf("the Docker Engine is %s, older than the releases that fix CVE-2024-29018 (DNS exfiltration from --internal networks: 23.0.11, 25.0.4, 26.0.0); upgrade it, unless your distribution backported the fix", versions["Engine"]))
		}
	}
	if v, ok := parseVersion(versions["runc"]); ok {
		switch {
		case versionLess(v, [3]int{1, 1, 12}):
			out = append(out, fmt.Sprintf("runc is %s, older than 1.1.12, which fixes CVE-2024-21626 (a container process reaching the host filesystem), and than 1.2.8, which fixes CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881; upgrade it, unless your distribution backported the fixes", versions["runc"]))
		case versionLess(v, [3]int{1, 2, 8}) || v[0] == 1 && v[1] == 3 && versionLess(v, [3]int{1, 3, 3}):
			out = append(out, fmt.Sprintf("runc is %s, older than the releases that fix CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (1.2.8, 1.3.3); upgrade it, unless your distribution backported the fixes", versions["runc"]))
		}
	}
	return out
}

// parseVersion reads the leading MAJOR.MINOR.PATCH of a version such as "20.10.24+dfsg1" or "v1.1.5".
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s = strings.TrimPrefix(s, "v")
	for i := 0; i < 3; i++ {
		n, rest := 0, 0
		for rest < len(s) && s[rest] >= '0' && s[rest] <= '9' {
			n = n*10 + int(s[rest]-'0')
			rest++
		}
		if rest == 0 {
			return v, false
		}
		v[i] = n
		s = s[rest:]
		if i < 2 {
			if !strings.HasPrefix(s, ".") {
				return v, i >= 1
			}
			s = s[1:]
		}
	}
	return v, true
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// inhibitIPv4 is the bridge driver option that leaves the host without an address on the network.
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// allowlistNetworkCommand is how to create an allowlist network that is closed on both sides: no route out
// (--internal) and no host address on its bridge.
func allowlistNetworkCommand(name string) string {
	return fmt.Sprintf("docker network create --internal %s -o %s=true", name, inhibitIPv4)
}

// rootImageProblem refuses an image whose configured user is root: kewplan never sets the container's user, so the
// image's USER is who the agent runs as, and the contract requires uid 1001 (the HOME tmpfs is pinned to it).
func rootImageProblem(info *engine.ImageInfo) string {
	user, _, _ := strings.Cut(info.User, ":")
	if user != "" && user != "0" && user != "root" {
		return ""
	}
	shown := fmt.Sprintf("its USER is %q", info.User)
	if info.User == "" {
		shown = "it sets no USER"
	}
	return fmt.Sprintf("image %q would run the agent as root (%s); kewplan runs agents only as a non-root user: end its Dockerfile with `USER %d` (the HOME tmpfs is pinned to uid %d)",
		info.Ref, shown, planner.AgentUID, planner.AgentUID)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// prepareCheckout clones a fresh checkout owned by the container's uid and, for a reviewer, removes any verdict
// sidecar that came with the repository. It returns the repository cloned and the commit it was cloned at.
func (d *dockerEngine) prepareCheckout(ctx context.Context, at *adapter.Attempt) (repo, base string, f *adapter.Failure) {
	np, dir := at.Node, at.Checkout
	repo = np.Repo
	if d.run.Config != nil {
		repo = checkout.ResolveRepo(repo, d.run.Config.Dir)
	}
	ref := np.Ref
	if at.FromSalvage != nil {
		ref = at.FromSalvage.BaseCommit // the kept work descends from the commit it was cloned at, wherever ref is now
	}
	base, err := checkout.Clone(ctx, repo, ref, dir)
	if err == nil && at.FromSalvage != nil {
		var head string
		if head, err = checkout.StartFromBundle(ctx, dir, at.FromSalvage.Bundle, at.FromSalvage.Commit); err == nil {
			at.Warn(fmt.Sprintf("starts from the work kept in run %s (%s): commit %s on top of %s", at.FromSalvage.Run,
				at.FromSalvage.Summary, head[:12], base[:12]))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", "", adapter.Failed(ledger.StatusCancelled, "the apply was cancelled while cloning")
		}
		return "", "", adapter.Failed(ledger.StatusFailed, err.Error())
	}
	at.Result.BaseCommit, at.Result.Repo = base, repo
	if err := checkout.MakeWritableByAgent(dir); err != nil {
		return "", "", adapter.Failed(ledger.StatusFailed, fmt.Sprintf("make the checkout writable by uid %d: %v", planner.AgentUID, err))
	}
	if np.Role == config.RoleReviewer {
		// A sidecar that came with the repository is not this reviewer's verdict: a reviewer that writes nothing
		// must be held, never judged by a file an upstream worker committed.
		removed, err := verdict.RemovePlanted(dir)
		if err != nil {
			return "", "", adapter.Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: the checkout holds a verdict sidecar kewplan cannot remove: %v", err))
		}
		for _, rel := range removed {
			at.Warn(fmt.Sprintf("removed %s that came with the repository before the reviewer started; only the reviewer's own sidecar counts", rel))
		}
	}
	return repo, base, nil
}

// runAgent writes the prompt, runs the node's container with its output streamed, metered and bounded, and
// judges how it ended. The prompt file is deleted on every path out of it, and the container is gone.
func (d *dockerEngine) runAgent(ctx context.Context, at *adapter.Attempt) (f *adapter.Failure) {
	np, res, dir := at.Node, at.Result, at.Checkout
	// The disk watchdog's first reading: a node never starts on a filesystem already short of headroom.
	disk, err := openDiskWatch(dir, d.run.MinFreeBytes)
	if err != nil {
		return adapter.Failed(ledger.StatusFailed, err.Error())
	}
	defer disk.stopWatch()

	// The prompt file, deleted on every path out of this function.
	pf, err := checkout.WritePrompt(dir, []byte(np.Prompt.Text))
	if err != nil {
		return adapter.Failed(ledger.StatusFailed, err.Error())
	}
	d.trackPrompt(pf, true)
	promptGone := false
	defer func() {
		if !promptGone {
			if err := pf.Remove(); err != nil {
				at.Warn("SECURITY: " + err.Error())
				if f != nil {
					res.Status, res.Reason = f.Status, f.Reason
				}
				res.Status = ledger.StatusFailed
				res.Reason = adapter.JoinReason(res.Reason, err.Error())
				f = adapter.Failed(res.Status, res.Reason)
			}
		}
		d.trackPrompt(pf, false)
		pf.Close()
	}()

	// The container, from the same planner.Container the argv shows.
	c := FillContainer(np.Container, d.run.ID, dir)
	env, proxyEnv := d.env, d.egressEnv(np.Name)
	if creds, baseURL := d.brokerEnv(np); creds != nil {
		// Brokered: the container holds placeholders, never a value, and reaches its model API through the
		// proxy's broker.
		env = creds
		merged := maps.Clone(proxyEnv)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, baseURL)
		proxyEnv = merged
	} else if np.Container.BaseURL != "" {
		return adapter.Failed(ledger.StatusFailed, "the node's credentials are brokered, but kewplan's egress proxy has no broker for it (an operator's proxy cannot add credentials); nothing ran")
	}
	spec, err := ApplyProxiedContainerSpec(c, env, proxyEnv, d.run.PID)
	if err != nil {
		return adapter.Failed(ledger.StatusFailed, err.Error())
	}
	res.Argv = AppliedArgv(c, d.run.PID)

	// The stored logs never hold a credential forwarded to the node; the meter reads the raw stream.
	stream, f := at.OpenStream()
	if f != nil {
		return f
	}
	if reason, over := at.BudgetStop(); over {
		stream.Close(true)
		return adapter.Failed(ledger.StatusSkipped, "its container was not started: "+reason)
	}
	out := agentRun{timeout: np.Timeout}
	if out.timeout <= 0 {
		out.timeout = adapter.DefaultTimeout
	}
	var containerID string
	// The stream's output limit kills an agent that floods stdout or stderr (it would fill the host's disk with
	// logs); the disk watchdog kills the same way, for the container's whole life, and so do the node's budget
	// and the apply-wide one.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	// The proxy's watch stops the container should the proxy be lost, and says so on the node when it died.
	live := d.liveProxied(np.Name, stopRun)
	if lost := d.proxyLostReason(); lost != "" && live != nil {
		d.attemptDone(live)
		stream.Close(true)
		return proxyFailure(lost + "; nothing ran")
	}
	stream.Watch(runCtx, stopRun)
	disk.start(stopRun)
	out.run, out.runErr = d.engine.Run(runCtx, spec, engine.RunOptions{
		Stdout:  stream.Stdout(),
		Stderr:  stream.Stderr(),
		Timeout: out.timeout,
		Created: func(id string) { containerID = id; d.track(id, true) },
		Reconnected: func(lostFor time.Duration) {
			at.Warn(fmt.Sprintf("the Docker engine at DOCKER_HOST=%s stopped answering while the agent ran and answered again after %s; kewplan follows the container again",
				d.engine.Host(), lostFor.Round(time.Millisecond)))
		},
	})
	out.diskReason = disk.stopWatch()
	stopRun()
	deaths, lost := d.attemptDone(live)
	for _, death := range deaths {
		at.Warn("the egress proxy died while this attempt ran (" + death + "); network and model calls in flight then failed, and later ones went to the proxy started again")
	}
	out.stream = stream.Close(out.runErr != nil || out.run == nil || out.run.Cancelled)
	if containerID != "" {
		d.track(containerID, false)
	}
	if out.run != nil && out.run.ExitCode >= 0 {
		code := out.run.ExitCode
		res.ExitCode = &code
	}
	if out.run != nil && out.run.OutputLost != "" {
		at.Warn(out.run.OutputLost + "; the node's telemetry may be incomplete")
	}

	// The container is gone: delete the prompt before anything reads the checkout back.
	promptGone = true
	out.promptErr = pf.Remove()
	if out.promptErr != nil {
		at.Warn("SECURITY: " + out.promptErr.Error())
	}
	if lost != "" {
		return proxyFailure(lost + "; kewplan stopped its container")
	}
	f = judgeRun(ctx, at, &out)
	if f != nil {
		f.Class = retryClass(ctx, f, res, &out)
	}
	return f
}

// agentRun is everything known about a container's run once it is gone.
type agentRun struct {
	run        *engine.RunResult
	runErr     error
	promptErr  error
	diskReason string
	stream     adapter.StreamEnd
	timeout    time.Duration
}

// judgeRun says how a finished container run ended for the node: nil when the agent exited 0 with a clean
// stream, or the first reason it did not, in order of precedence.
func judgeRun(ctx context.Context, at *adapter.Attempt, out *agentRun) *adapter.Failure {
	run, st := out.run, out.stream
	switch {
	case run != nil && run.EngineLost != nil:
		// First: nothing else about the container is known, and it may still run.
		return adapter.Failed(ledger.StatusInterrupted, run.EngineLost.Error()+"; its container was left as it was (the next apply stops it and keeps its work)")
	case errors.Is(out.runErr, engine.ErrEngineLost):
		return adapter.Failed(ledger.StatusInterrupted, out.runErr.Error()+"; the container may have been created or started (the next apply stops it)")
	case st.BudgetStop != nil && ctx.Err() == nil:
		// First: the budget's kill can land while the engine still starts the container, failing the start.
		if run != nil && run.CleanupErr != nil {
			at.Warn(run.CleanupErr.Error())
			return adapter.Failed(ledger.StatusFailed, "the container could not be confirmed removed: "+run.CleanupErr.Error())
		}
		return adapter.Failed(ledger.StatusBudgetExceeded, adapter.BudgetReason(st.BudgetStop, st.Killed, "kewplan killed its container"))
	case out.runErr != nil:
		if run != nil && run.CleanupErr != nil {
			at.Warn(run.CleanupErr.Error())
		}
		if ctx.Err() != nil {
			return adapter.Failed(ledger.StatusCancelled, adapter.JoinReason("the apply was cancelled", out.runErr.Error()))
		}
		return adapter.Failed(ledger.StatusFailed, adapter.JoinReason(out.diskReason, out.runErr.Error()))
	case run.CleanupErr != nil:
		at.Warn(run.CleanupErr.Error())
		return adapter.Failed(ledger.StatusFailed, "the container could not be confirmed removed: "+run.CleanupErr.Error())
	case st.OutputOver && ctx.Err() == nil:
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("the agent wrote more than %d MiB on stdout and stderr together; it was killed and the rest of its output discarded", st.MaxOutput>>20))
	case out.diskReason != "" && ctx.Err() == nil:
		return adapter.Failed(ledger.StatusFailed, out.diskReason)
	case run.Cancelled:
		return adapter.Failed(ledger.StatusCancelled, "the apply was cancelled; the container was killed and removed")
	case run.TimedOut:
		return adapter.Failed(ledger.StatusTimedOut, fmt.Sprintf("killed at its %s timeout", out.timeout))
	case out.promptErr != nil:
		return adapter.Failed(ledger.StatusFailed, out.promptErr.Error())
	case run.ExitCode < 0 && run.OutputLost != "":
		return adapter.Failed(ledger.StatusFailed, run.OutputLost+"; how the agent exited is not known either")
	case run.ExitCode != 0:
		return adapter.Failed(ledger.StatusFailed, adapter.ExitReason(at.Node, run.ExitCode, st.StderrTail))
	case run.StreamErr != nil:
		return adapter.Failed(ledger.StatusFailed, run.StreamErr.Error())
	case st.FeedErr != nil:
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("reading the agent's output: %v", st.FeedErr))
	case at.Result.Totals.IsError:
		return adapter.Failed(ledger.StatusFailed, "the agent exited 0 but its stream reported an error")
	}
	return nil
}

// judgeReview reads a reviewer's verdict from its checkout, now that its container is gone, and turns it into
// the node's status. Anything but a readable verdict holds the node for a human.
func judgeReview(at *adapter.Attempt, base string) *adapter.Failure {
	v, err := verdict.Collect(at.Checkout, at.VerdictCopy)
	if err != nil {
		return adapter.Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	at.Result.Verdict = v
	at.Result.Commit = base
	return adapter.VerdictStatus(v, at.Result)
}

// publish hands a worker's commits to the host broker, which pushes them (and opens the pull request asked for)
// without running anything from the checkout.
func (d *dockerEngine) publish(ctx context.Context, at *adapter.Attempt, repo, base string) *adapter.Failure {
	np, res := at.Node, at.Result
	req := broker.Request{Checkout: at.Checkout, Repo: repo, BaseCommit: base, Branch: np.Branch,
		StateDir: d.run.Dir.Broker(), Environ: d.run.Environ,
		ProtectedBranches: np.ProtectedBranches, AllowProtectedPush: np.AllowProtectedPush}
	if at.PushIntent != nil {
		req.BeforePush = func(commit string) error { return at.PushIntent(repo, np.Branch, commit) }
	}
	if np.PullRequest != nil {
		req.PullRequest = &broker.PullRequest{Base: np.PullRequest.Base, Title: np.PullRequest.Title}
	}
	push, err := broker.Push(ctx, req)
	var planted *broker.PlantedFileError
	if errors.As(err, &planted) {
		return adapter.Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", planted))
	}
	var protected *broker.ProtectedBranchError
	if errors.As(err, &protected) {
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("the agent succeeded but its push was refused: %v", protected))
	}
	if err != nil {
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("the agent succeeded but its commits were not published: %v", err))
	}
	res.Commit, res.Branch, res.Pushed, res.PullRequest = push.Commit, push.Branch, push.Pushed, push.PullRequest
	if res.Commit == "" {
		res.Commit = base
	}
	if push.PullRequestSkipped != "" {
		at.Warn("no pull request: " + push.PullRequestSkipped)
	}
	res.Status = ledger.StatusSucceeded
	return nil
}

// retryClass says which retry class a failed attempt belongs to, or "" when no retry block may retry it.
func retryClass(ctx context.Context, f *adapter.Failure, res *ledger.NodeResult, out *agentRun) string {
	if ctx.Err() != nil || out.diskReason != "" || out.promptErr != nil || out.stream.OutputOver {
		return ""
	}
	run := out.run
	if run != nil && run.CleanupErr != nil {
		return "" // a container may be left with this name: another attempt would collide with it
	}
	var start *engine.StartError
	switch {
	case out.runErr != nil && errors.As(out.runErr, &start) && f.Status == ledger.StatusFailed:
		return config.RetryOnEngineError
	case out.runErr != nil || run == nil || run.Cancelled:
		return ""
	case run.TimedOut && f.Status == ledger.StatusTimedOut:
		return config.RetryOnTimeout
	case f.Status == ledger.StatusFailed && res.Totals.APIError != "":
		return config.RetryOnAPIError
	}
	return ""
}

// ImageID returns the id of a local image, inspecting images first seen after preflight (a re-plan may name one).
func (d *dockerEngine) ImageID(ctx context.Context, ref string) (string, error) {
	d.mu.Lock()
	id, ok := d.imageIDs[ref]
	d.mu.Unlock()
	if ok {
		return id, nil
	}
	info, err := d.engine.InspectImage(ctx, ref)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.imageIDs[ref] = info.ID
	d.mu.Unlock()
	return info.ID, nil
}

// Sweep removes what an apply that died left behind: its containers (found by kewplan's labels and owned by this
// state directory: a run recorded in this ledger, or a bind mount under this state directory's checkouts), its
// prompt files and checkouts. Holding the state lock proves that apply is dead, whatever the pid label says; the
// pid is reported so a user can match it to a process list.
func (d *dockerEngine) Sweep(ctx context.Context, run *adapter.Run) {
	d.run = run
	a := run // the sweep reports through the run
	checkouts := run.Dir.Checkouts()
	list, err := d.orphans(ctx)
	if err != nil {
		a.Warn("", fmt.Sprintf("could not look for orphaned containers: %v", err))
	}
	for _, c := range list {
		run := c.Labels[planner.LabelRun]
		if err := d.engine.ForceRemove(c.ID); err != nil {
			a.Warn("", fmt.Sprintf("could not remove container %s left by run %s: %v", c.Name, run, err))
			continue
		}
		a.Warn("", fmt.Sprintf("removed container %s left by run %s (kewplan pid %s)", c.Name, run, c.Labels[LabelPID]))
	}
	// The broker state of a dead apply's proxy: no proxy of this state directory runs now.
	states, _ := filepath.Glob(run.Dir.ProxyStates())
	for _, dir := range states {
		if err := os.RemoveAll(dir); err != nil {
			a.Warn("", fmt.Sprintf("could not remove the egress proxy's broker state %s left by a dead apply: %v", dir, err))
		}
	}
	runs, err := os.ReadDir(checkouts)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		a.Warn("", fmt.Sprintf("could not look for stale checkouts: %v", err))
	}
	for _, r := range runs {
		if !r.IsDir() {
			continue
		}
		runDir := filepath.Join(checkouts, r.Name())
		nodes, _ := os.ReadDir(runDir)
		for _, n := range nodes {
			found, err := checkout.RemoveStalePrompt(filepath.Join(runDir, n.Name()))
			if err != nil {
				a.Warn("", fmt.Sprintf("SECURITY: could not delete the prompt file left in %s: %v", filepath.Join(runDir, n.Name()), err))
				continue
			}
			if found {
				a.Warn("", fmt.Sprintf("deleted a prompt file left by run %s in the checkout of node %s", r.Name(), n.Name()))
			}
		}
		if err := os.RemoveAll(runDir); err != nil {
			a.Warn("", fmt.Sprintf("could not remove stale checkouts %s: %v", runDir, err))
		}
	}
}
