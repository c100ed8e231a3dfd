package plandiff

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/planner"
)

// dockerValueFlags are the `docker run` options that take a value as the next word. The planner writes only a few
// of them, but a plan file is input: a hand-edited or foreign plan may carry any of them, and reading one of them
// as boolean would mistake its value for the image.
var dockerValueFlags = map[string]bool{
	"--add-host": true, "--annotation": true, "--attach": true, "-a": true, "--blkio-weight": true,
	"--cap-add": true, "--cap-drop": true, "--cgroup-parent": true, "--cgroupns": true, "--cidfile": true,
	"--cpu-period": true, "--cpu-quota": true, "--cpu-rt-period": true, "--cpu-rt-runtime": true,
	"--cpu-shares": true, "-c": true, "--cpus": true, "--cpuset-cpus": true, "--cpuset-mems": true,
	"--device": true, "--device-cgroup-rule": true, "--device-read-bps": true, "--device-read-iops": true,
	"--device-write-bps": true, "--device-write-iops": true, "--dns": true, "--dns-option": true,
	"--dns-search": true, "--domainname": true, "--entrypoint": true, "--env": true, "-e": true,
	"--env-file": true, "--expose": true, "--gpus": true, "--group-add": true, "--health-cmd": true,
	"--health-interval": true, "--health-retries": true, "--health-start-period": true,
	"--health-timeout": true, "--hostname": true, "-h": true, "--ip": true, "--ip6": true, "--ipc": true,
	"--isolation": true, "--kernel-memory": true, "--label": true, "-l": true, "--label-file": true,
	"--link": true, "--link-local-ip": true, "--log-driver": true, "--log-opt": true, "--mac-address": true,
	"--memory": true, "-m": true, "--memory-reservation": true, "--memory-swap": true,
	"--memory-swappiness": true, "--mount": true, "--name": true, "--network": true, "--net": true,
	"--network-alias": true, "--oom-score-adj": true, "--pid": true, "--pids-limit": true,
	"--platform": true, "--publish": true, "-p": true, "--pull": true, "--restart": true, "--runtime": true,
	"--security-opt": true, "--shm-size": true, "--stop-signal": true, "--stop-timeout": true,
	"--storage-opt": true, "--sysctl": true, "--tmpfs": true, "--ulimit": true, "--user": true, "-u": true,
	"--userns": true, "--uts": true, "--volume": true, "-v": true, "--volume-driver": true,
	"--volumes-from": true, "--workdir": true, "-w": true,
}

// flagAliases maps short and legacy spellings to the long name used in comparisons.
var flagAliases = map[string]string{
	"-e": "--env", "-l": "--label", "-m": "--memory", "-v": "--volume", "-w": "--workdir", "-u": "--user",
	"-p": "--publish", "-h": "--hostname", "-c": "--cpu-shares", "-a": "--attach", "--net": "--network",
}

// runOption is one `docker run` option as written: its long name and its value ("" for a boolean flag).
type runOption struct {
	Name  string
	Value string
}

// dockerRun is an argv read as `docker run [options] image [args...]`.
type dockerRun struct {
	Options []runOption
	Image   string
	Args    []string
	Parsed  bool // false when the argv is not a docker run command kewplan can read
}

// parseDockerRun reads argv. It never fails: an argv it cannot read comes back with Parsed false, and the
// hardening comparison then treats every hardening flag as unverifiable.
func parseDockerRun(argv []string) dockerRun {
	var r dockerRun
	if len(argv) < 3 || argv[0] != "docker" || argv[1] != "run" {
		return r
	}
	i := 2
	for ; i < len(argv); i++ {
		w := argv[i]
		if w == "--" {
			i++
			break
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			break
		}
		name, value, inline := strings.Cut(w, "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			// -it style bundles of boolean short flags.
			inline = false
			name = w
		}
		if long, ok := flagAliases[name]; ok {
			name = long
		}
		switch {
		case inline:
		case dockerValueFlags[name] || dockerValueFlags[w]:
			if i+1 >= len(argv) {
				return dockerRun{}
			}
			i++
			value = argv[i]
		default:
			value = ""
		}
		r.Options = append(r.Options, runOption{Name: name, Value: value})
	}
	if i >= len(argv) {
		return dockerRun{}
	}
	r.Image = argv[i]
	r.Args = argv[i+1:]
	r.Parsed = true
	return r
}

// hardening is what the argv grants or withholds that bounds a compromised agent.
type hardening struct {
	Parsed          bool
	ReadOnly        bool
	Tmpfs           []string          // mount paths, sorted
	TmpfsOptions    map[string]string // path -> options as written ("" for the engine's defaults)
	CapDropAll      bool
	CapAdd          []string
	NoNewPrivileges bool
	PidsLimit       limit
	Memory          limit
	CPUs            limit
	Privileged      bool
	Unconfined      []string // security-opt entries that switch a confinement off
	HostNamespaces  []string // --pid host, --ipc host, ... as "--pid host"
	NetworkHost     bool
	ExtraMounts     []string // mounts besides the checkout, and devices
}

// limit is a resource limit: absent, unlimited, a number, or written but unreadable.
type limit struct {
	Set     bool
	Written string
	Value   float64 // math.Inf(1) when the value means unlimited
	Bad     bool    // written, but not a value kewplan can compare
}

func readHardening(argv []string) hardening {
	run := parseDockerRun(argv)
	h := hardening{Parsed: run.Parsed}
	if !run.Parsed {
		return h
	}
	for _, o := range run.Options {
		switch o.Name {
		case "--read-only":
			h.ReadOnly = o.Value == "" || o.Value == "true"
		case "--tmpfs":
			path, opts, _ := strings.Cut(o.Value, ":")
			h.Tmpfs = append(h.Tmpfs, path)
			if h.TmpfsOptions == nil {
				h.TmpfsOptions = map[string]string{}
			}
			h.TmpfsOptions[path] = opts
		case "--cap-drop":
			if strings.EqualFold(o.Value, "ALL") {
				h.CapDropAll = true
			}
		case "--cap-add":
			h.CapAdd = append(h.CapAdd, o.Value)
		case "--security-opt":
			v := strings.ReplaceAll(o.Value, "=", ":")
			switch {
			case v == "no-new-privileges" || v == "no-new-privileges:true":
				h.NoNewPrivileges = true
			case strings.HasSuffix(v, ":unconfined") || v == "label:disable" || v == "systempaths:unconfined":
				h.Unconfined = append(h.Unconfined, o.Value)
			}
		case "--pids-limit":
			h.PidsLimit = readCount(o.Value)
		case "--memory":
			h.Memory = readBytes(o.Value)
		case "--cpus":
			h.CPUs = readDecimal(o.Value)
		case "--privileged":
			h.Privileged = o.Value == "" || o.Value == "true"
		case "--pid", "--ipc", "--uts", "--userns", "--cgroupns":
			if o.Value == "host" || strings.HasPrefix(o.Value, "container:") {
				h.HostNamespaces = append(h.HostNamespaces, o.Name+" "+o.Value)
			}
		case "--network":
			if o.Value == "host" || strings.HasPrefix(o.Value, "container:") {
				h.NetworkHost = true
			}
		case "--volume":
			if !isCheckoutMount(o.Value) {
				h.ExtraMounts = append(h.ExtraMounts, o.Name+" "+o.Value)
			}
		case "--mount", "--device", "--volumes-from", "--gpus":
			h.ExtraMounts = append(h.ExtraMounts, o.Name+" "+o.Value)
		}
	}
	for _, s := range [][]string{h.Tmpfs, h.CapAdd, h.Unconfined, h.HostNamespaces, h.ExtraMounts} {
		sort.Strings(s)
	}
	return h
}

// tmpfsFlags reads tmpfs options the way the engine applies them: noexec, nosuid and nodev by default, each undone
// by exec, suid or dev; and the size= bound, if any.
func tmpfsFlags(opts string) (flags map[string]bool, size limit) {
	flags = map[string]bool{"noexec": true, "nosuid": true, "nodev": true}
	for _, o := range strings.Split(opts, ",") {
		switch {
		case o == "exec" || o == "suid" || o == "dev":
			flags["no"+o] = false
		case o == "noexec" || o == "nosuid" || o == "nodev":
			flags[o] = true
		case strings.HasPrefix(o, "size="):
			size = readBytes(strings.TrimPrefix(o, "size="))
		}
	}
	return flags, size
}

// isCheckoutMount is the one bind mount the container contract allows: the checkout at /work.
func isCheckoutMount(v string) bool {
	src, dst, ok := strings.Cut(v, ":")
	return ok && src != "" && (dst == "/work" || dst == "/work:rw")
}

func readCount(s string) limit {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return limit{Set: true, Written: s, Bad: true}
	}
	if n <= 0 { // docker reads 0 and -1 as no limit
		return limit{Set: true, Written: s, Value: math.Inf(1)}
	}
	return limit{Set: true, Written: s, Value: float64(n)}
}

func readDecimal(s string) limit {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return limit{Set: true, Written: s, Bad: true}
	}
	if f == 0 {
		return limit{Set: true, Written: s, Value: math.Inf(1)}
	}
	return limit{Set: true, Written: s, Value: f}
}

// readBytes reads a docker memory size: a number with an optional binary unit (b, k, m, g, t, p), optionally
// followed by "b" or "ib", case-insensitive ("4g", "512m", "4GiB").
func readBytes(s string) limit {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "ib")
	if strings.HasSuffix(t, "b") && len(t) > 1 && strings.ContainsRune("kmgtp", rune(t[len(t)-2])) {
		t = strings.TrimSuffix(t, "b")
	}
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'b':
			t = t[:len(t)-1]
		case 'k':
			mult, t = 1<<10, t[:len(t)-1]
		case 'm':
			mult, t = 1<<20, t[:len(t)-1]
		case 'g':
			mult, t = 1<<30, t[:len(t)-1]
		case 't':
			mult, t = 1<<40, t[:len(t)-1]
		case 'p':
			mult, t = 1<<50, t[:len(t)-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return limit{Set: true, Written: s, Bad: true}
	}
	if f == 0 {
		return limit{Set: true, Written: s, Value: math.Inf(1)}
	}
	return limit{Set: true, Written: s, Value: f * mult}
}

// canonicalArgv is argv with the order of `-e NAME` options normalised, so that reordering a runner's credentials
// (which changes nothing the container sees) is not reported as a change.
func canonicalArgv(argv []string) []string {
	run := parseDockerRun(argv)
	if !run.Parsed {
		return argv
	}
	var env []string
	out := []string{"docker", "run"}
	for _, o := range run.Options {
		if o.Name == "--env" {
			env = append(env, o.Value)
			continue
		}
		out = append(out, o.Name)
		if o.Value != "" {
			out = append(out, o.Value)
		}
	}
	sort.Strings(env)
	for _, e := range env {
		out = append(out, "--env", e)
	}
	out = append(out, run.Image)
	return append(out, run.Args...)
}

// redactArgv replaces the value of any `-e NAME=value` option with a mask. The planner never writes one (the
// credential-by-value rule refuses it), but a plan file is input, and a diff must never print a credential.
func redactArgv(argv []string) []string {
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 0; i < len(out); i++ {
		w := out[i]
		switch {
		case (w == "-e" || w == "--env") && i+1 < len(out):
			i++
			if out[i] == plannedNoProxy {
				continue // the planner's own NO_PROXY: a constant, no secret
			}
			if name, _, ok := strings.Cut(out[i], "="); ok {
				out[i] = name + "=" + redactedValue
			}
		case strings.HasPrefix(w, "--env=") || strings.HasPrefix(w, "-e="):
			flag, rest, _ := strings.Cut(w, "=")
			if name, _, ok := strings.Cut(rest, "="); ok {
				out[i] = flag + "=" + name + "=" + redactedValue
			}
		}
	}
	return out
}

const redactedValue = "(redacted)"

var plannedNoProxy = planner.NoProxyVariable + "=" + planner.NoProxyValue
