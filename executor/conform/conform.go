package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// The rows of the contract's implementer checklist, in the order conform reports them.
const (
	RowImage = iota + 1
	RowHardening
	RowPromptMissing
	RowHandoff
	RowStdout
	RowSidecar
	RowCredentials
)

var rowTitles = map[int]string{
	RowImage:         "Image configuration: non-root uid 1001, no credentials, workdir /work, an entrypoint",
	RowHardening:     "Starts and runs under --read-only, --cap-drop ALL, no-new-privileges, --pids-limit, tmpfs /tmp and HOME",
	RowPromptMissing: "A missing or empty prompt file stops it with a message on stderr, before the agent starts",
	RowHandoff:       `Prompt on stdin, "$@" forwarded unmodified, no host-owned flag, git bootstrapped in the fresh HOME`,
	RowStdout:        "Stdout is one JSON object per line in the runner's vocabulary",
	RowSidecar:       "A file written at the mount root survives untouched (the reviewer sidecar)",
	RowCredentials:   "Only the runner's declared credential names reach the agent",
}

// Report is the result of Conform: one row per checklist item.
type Report struct {
	Image    string  `json:"image"`
	ImageID  string  `json:"image_id"`
	Runner   string  `json:"runner"`
	Protocol string  `json:"protocol"`
	Agent    string  `json:"agent"` // the agent binary the probe stood in for
	Rows     []Check `json:"rows"`
	// Passed is true when no row failed; NOT VERIFIABLE rows do not fail the image, but they are not passes.
	Passed bool `json:"passed"`
}

// Options tune Conform beyond what it shares with Smoke.
type Options struct {
	ProbeOptions
	// Agent overrides the agent binary name the probe takes (by default the runner's: claude, opencode, pi,
	// hermes).
	Agent string
}

// decoyCredential is set on kewplan's side of every conform run and declared by no runner: if it reaches the
// container, something forwards more than the runner's names.
const decoyCredential = "KEWPLAN_CONFORM_DECOY_TOKEN"

// wellKnownForeignCredentials are names no runner declares that an image must never receive either.
var wellKnownForeignCredentials = []string{"GITHUB_TOKEN", "GH_TOKEN"}

// hostOwnedFlags are flags that belong to the host in every runner: whatever a runner's container args carry,
// plus these.
var hostOwnedFlags = []string{"--model", "-m", "--output-format", "--format", "--permission-mode",
	"--dangerously-skip-permissions", "--provider", "--mode", "--yolo", "--auto"}

// conformRun is one container run of conform: a scratch checkout with the probe installed.
type conformRun struct {
	label        string // how the evidence names this run
	user         string // the user it was started as; "" is the image's
	hardened     bool
	res          *engine.CaptureResult
	err          error // the container could not be created or started
	probe        *probeRecord
	sidecar      []byte // the reviewer sidecar after exit; nil when absent
	sidecarFound bool
}

func (r *conformRun) ok() bool {
	return r.err == nil && r.res != nil && !r.res.TimedOut && r.res.ExitCode == 0
}

func (r *conformRun) reached() bool { return r.probe != nil && r.probe.Reached }

// conformer holds what every run of one Conform call shares.
type conformer struct {
	eng      *engine.Engine
	o        *Options
	runner   runners.Runner
	shape    agentShape
	args     []string
	watch    []string          // names the probe reports
	env      map[string]string // kewplan's side of the environment: dummy values only
	basePath string            // the image's PATH
	nonce    string
	prompt   []byte
	verdict  string
	redact   []string // values that must never appear in evidence
}

// Conform runs the contract's implementer checklist against an image and returns one row per item. The agent is
// intercepted by a probe placed first on PATH inside the mount; it receives dummy credentials only, never
// kewplan's own environment. An error means the checks could not be made at all (no engine, no image, a bad
// option).
func Run(ctx context.Context, eng *engine.Engine, co Options) (*Report, error) {
	o := &co
	runner, err := o.defaults()
	if err != nil {
		return nil, err
	}
	shape, ok := agentShapes[runner.Protocol()]
	if !ok {
		return nil, fmt.Errorf("runner %s speaks %q, a vocabulary conform has no probe for", runner.Name(), runner.Protocol())
	}
	if o.Agent != "" {
		if strings.ContainsAny(o.Agent, "/\x00") || o.Agent == "." || o.Agent == ".." {
			return nil, fmt.Errorf("agent binary name %q must be a plain file name, such as claude", o.Agent)
		}
		shape.Binary = o.Agent
	}
	o.progress("inspecting %s", o.Image)
	info, err := eng.InspectImage(ctx, o.Image)
	if err != nil {
		return nil, err
	}
	if err := eng.CheckRuntime(ctx, o.Runtime); err != nil {
		return nil, err
	}
	c := &conformer{eng: eng, o: o, runner: runner, shape: shape, args: runner.ContainerArgs(o.Model), nonce: nonce()}
	c.prompt = []byte("kewplan conform " + c.nonce + "\nThe prompt travels on stdin; it never rides in argv.\n")
	c.verdict = `{"kewplan_conform":"` + c.nonce + `","verdict":"approve"}`
	c.basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range info.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			c.basePath = v
		}
		if name, v, _ := strings.Cut(kv, "="); credentialLike(name) && v != "" {
			c.redact = append(c.redact, v)
		}
	}
	// kewplan's side of the environment: a dummy for each of the runner's names and for every name it must not
	// forward. The operator's real credentials never go near the image under test.
	c.env = map[string]string{}
	watch := map[string]bool{decoyCredential: true}
	for _, n := range runner.RequiredCredentials() {
		watch[n] = true
	}
	for _, name := range runners.BuiltinNames() {
		if r, ok := runners.Builtin(name); ok {
			for _, n := range r.RequiredCredentials() {
				watch[n] = true
			}
		}
	}
	for _, n := range wellKnownForeignCredentials {
		watch[n] = true
	}
	for n := range watch {
		c.watch = append(c.watch, n)
		c.env[n] = "kewplan-conform-dummy-" + c.nonce[:8]
	}
	sort.Strings(c.watch)
	c.redact = append(c.redact, "kewplan-conform-dummy-"+c.nonce[:8])

	rep := &Report{Image: o.Image, ImageID: info.ID, Runner: runner.Name(), Protocol: runner.Protocol(), Agent: shape.Binary}

	o.progress("reading the image's layers")
	row1, imageUID, err := c.imageRow(ctx, info)
	if err != nil {
		return nil, err
	}

	o.progress("running the image under apply's hardening")
	h := c.run(ctx, "the hardened run", runPrompt, "", true)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	row2, evidenceRun := c.hardeningRow(ctx, h, imageUID)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	o.progress("running it with no prompt file, then with an empty one")
	missing := c.run(ctx, "the run with no prompt file", runNoPrompt, "", true)
	empty := c.run(ctx, "the run with an empty prompt file", runEmptyPrompt, "", true)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	interceptable := evidenceRun.reached()
	var override *conformRun
	if interceptable {
		o.progress("running it with KEW_PROMPT_FILE naming another prompt file")
		override = c.run(ctx, "the run with KEW_PROMPT_FILE set", runOverridePrompt, evidenceRun.user, evidenceRun.hardened)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	row3 := c.promptRow(missing, empty, interceptable)
	row4 := c.handoffRow(evidenceRun, override)
	row5 := c.stdoutRow(evidenceRun)
	row6 := c.sidecarRow(evidenceRun)
	row7 := c.credentialsRow(evidenceRun)
	rep.Rows = []Check{row1, row2, row3, row4, row5, row6, row7}
	rep.Passed = true
	for i := range rep.Rows {
		rep.Rows[i].Evidence = c.redactAll(rep.Rows[i].Evidence)
		if rep.Rows[i].Status == Fail {
			rep.Passed = false
		}
	}
	return rep, nil
}

// hardeningRow is row 2, from the hardened run h. When h failed it runs the image again to find the cause: as uid
// 1001 under the same hardening (when the image's own user is another), then without the hardening. It returns
// the run the later rows take their evidence from: the first that reached the agent.
func (c *conformer) hardeningRow(ctx context.Context, h *conformRun, imageUID string) (Check, *conformRun) {
	evidenceRun := h
	row2 := Check{ID: RowHardening, Title: rowTitles[RowHardening]}
	o := c.o
	hardening := fmt.Sprintf("--read-only, --cap-drop ALL, --security-opt no-new-privileges, --pids-limit %d, --tmpfs %s and --tmpfs %s:%s",
		o.PidsLimit, planner.ScratchTmpfs, planner.AgentHomeTmpfs, planner.AgentHomeTmpfsOpt)
	switch {
	case h.ok():
		row2.Status = Pass
		row2.Evidence = []string{fmt.Sprintf("It ran to completion (exit 0) under %s.", hardening)}
		if !h.reached() {
			row2.Evidence = append(row2.Evidence, "The probe was not reached, so this is the exit status of whatever the entrypoint ran instead.")
		}
	default:
		failure := h.failure()
		var hu *conformRun
		if imageUID != strconv.Itoa(planner.AgentUID) {
			o.progress("running it again as uid %d", planner.AgentUID)
			hu = c.run(ctx, fmt.Sprintf("the hardened run as uid %d", planner.AgentUID), runPrompt, agentUser, true)
		}
		switch {
		case hu != nil && hu.ok():
			evidenceRun = hu
			row2.Status = Pass
			row2.Evidence = []string{
				fmt.Sprintf("As the image's own user it failed: %s", failure),
				fmt.Sprintf("Started as uid %d, the uid the HOME tmpfs is pinned to, it ran to completion under the same hardening (%s), so the failure is the image's user (row 1), not the hardening.", planner.AgentUID, hardening),
			}
		default:
			o.progress("running it again without the hardening, to tell the causes apart")
			r := c.run(ctx, fmt.Sprintf("the run without the hardening, as uid %d", planner.AgentUID), runPrompt, agentUser, false)
			switch {
			case r.ok() && r.reached():
				evidenceRun = r
				row2.Status = Fail
				row2.Evidence = []string{
					fmt.Sprintf("Under %s it failed: %s", hardening, failure),
					fmt.Sprintf("Without --read-only, --cap-drop, no-new-privileges and --pids-limit (still as uid %d) it reached the agent and exited 0, so the image needs something the hardening forbids, most often writing outside /work, /tmp and $HOME.", planner.AgentUID),
				}
			default:
				row2.Status = NotVerifiable
				row2.Evidence = []string{
					fmt.Sprintf("Under the hardening it failed: %s", failure),
					fmt.Sprintf("It also failed without the hardening (%s), so kewplan cannot tell a hardening failure from a broken entrypoint or an agent that could not start.", r.failure()),
				}
				if r.reached() {
					evidenceRun = r
				}
			}
		}
	}
	return row2, evidenceRun
}

// agentUser is the user a diagnostic run is started as, to take the image's own user out of the picture.
var agentUser = strconv.Itoa(planner.AgentUID) + ":" + strconv.Itoa(planner.AgentUID)

type promptMode int

const (
	runPrompt promptMode = iota
	runNoPrompt
	runEmptyPrompt
	runOverridePrompt // no default prompt file; KEW_PROMPT_FILE names another one
)

// overridePromptMount is where the KEW_PROMPT_FILE run puts its prompt (inside the probe's directory, so it is
// never mistaken for the default file).
const overridePromptMount = probeMountDir + "/in/prompt.txt"

// run runs the image once in a fresh scratch checkout with the probe installed. hardened=false drops
// --read-only, --cap-drop, no-new-privileges and --pids-limit (a diagnostic run only); user, when set, overrides
// the image's user.
func (c *conformer) run(ctx context.Context, label string, mode promptMode, user string, hardened bool) *conformRun {
	r := &conformRun{label: label, user: user, hardened: hardened}
	checkout, cleanup, err := scratchCheckout("conform")
	if err != nil {
		r.err = err
		return r
	}
	defer cleanup()
	script, err := probeScript(c.runner.Protocol(), c.nonce, c.watch, c.verdict)
	if err == nil {
		err = installProbe(checkout, c.shape.Binary, script)
	}
	switch {
	case err != nil:
	case mode == runPrompt:
		err = os.WriteFile(filepath.Join(checkout, planner.PromptFilename), c.prompt, 0o644)
	case mode == runEmptyPrompt:
		err = os.WriteFile(filepath.Join(checkout, planner.PromptFilename), nil, 0o644)
	case mode == runOverridePrompt:
		in := filepath.Join(checkout, probeDir, "in")
		if err = os.MkdirAll(in, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(in, "prompt.txt"), c.overridePrompt(), 0o644)
		}
	}
	if err != nil {
		r.err = err
		return r
	}
	ct := probeContainer(&c.o.ProbeOptions, "conform", checkout, c.args, c.runner.RequiredCredentials())
	spec, err := engine.ContainerConfig(ct, c.env)
	if err != nil {
		r.err = err
		return r
	}
	spec.Config.Env = append(spec.Config.Env, "PATH="+probeBinMount+":"+c.basePath)
	if mode == runOverridePrompt {
		spec.Config.Env = append(spec.Config.Env, "KEW_PROMPT_FILE="+overridePromptMount)
	}
	if user != "" {
		// The image's passwd may not know the uid (that is often why this run is needed), and then the engine
		// would leave HOME at "/": point it at the HOME tmpfs the uid is pinned to, as the agent user's would be.
		spec.Config.User = user
		spec.Config.Env = append(spec.Config.Env, "HOME="+planner.AgentHomeTmpfs)
	}
	if !hardened {
		spec.HostConfig.ReadonlyRootfs = false
		spec.HostConfig.CapDrop = nil
		spec.HostConfig.SecurityOpt = nil
		spec.HostConfig.PidsLimit = nil
	}
	r.res, r.err = c.eng.RunCapture(ctx, spec, c.o.Timeout, captureLimit)
	if r.probe, err = readProbe(checkout); err != nil && r.err == nil {
		r.err = err
	}
	if b, err := os.ReadFile(filepath.Join(checkout, planner.VerdictFilename)); err == nil {
		r.sidecar, r.sidecarFound = b, true
	}
	return r
}

// failure says in one sentence how a run went wrong.
func (c *conformRun) failure() string {
	switch {
	case c.err != nil:
		return "the container did not start: " + c.err.Error() + "."
	case c.res.TimedOut:
		return "it did not finish in time and was killed."
	default:
		s := fmt.Sprintf("it exited %d", c.res.ExitCode)
		if !c.reached() {
			s += " before reaching the agent"
		}
		return s + "." + stderrTail(c.res.Stderr, "kew-probe: ")
	}
}

func (c *conformer) redactAll(evidence []string) []string {
	for i, e := range evidence {
		for _, v := range c.redact {
			if len(v) >= 4 {
				e = strings.ReplaceAll(e, v, "[redacted]")
			}
		}
		evidence[i] = e
	}
	return evidence
}

// imageRow is row 1, from the image's configuration, history and layers. It also returns the uid the image runs
// as ("" when unknown).
func (c *conformer) imageRow(ctx context.Context, info *engine.ImageInfo) (Check, string, error) {
	row := Check{ID: RowImage, Title: rowTitles[RowImage]}
	var fails, notes []string

	scan, err := scanImage(ctx, c.eng, c.o.Image)
	if err != nil {
		return row, "", err
	}
	history, err := c.eng.ImageHistory(ctx, c.o.Image)
	if err != nil {
		return row, "", err
	}

	// The user: non-root, and uid 1001 exactly, the uid the HOME tmpfs is pinned to.
	uid := ""
	user, _, _ := strings.Cut(info.User, ":")
	switch {
	case user == "" || user == "root" || user == "0":
		uid = "0"
		fails = append(fails, fmt.Sprintf("It runs as root (USER is %q). Add a non-root user with uid %d and end the Dockerfile with USER agent: the HOME tmpfs is pinned to uid %d, and claude refuses --dangerously-skip-permissions as root.", info.User, planner.AgentUID, planner.AgentUID))
	case isDigits(user):
		uid = user
	default:
		if !scan.PasswdFound {
			fails = append(fails, fmt.Sprintf("It runs as user %q, but the image has no /etc/passwd to resolve that name to a uid. Use USER %d.", user, planner.AgentUID))
		} else if u, ok := passwdUID(scan.Passwd, user); ok {
			uid = u
		} else {
			fails = append(fails, fmt.Sprintf("It runs as user %q, which /etc/passwd in the image does not define, so the container cannot start.", user))
		}
	}
	switch {
	case uid == "" || uid == "0":
	case uid != strconv.Itoa(planner.AgentUID):
		fails = append(fails, fmt.Sprintf("It runs as uid %s, not %d: the HOME tmpfs is mounted with uid=%d and mode 0700, so HOME is unwritable and the git bootstrap fails. Give the agent user uid %d.", uid, planner.AgentUID, planner.AgentUID, planner.AgentUID))
	default:
		notes = append(notes, fmt.Sprintf("It runs as %s, uid %d.", userPhrase(info.User), planner.AgentUID))
	}

	// Credentials: in the environment, in the history (build args and ENV lines), and as files in any layer.
	var envCreds []string
	for _, kv := range info.Env {
		if name, v, _ := strings.Cut(kv, "="); credentialLike(name) && v != "" {
			envCreds = append(envCreds, name)
		}
	}
	if len(envCreds) > 0 {
		fails = append(fails, fmt.Sprintf("Its configuration sets %s (value not shown). Credentials are forwarded by name at run time; remove the ENV line, and rotate the credential if it was real: it ships with every copy of the image.", strings.Join(envCreds, ", ")))
	}
	if baked := bakedHistoryCredentials(history); len(baked) > 0 {
		fails = append(fails, fmt.Sprintf("Its build history assigns %s, value not shown: build arguments and ENV values are recorded in the image. Pass secrets at run time instead.", strings.Join(baked, ", ")))
	}
	if len(scan.CredentialFiles) > 0 {
		fails = append(fails, fmt.Sprintf("Its layers hold credential files: %s. A file deleted by a later layer still ships in the earlier one; never COPY or create login state in a build.", strings.Join(scan.CredentialFiles, "; ")))
	}
	if len(envCreds) == 0 && len(scan.CredentialFiles) == 0 && len(bakedHistoryCredentials(history)) == 0 {
		notes = append(notes, fmt.Sprintf("No credential-like variable in its configuration or history, and no credential file in any of its %d layers.", scan.Layers))
	}

	if info.WorkingDir != planner.WorkDir {
		fails = append(fails, fmt.Sprintf("Its working directory is %q; set WORKDIR /work.", info.WorkingDir))
	} else {
		notes = append(notes, "WORKDIR is /work.")
	}
	if len(info.Entrypoint) == 0 {
		fails = append(fails, "It has no ENTRYPOINT: the host's container args would replace its CMD instead of reaching an entrypoint as \"$@\". Set ENTRYPOINT [\"/usr/local/bin/kew-agent-entrypoint\"] (exec form).")
	} else {
		notes = append(notes, fmt.Sprintf("ENTRYPOINT is %s.", jsonWords(info.Entrypoint)))
	}
	if len(fails) > 0 {
		row.Status, row.Evidence = Fail, fails
	} else {
		row.Status, row.Evidence = Pass, notes
	}
	return row, uid, nil
}

func userPhrase(u string) string {
	if u == "" {
		return "root"
	}
	return fmt.Sprintf("USER %q", u)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func jsonWords(w []string) string {
	b, _ := json.Marshal(w)
	return string(b)
}

// promptRow is row 3, from the runs with no prompt file and with an empty one.
func (c *conformer) promptRow(missing, empty *conformRun, interceptable bool) Check {
	row := Check{ID: RowPromptMissing, Title: rowTitles[RowPromptMissing]}
	var fails, passes, unknown []string
	for _, r := range []*conformRun{missing, empty} {
		what := "With no prompt file"
		if r == empty {
			what = "With an empty prompt file"
		}
		switch {
		case r.err != nil:
			unknown = append(unknown, fmt.Sprintf("%s the container did not start: %v.", what, r.err))
		case r.res.TimedOut:
			fails = append(fails, fmt.Sprintf("%s it did not stop: it was killed after %s.", what, c.o.Timeout))
		case r.reached():
			fails = append(fails, fmt.Sprintf("%s it started the agent anyway (the probe ran with %d bytes of stdin, exit %d). Check that the file exists and is non-empty, and exit 64 with a message on stderr, before starting the agent.", what, len(r.probe.Stdin), r.res.ExitCode))
		case r.res.ExitCode == 0:
			fails = append(fails, fmt.Sprintf("%s it exited 0. It must exit non-zero (the reference uses 64) so the host sees the failure.", what))
		case len(bytes.TrimSpace(r.res.Stderr)) == 0:
			fails = append(fails, fmt.Sprintf("%s it exited %d without a message on stderr; say what is missing.", what, r.res.ExitCode))
		case !interceptable:
			unknown = append(unknown, fmt.Sprintf("%s it exited %d with a message on stderr, %s; but the probe cannot intercept this image's agent (row 4), so whether the agent started is not known.", what, r.res.ExitCode, quoteExcerpt(lastLine(r.res.Stderr), 240)))
		default:
			passes = append(passes, fmt.Sprintf("%s it exited %d without starting the agent, saying %s on stderr.", what, r.res.ExitCode, quoteExcerpt(lastLine(r.res.Stderr), 240)))
		}
	}
	switch {
	case len(fails) > 0:
		row.Status, row.Evidence = Fail, append(fails, passes...)
	case len(unknown) > 0:
		row.Status, row.Evidence = NotVerifiable, append(unknown, passes...)
	default:
		row.Status, row.Evidence = Pass, passes
	}
	return row
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return lines[len(lines)-1]
}

// notReached explains a probe that never ran.
func (c *conformer) notReached(r *conformRun) string {
	return fmt.Sprintf("The probe placed first on PATH as %s/%s was never run in %s: the entrypoint runs the agent by an absolute path, resets PATH, or stopped before the agent. What the agent receives cannot be observed, so this row cannot pass; call the agent by name (exec %s ...).",
		probeBinMount, c.shape.Binary, r.label, c.shape.Binary)
}

// fromRun notes which run the evidence comes from when it is not the plain hardened one.
func fromRun(r *conformRun) string {
	if r.label == "the hardened run" {
		return ""
	}
	return " (observed in " + r.label + ")"
}

// overridePrompt is the prompt of the KEW_PROMPT_FILE run: different from the default one, so that stdin shows
// which file the entrypoint read.
func (c *conformer) overridePrompt() []byte {
	return append(append([]byte{}, c.prompt...), "Read from KEW_PROMPT_FILE.\n"...)
}

// handoffRow is row 4: stdin, argv and the git bootstrap, as the probe saw them; override is the run with
// KEW_PROMPT_FILE set (nil when the probe cannot intercept the agent).
func (c *conformer) handoffRow(r, override *conformRun) Check {
	row := Check{ID: RowHandoff, Title: rowTitles[RowHandoff]}
	if !r.reached() {
		row.Status, row.Evidence = NotVerifiable, []string{c.notReached(r)}
		return row
	}
	p := r.probe
	var fails, notes []string
	for i, w := range p.Argv {
		if strings.Contains(w, c.nonce) {
			fails = append(fails, fmt.Sprintf("The prompt is passed in argv (word %d of the agent's argv): it must travel on stdin only, where it has no length limit and is not visible in ps.", i+1))
			break
		}
	}
	switch {
	case bytes.Equal(p.Stdin, c.prompt):
		notes = append(notes, fmt.Sprintf("The agent's stdin carried the %d-byte prompt exactly%s.", len(c.prompt), fromRun(r)))
	case len(p.Stdin) == 0:
		fails = append(fails, "The agent's stdin was empty: feed the prompt file on stdin (exec AGENT \"$@\" <\"$PROMPT_FILE\").")
	default:
		fails = append(fails, fmt.Sprintf("The agent's stdin carried %d bytes that are not the %d-byte prompt file.", len(p.Stdin), len(c.prompt)))
	}
	at := indexSeq(p.Argv, c.args)
	if at < 0 {
		fails = append(fails, fmt.Sprintf("The container args did not reach the agent unmodified: sent %s, the agent received %s. Forward \"$@\" as is.", jsonWords(c.args), jsonWords(p.Argv)))
	} else {
		extra := append(append([]string{}, p.Argv[:at]...), p.Argv[at+len(c.args):]...)
		owned := c.hostOwned()
		var hard []string
		for _, w := range extra {
			flag, _, _ := strings.Cut(w, "=")
			if owned[flag] {
				hard = append(hard, w)
			}
		}
		switch {
		case len(hard) > 0:
			fails = append(fails, fmt.Sprintf("The entrypoint hardcodes %s, which the host owns (the routed model, the output format and the permission mode travel in \"$@\"): the agent received %s.", strings.Join(hard, " "), jsonWords(p.Argv)))
		case len(extra) == 0:
			notes = append(notes, fmt.Sprintf("The agent received exactly the %d container args.", len(c.args)))
		default:
			notes = append(notes, fmt.Sprintf("The agent received the %d container args unmodified, after the image's own %s.", len(c.args), jsonWords(extra)))
		}
	}
	if override != nil {
		switch want := c.overridePrompt(); {
		case override.reached() && bytes.Equal(override.probe.Stdin, want):
			notes = append(notes, fmt.Sprintf("With KEW_PROMPT_FILE=%s and no default prompt file, the agent's stdin carried that file.", overridePromptMount))
		case override.reached():
			fails = append(fails, fmt.Sprintf("With KEW_PROMPT_FILE=%s, the agent's stdin carried %d bytes that are not that file: honour KEW_PROMPT_FILE (PROMPT_FILE=\"${KEW_PROMPT_FILE:-/work/.kew-prompt.txt}\").", overridePromptMount, len(override.probe.Stdin)))
		default:
			fails = append(fails, fmt.Sprintf("With KEW_PROMPT_FILE=%s and no default prompt file, %s Honour KEW_PROMPT_FILE (PROMPT_FILE=\"${KEW_PROMPT_FILE:-/work/.kew-prompt.txt}\").", overridePromptMount, override.failure()))
		}
	}
	switch {
	case p.GitMissing:
		fails = append(fails, "git is not installed in the image: agents commit their work, and the entrypoint's git bootstrap needs it.")
	default:
		var gitFails []string
		if !slices.Contains(p.SafeDirectory, planner.WorkDir) && !slices.Contains(p.SafeDirectory, "*") {
			gitFails = append(gitFails, "safe.directory does not include /work")
		}
		if p.GitUserName == "" || p.GitUserEmail == "" {
			gitFails = append(gitFails, "no user.name and user.email are set")
		}
		if len(gitFails) > 0 {
			fails = append(fails, fmt.Sprintf("The git bootstrap is missing in the fresh HOME (%s): %s. Run git config --global --add safe.directory /work and set a container-local identity in the entrypoint, before exec.", p.Home, strings.Join(gitFails, "; ")))
		} else {
			ev := fmt.Sprintf("git is bootstrapped in the fresh HOME %s: safe.directory /work, identity %q <%s>", p.Home, p.GitUserName, p.GitUserEmail)
			if p.GitRepoOK {
				ev += ", and git accepts the bind-mounted checkout"
			}
			notes = append(notes, ev+".")
		}
		if !p.GitRepoOK && p.GitRepoError != "" && len(gitFails) == 0 {
			fails = append(fails, fmt.Sprintf("git refuses the bind-mounted checkout: %s.", quoteExcerpt(p.GitRepoError, 200)))
		}
	}
	if len(fails) > 0 {
		row.Status, row.Evidence = Fail, fails
	} else {
		row.Status, row.Evidence = Pass, notes
	}
	return row
}

func (c *conformer) hostOwned() map[string]bool {
	owned := map[string]bool{}
	for _, f := range hostOwnedFlags {
		owned[f] = true
	}
	for _, a := range c.args {
		if strings.HasPrefix(a, "-") {
			f, _, _ := strings.Cut(a, "=")
			owned[f] = true
		}
	}
	return owned
}

// indexSeq returns where seq starts as a contiguous run inside s, or -1.
func indexSeq(s, seq []string) int {
	if len(seq) == 0 {
		return 0
	}
	for i := 0; i+len(seq) <= len(s); i++ {
		if slices.Equal(s[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}

// stdoutRow is row 5: every stdout line is a JSON object, and the lines speak the runner's vocabulary.
func (c *conformer) stdoutRow(r *conformRun) Check {
	row := Check{ID: RowStdout, Title: rowTitles[RowStdout]}
	if r.err != nil || r.res == nil {
		row.Status, row.Evidence = NotVerifiable, []string{"The container did not run: " + errString(r.err) + "."}
		return row
	}
	out := r.res.Stdout
	if len(bytes.TrimSpace(out)) == 0 {
		if r.reached() {
			row.Status, row.Evidence = Fail, []string{"Nothing reached stdout although the agent printed its NDJSON run: the entrypoint swallows or redirects the agent's stdout."}
		} else {
			row.Status, row.Evidence = NotVerifiable, []string{"Nothing was printed on stdout, and the probe was not reached to print anything."}
		}
		return row
	}
	known := map[string]bool{}
	for _, t := range c.shape.Events {
		known[t] = true
	}
	meter := c.runner.NewMeter(c.o.Model)
	var bad []string
	lines, typed, unknownTypes := 0, 0, map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		lines++
		meter.Line([]byte(line))
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil || !strings.HasPrefix(strings.TrimSpace(line), "{") {
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("line %d %s", i+1, quoteExcerpt(line, 80)))
			}
			continue
		}
		var t string
		if json.Unmarshal(obj["type"], &t) == nil && known[t] {
			typed++
		} else {
			unknownTypes[string(obj["type"])] = true
		}
	}
	totals := meter.Totals()
	switch {
	case len(bad) > 0:
		row.Status = Fail
		row.Evidence = []string{fmt.Sprintf("%d of %d stdout lines are not a JSON object, first %s. Print diagnostics on stderr: a prose line on stdout blinds the host's cost accounting.", totals.UnparsedLines, lines, strings.Join(bad, ", "))}
	case typed == 0:
		row.Status = Fail
		row.Evidence = []string{fmt.Sprintf("All %d stdout lines are JSON, but none is an event of the %s vocabulary (types seen: %s): the image speaks another runner's language, and the host would meter nothing.", lines, c.runner.Protocol(), strings.Join(sortedTypeNames(unknownTypes), ", "))}
	default:
		row.Status = Pass
		ev := fmt.Sprintf("All %d stdout lines are JSON objects, %d of them %s events%s.", lines, typed, c.runner.Protocol(), fromRun(r))
		if totals.Finished {
			ev += " The run's terminal event arrived."
		}
		row.Evidence = []string{ev}
		if !r.reached() {
			row.Evidence = append(row.Evidence, "The probe was not reached; this is what the image's own agent printed.")
		}
	}
	return row
}

func sortedTypeNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k == "" {
			k = "(none)"
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sidecarRow is row 6: what the probe wrote at /work/.kew-review-verdict.json is there, unchanged, after exit.
func (c *conformer) sidecarRow(r *conformRun) Check {
	row := Check{ID: RowSidecar, Title: rowTitles[RowSidecar]}
	switch {
	case !r.reached():
		row.Status, row.Evidence = NotVerifiable, []string{c.notReached(r)}
	case !r.probe.VerdictWritten:
		row.Status, row.Evidence = Fail, []string{fmt.Sprintf("The agent could not create %s: %s. The agent's uid must be able to write the mount root.", planner.VerdictMountPath, quoteExcerpt(r.probe.VerdictError, 200))}
	case !r.sidecarFound:
		row.Status, row.Evidence = Fail, []string{fmt.Sprintf("The agent wrote %s, and it was gone after the container exited: the image must not move or delete the reviewer sidecar.", planner.VerdictMountPath)}
	case string(r.sidecar) != c.verdict:
		row.Status, row.Evidence = Fail, []string{fmt.Sprintf("The agent wrote %d bytes to %s, and %d different bytes were there after exit: the image must not rewrite the reviewer sidecar.", len(c.verdict), planner.VerdictMountPath, len(r.sidecar))}
	default:
		row.Status, row.Evidence = Pass, []string{fmt.Sprintf("The agent wrote %s, and the host read back the same %d bytes after exit%s.", planner.VerdictMountPath, len(c.verdict), fromRun(r))}
	}
	return row
}

// credentialsRow is row 7: which of the watched names reached the agent.
func (c *conformer) credentialsRow(r *conformRun) Check {
	row := Check{ID: RowCredentials, Title: rowTitles[RowCredentials]}
	if !r.reached() {
		row.Status, row.Evidence = NotVerifiable, []string{c.notReached(r)}
		return row
	}
	declared := c.runner.RequiredCredentials()
	got := map[string]bool{}
	for _, n := range r.probe.EnvNames {
		got[n] = true
	}
	var foreign, missing, arrived []string
	for _, n := range c.watch {
		if got[n] && !slices.Contains(declared, n) {
			foreign = append(foreign, n)
		}
	}
	for _, n := range declared {
		if got[n] {
			arrived = append(arrived, n)
		} else {
			missing = append(missing, n)
		}
	}
	var others []string
	for _, n := range c.watch {
		if !slices.Contains(declared, n) {
			others = append(others, n)
		}
	}
	switch {
	case len(foreign) > 0:
		row.Status = Fail
		row.Evidence = []string{fmt.Sprintf("%s reached the agent, but runner %s declares only %s. An image must not carry another runner's credentials (an ENV line bakes them in for every run).", strings.Join(foreign, ", "), c.runner.Name(), namesOrNone(declared))}
	case len(missing) > 0:
		row.Status = Fail
		row.Evidence = []string{fmt.Sprintf("%s was forwarded by name and did not reach the agent: the entrypoint must not clear the environment the runner authenticates from.", strings.Join(missing, ", "))}
	default:
		row.Status = Pass
		ev := fmt.Sprintf("Dummy values were set for %d names on kewplan's side.", len(c.watch))
		if len(arrived) > 0 {
			ev += fmt.Sprintf(" Runner %s's %s arrived", c.runner.Name(), strings.Join(arrived, " and "))
		} else {
			ev += fmt.Sprintf(" Runner %s declares no credential", c.runner.Name())
		}
		ev += fmt.Sprintf("; none of %s did%s.", strings.Join(others, ", "), fromRun(r))
		row.Evidence = []string{ev}
	}
	return row
}

func namesOrNone(n []string) string {
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, " and ")
}
