package plandiff

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// spec describes a node the way a configuration would; node() renders it into a plan document node with the
// planner's own argv, so these tests follow the argv kewplan really writes.
type spec struct {
	name, runner, image, network, model string
	creds, origins, deps                []string
	pids                                int64
	memory, cpus                        string
	egress                              []string // host patterns, origin "sandbox"
	tmpfs                               string   // tmpfs size; "" for the engine's default (unbounded)
	line                                int
	prompt                              string
	runtime                             string
}

func node(s spec) jsonplan.NodeDocument {
	if s.runner == "" {
		s.runner = "claude-code"
	}
	if s.image == "" {
		s.image = "ghcr.io/acme/agent@" + digestA
	}
	if s.network == "" {
		s.network = "allowlist"
	}
	if s.model == "" {
		s.model = "claude-sonnet-4-5"
	}
	if s.pids == 0 {
		s.pids = 512
	}
	if s.creds == nil {
		s.creds = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}
	}
	if s.origins == nil {
		for range s.creds {
			s.origins = append(s.origins, "builtin")
		}
	}
	if s.line == 0 {
		s.line = 10
	}
	if s.prompt == "" {
		s.prompt = strings.Repeat("a", 64)
	}
	netName := "kew-allowlist"
	if s.network == "open" {
		netName = "bridge"
	}
	c := &planner.Container{
		Name: "kew-" + s.name, Node: s.name, RunID: planner.RunPlaceholder, Checkout: planner.CheckoutPlaceholder,
		Image: s.image, Network: netName, Runtime: s.runtime, PidsLimit: s.pids, Memory: s.memory, CPUs: s.cpus, Env: s.creds, TmpfsSize: s.tmpfs,
		Args: []string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", s.model},
	}
	egress := []jsonplan.EgressHostDocument{}
	for _, e := range s.egress {
		host, port := e, 443
		if h, p, ok := strings.Cut(e, ":"); ok {
			host, port = h, 0
			fmt.Sscan(p, &port)
		}
		egress = append(egress, jsonplan.EgressHostDocument{Host: host, Port: port, Origins: []string{"sandbox"}})
	}
	return jsonplan.NodeDocument{
		Egress: egress, TmpfsSize: s.tmpfs,
		Name: s.name, Runner: s.runner, Protocol: s.runner, Role: "worker", Image: s.image, Network: s.network,
		Runtime: s.runtime, Isolation: planner.IsolationTier(s.runtime), Model: s.model, Credentials: s.creds, CredentialOrigins: s.origins, DependsOn: append([]string{}, s.deps...),
		Prompt: jsonplan.PromptDocument{SHA256: s.prompt, Bytes: 120}, Argv: c.Argv(), Unknown: []string{},
		PidsLimit: s.pids, Memory: s.memory, CPUs: s.cpus,
		Range: &jsonplan.Range{Filename: "main.hcl", Start: jsonplan.Pos{Line: s.line, Column: 1},
			End: jsonplan.Pos{Line: s.line, Column: 10}},
	}
}

// withPrivate names private hosts on a node document.
func withPrivate(n jsonplan.NodeDocument, hosts ...string) jsonplan.NodeDocument {
	n.PrivateHosts = hosts
	return n
}

func doc(nodes ...jsonplan.NodeDocument) *jsonplan.Document {
	d := &jsonplan.Document{FormatVersion: "1.0", KewplanVersion: "test", ConfigDigest: "sha256:00", Nodes: nodes,
		Exposure: map[string][]string{}, Diagnostics: jsonplan.Diagnostics{}}
	for _, n := range nodes {
		for _, c := range n.Credentials {
			d.Exposure[c] = append(d.Exposure[c], n.Name)
		}
	}
	return d
}

// brief is a Finding without its range and message, for table comparisons.
type brief struct {
	Kind, Node, Credential string
	Widening               bool
}

func briefs(fs []Finding) []brief {
	var out []brief
	for _, f := range fs {
		out = append(out, brief{f.Kind, f.Node, f.Credential, f.Widening})
	}
	return out
}

func TestCompareExposure(t *testing.T) {
	fix := spec{name: "fix", memory: "4g", cpus: "2"}
	review := spec{name: "review", runner: "opencode", creds: []string{"OPENROUTER_API_KEY"}, deps: []string{"fix"}, memory: "4g", cpus: "2", line: 20}
	with := func(s spec, edit func(*spec)) spec { edit(&s); return s }

	tests := []struct {
		name       string
		base, head *jsonplan.Document
		want       []brief
		widened    bool
	}{
		{
			name: "credential added to an override",
			base: doc(node(fix), node(review)),
			head: doc(node(fix), node(with(review, func(s *spec) {
				s.creds = []string{"OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"}
				s.origins = []string{"main.hcl:3", "main.hcl:3"}
			}))),
			want:    []brief{{KindCredentialAdded, "review", "ANTHROPIC_API_KEY", true}},
			widened: true,
		},
		{
			name: "node moved to open",
			base: doc(node(fix)),
			head: doc(node(with(fix, func(s *spec) { s.network = "open" }))),
			want: []brief{{KindNetworkOpened, "fix", "", true}},
			// The argv's --network kew-allowlist -> bridge is in the argv diff, not a second finding.
			widened: true,
		},
		{
			name: "new runner sharing a credential",
			base: doc(node(fix)),
			head: doc(node(fix), node(spec{name: "helper", runner: "acme", creds: []string{"ANTHROPIC_API_KEY"}, origins: []string{"main.hcl:30"}, memory: "4g"})),
			// A node without a credentials mode forwards its credentials: its agent has every provider feature.
			want:    []brief{{KindCredentialAdded, "helper", "ANTHROPIC_API_KEY", true}, {KindProviderFetchWidened, "helper", "", true}},
			widened: true,
		},
		{
			name:    "image moved off its pinned digest",
			base:    doc(node(fix)),
			head:    doc(node(with(fix, func(s *spec) { s.image = "ghcr.io/acme/agent:latest" }))),
			want:    []brief{{KindImageUnpinned, "fix", "", true}},
			widened: true,
		},
		{
			name: "image digest moved to another digest",
			base: doc(node(fix)),
			head: doc(node(with(fix, func(s *spec) { s.image = "ghcr.io/acme/agent@" + digestB }))),
		},
		{
			name:    "pids_limit raised",
			base:    doc(node(fix)),
			head:    doc(node(with(fix, func(s *spec) { s.pids = 4096 }))),
			want:    []brief{{KindHardeningLost, "fix", "", true}},
			widened: true,
		},
		{
			name:    "memory and cpus removed",
			base:    doc(node(fix)),
			head:    doc(node(with(fix, func(s *spec) { s.memory, s.cpus = "", "" }))),
			want:    []brief{{KindHardeningLost, "fix", "", true}, {KindHardeningLost, "fix", "", true}},
			widened: true,
		},
		{
			name:    "memory raised",
			base:    doc(node(fix)),
			head:    doc(node(with(fix, func(s *spec) { s.memory = "8192m" }))),
			want:    []brief{{KindHardeningLost, "fix", "", true}},
			widened: true,
		},
		{
			name: "narrowing: credential removed, network closed, limits lowered, image pinned",
			base: doc(node(with(fix, func(s *spec) {
				s.network, s.image, s.pids, s.memory, s.cpus = "open", "ghcr.io/acme/agent:1", 1024, "", ""
			})), node(review)),
			head: doc(node(with(fix, func(s *spec) { s.creds = []string{"ANTHROPIC_API_KEY"} }))),
			want: []brief{
				{KindCredentialRemoved, "fix", "CLAUDE_CODE_OAUTH_TOKEN", false},
				{KindHardeningGained, "fix", "", false}, {KindHardeningGained, "fix", "", false},
				{KindHardeningGained, "fix", "", false},
				{KindImagePinned, "fix", "", false},
				{KindNetworkClosed, "fix", "", false},
				{KindCredentialRemoved, "review", "OPENROUTER_API_KEY", false},
			},
		},
		{
			name:    "egress host added to a node holding a credential",
			base:    doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com"} }))),
			head:    doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com", "pypi.org"} }))),
			want:    []brief{{KindEgressAdded, "fix", "", true}},
			widened: true,
		},
		{
			name:    "egress on another port is another host",
			base:    doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com"} }))),
			head:    doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com", "github.com:22"} }))),
			want:    []brief{{KindEgressAdded, "fix", "", true}},
			widened: true,
		},
		{
			name: "egress host added to a node holding no credential is a change, not a widening",
			base: doc(node(with(fix, func(s *spec) { s.creds = []string{} }))),
			head: doc(node(with(fix, func(s *spec) { s.creds, s.egress = []string{}, []string{"pypi.org"} }))),
		},
		{
			name: "egress host a wildcard already covered",
			base: doc(node(with(fix, func(s *spec) { s.egress = []string{"*.github.com"} }))),
			head: doc(node(with(fix, func(s *spec) { s.egress = []string{"*.github.com", "api.github.com"} }))),
		},
		{
			name:    "private host added is widening, even without a credential",
			base:    doc(node(with(fix, func(s *spec) { s.creds, s.egress = []string{}, []string{"artifactory.corp"} }))),
			head:    doc(withPrivate(node(with(fix, func(s *spec) { s.creds, s.egress = []string{}, []string{"artifactory.corp"} })), "artifactory.corp")),
			want:    []brief{{KindEgressAdded, "fix", "", true}},
			widened: true,
		},
		{
			name: "private host removed",
			base: doc(withPrivate(node(with(fix, func(s *spec) { s.egress = []string{"artifactory.corp"} })), "artifactory.corp")),
			head: doc(node(with(fix, func(s *spec) { s.egress = []string{"artifactory.corp"} }))),
			want: []brief{{KindEgressRemoved, "fix", "", false}},
		},
		{
			name: "egress host removed",
			base: doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com", "pypi.org"} }))),
			head: doc(node(with(fix, func(s *spec) { s.egress = []string{"github.com"} }))),
			want: []brief{{KindEgressRemoved, "fix", "", false}},
		},
		{
			name: "new node holding a credential, with egress",
			base: doc(node(fix)),
			head: doc(node(fix), node(spec{name: "helper", creds: []string{"ANTHROPIC_API_KEY"}, memory: "4g", egress: []string{"api.anthropic.com"}})),
			want: []brief{
				{KindCredentialAdded, "helper", "ANTHROPIC_API_KEY", true},
				{KindEgressAdded, "helper", "", true},
				{KindProviderFetchWidened, "helper", "", true},
			},
			widened: true,
		},
		{
			name:    "tmpfs size raised",
			base:    doc(node(with(fix, func(s *spec) { s.tmpfs = "256m" }))),
			head:    doc(node(with(fix, func(s *spec) { s.tmpfs = "1g" }))),
			want:    []brief{{KindHardeningLost, "fix", "", true}, {KindHardeningLost, "fix", "", true}},
			widened: true,
		},
		{
			name: "tmpfs sized where it was unbounded: noexec and friends kept, size set",
			base: doc(node(fix)),
			head: doc(node(with(fix, func(s *spec) { s.tmpfs = "512m" }))),
			want: []brief{{KindHardeningGained, "fix", "", false}, {KindHardeningGained, "fix", "", false}},
		},
		{
			name: "model change is a change, not a widening",
			base: doc(node(fix)),
			head: doc(node(with(fix, func(s *spec) { s.model = "claude-opus-4-1" }))),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compare("base.json", tt.base, "head.json", tt.head)
			if diff := cmp.Diff(tt.want, briefs(d.Exposure)); diff != "" {
				t.Errorf("Compare() exposure mismatch (-want +got):\n%s", diff)
				for _, f := range d.Exposure {
					t.Logf("  %s", f.Message)
				}
			}
			if got := d.Widened(); got != tt.widened {
				t.Errorf("Widened() = %v, want %v", got, tt.widened)
			}
			for _, f := range d.Exposure {
				if f.Range == nil || f.Message == "" {
					t.Errorf("finding %+v: want a range and a message", f)
				}
			}
		})
	}
}

func TestComparePureReorderIsEmpty(t *testing.T) {
	a := node(spec{name: "a", line: 1, deps: []string{"b", "c"}, origins: []string{"main.hcl:40", "main.hcl:40"}})
	b := node(spec{name: "b", line: 20, runner: "pi", creds: []string{"OPENROUTER_API_KEY"}})
	c := node(spec{name: "c", line: 30, memory: "4g"})
	base := doc(a, b, c)
	base.Diagnostics = jsonplan.Diagnostics{
		{Severity: "warning", Summary: "No memory limit", Detail: "x", Rule: "no-memory-limit", Range: &jsonplan.Range{Filename: "main.hcl", Start: jsonplan.Pos{Line: 1, Column: 1, Byte: 0}, End: jsonplan.Pos{Line: 1, Column: 2, Byte: 1}}},
		{Severity: "warning", Summary: "No memory limit", Detail: "x", Rule: "no-memory-limit", Range: &jsonplan.Range{Filename: "main.hcl", Start: jsonplan.Pos{Line: 20, Column: 1, Byte: 0}, End: jsonplan.Pos{Line: 20, Column: 2, Byte: 1}}},
	}

	// The same configuration with its blocks and lists in another order: node ranges, credential order (and so
	// the -e order of the argv), credential origins' lines and dependency order all move.
	a2 := node(spec{name: "a", line: 50, deps: []string{"c", "b"}, creds: []string{"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY"}, origins: []string{"other.hcl:2", "other.hcl:2"}})
	a2.CredentialOrigins = []string{"main.hcl:7", "main.hcl:7"}
	b2 := node(spec{name: "b", line: 3, runner: "pi", creds: []string{"OPENROUTER_API_KEY"}})
	c2 := node(spec{name: "c", line: 9, memory: "4g"})
	head := doc(c2, b2, a2)
	head.Diagnostics = jsonplan.Diagnostics{base.Diagnostics[1], base.Diagnostics[0]}

	d := Compare("base.json", base, "head.json", head)
	if !d.Empty() {
		t.Errorf("Compare() of a pure reorder is not empty: %+v", d)
	}
}

func TestCompareHardeningFromArgv(t *testing.T) {
	base := doc(node(spec{name: "fix", memory: "4g"}))
	head := doc(node(spec{name: "fix", memory: "4g"}))
	argv := head.Nodes[0].Argv
	var edited []string
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "--read-only":
			continue
		case "--cap-drop", "--security-opt":
			i++
			continue
		case "--tmpfs":
			if argv[i+1] == "/tmp" {
				i++
				continue
			}
		case "-w":
			edited = append(edited, "--privileged", "-v", "/var/run/docker.sock:/var/run/docker.sock", "--cap-add", "SYS_ADMIN",
				"--security-opt", "seccomp=unconfined", "--pid=host")
		}
		edited = append(edited, argv[i])
	}
	head.Nodes[0].Argv = edited

	d := Compare("b", base, "h", head)
	var got []string
	for _, f := range d.Exposure {
		if f.Kind != KindHardeningLost || !f.Widening {
			t.Errorf("unexpected finding %+v", f)
		}
		got = append(got, f.Message)
	}
	want := []string{
		`Node "fix": --cap-add SYS_ADMIN added.`,
		`Node "fix": --cap-drop ALL removed: the container keeps Docker's default capabilities.`,
		`Node "fix": --pid host added.`,
		`Node "fix": --privileged added: the container gets every capability and every host device.`,
		`Node "fix": --read-only removed: the root filesystem is writable.`,
		`Node "fix": --security-opt no-new-privileges removed: setuid binaries can raise the agent's privileges.`,
		`Node "fix": --security-opt seccomp=unconfined added.`,
		`Node "fix": --tmpfs /tmp removed.`,
		`Node "fix": --volume /var/run/docker.sock:/var/run/docker.sock added.`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hardening findings mismatch (-want +got):\n%s", diff)
	}
	if len(d.Changed) != 1 || d.Changed[0].Argv == nil {
		t.Fatalf("want one changed node with an argv diff, got %+v", d.Changed)
	}
}

func TestCompareNewNodeWithoutHardening(t *testing.T) {
	n := node(spec{name: "x", network: "open", image: "alpine:3", creds: []string{"K"}})
	n.Argv = []string{"docker", "run", "--rm", "-e", "K", "alpine:3", "sh"}
	d := Compare("b", doc(), "h", doc(n))
	want := []brief{
		{KindCredentialAdded, "x", "K", true},
		{KindHardeningLost, "x", "", true}, {KindHardeningLost, "x", "", true},
		{KindHardeningLost, "x", "", true}, {KindHardeningLost, "x", "", true},
		{KindImageUnpinned, "x", "", true},
		{KindNetworkOpened, "x", "", true},
		{KindProviderFetchWidened, "x", "", true},
	}
	if diff := cmp.Diff(want, briefs(d.Exposure)); diff != "" {
		t.Errorf("Compare() mismatch (-want +got):\n%s", diff)
	}
	if len(d.Added) != 1 || d.Added[0].Name != "x" {
		t.Errorf("Added = %+v, want node x", d.Added)
	}
}

func TestCompareUnreadableArgvFailsClosed(t *testing.T) {
	base := doc(node(spec{name: "fix"}))
	head := doc(node(spec{name: "fix"}))
	head.Nodes[0].Argv = []string{"podman", "run", "img"}
	d := Compare("b", base, "h", head)
	if !d.Widened() {
		t.Errorf("an argv kewplan cannot read must count as widening: %+v", d.Exposure)
	}
}

func TestCompareNeverPrintsCredentialValues(t *testing.T) {
	base := doc(node(spec{name: "fix"}))
	head := doc(node(spec{name: "fix"}), node(spec{name: "new"}))
	for i := range head.Nodes {
		argv := head.Nodes[i].Argv
		for j, w := range argv {
			if w == "ANTHROPIC_API_KEY" {
				argv[j] = "ANTHROPIC_API_KEY=sk-ant-secret-value"
			}
		}
		head.Nodes[i].Argv = append(argv[:len(argv):len(argv)], "--env=OTHER=hunter2")
	}
	d := Compare("b", base, "h", head)
	dump := fmt.Sprintf("%+v", d)
	for _, secret := range []string{"sk-ant-secret-value", "hunter2"} {
		if strings.Contains(dump, secret) {
			t.Errorf("the diff carries the credential value %q:\n%s", secret, dump)
		}
	}
	if !strings.Contains(dump, "ANTHROPIC_API_KEY="+redactedValue) {
		t.Errorf("the diff should show the redacted entry:\n%s", dump)
	}
}

func TestCompareFieldsAndArgv(t *testing.T) {
	base := doc(node(spec{name: "fix", deps: []string{"a"}}))
	head := doc(node(spec{name: "fix", model: "claude-opus-4-1", deps: []string{"b"}, prompt: strings.Repeat("b", 64)}))
	d := Compare("b", base, "h", head)
	if len(d.Changed) != 1 {
		t.Fatalf("Changed = %+v, want one node", d.Changed)
	}
	c := d.Changed[0]
	wantFields := []FieldChange{
		{Field: "model", Base: "claude-sonnet-4-5", Head: "claude-opus-4-1"},
		{Field: "prompt", Base: "sha256:" + strings.Repeat("a", 64) + " (120 bytes)", Head: "sha256:" + strings.Repeat("b", 64) + " (120 bytes)"},
	}
	if diff := cmp.Diff(wantFields, c.Fields); diff != "" {
		t.Errorf("Fields mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, c.DependsOnAdded); diff != "" {
		t.Errorf("DependsOnAdded mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, c.DependsOnRemoved); diff != "" {
		t.Errorf("DependsOnRemoved mismatch (-want +got):\n%s", diff)
	}
	var changed []WordEdit
	for _, e := range c.Argv {
		if e.Op != OpEqual {
			changed = append(changed, e)
		}
	}
	if diff := cmp.Diff([]WordEdit{{OpDelete, "claude-sonnet-4-5"}, {OpInsert, "claude-opus-4-1"}}, changed); diff != "" {
		t.Errorf("argv edits mismatch (-want +got):\n%s", diff)
	}
	if d.Widened() {
		t.Errorf("a model change must not widen: %+v", d.Exposure)
	}
}

func TestWordDiff(t *testing.T) {
	tests := []struct {
		a, b string
		want string
	}{
		{"", "", ""},
		{"a b c", "a b c", " a  b  c"},
		{"a b c", "a c", " a -b  c"},
		{"a c", "a b c", " a +b  c"},
		{"a b", "c d", "-a -b +c +d"},
		{"x a b c", "a b c y", "-x  a  b  c +y"},
	}
	for _, tt := range tests {
		var parts []string
		for _, e := range wordDiff(strings.Fields(tt.a), strings.Fields(tt.b)) {
			parts = append(parts, e.Op+e.Word)
		}
		if got := strings.Join(parts, " "); got != tt.want {
			t.Errorf("wordDiff(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestWordDiffHugeFallsBack(t *testing.T) {
	a := make([]string, 3000)
	b := make([]string, 3000)
	for i := range a {
		a[i] = fmt.Sprint("a", i)
		b[i] = fmt.Sprint("b", i)
	}
	if got := len(wordDiff(a, b)); got != 6000 {
		t.Errorf("len(wordDiff) = %d, want 6000", got)
	}
}

func TestReadLimits(t *testing.T) {
	tests := []struct {
		in   string
		read func(string) limit
		want float64
		bad  bool
	}{
		{"4g", readBytes, 4 << 30, false},
		{"4GiB", readBytes, 4 << 30, false},
		{"4gb", readBytes, 4 << 30, false},
		{"512m", readBytes, 512 << 20, false},
		{"1.5g", readBytes, 1.5 * (1 << 30), false},
		{"100", readBytes, 100, false},
		{"100b", readBytes, 100, false},
		{"lots", readBytes, 0, true},
		{"-1g", readBytes, 0, true},
		{"2", readDecimal, 2, false},
		{"0.5", readDecimal, 0.5, false},
		{"two", readDecimal, 0, true},
		{"512", readCount, 512, false},
		{"5x", readCount, 0, true},
	}
	for _, tt := range tests {
		got := tt.read(tt.in)
		if got.Bad != tt.bad || (!tt.bad && got.Value != tt.want) {
			t.Errorf("read(%q) = %+v, want value %v bad %v", tt.in, got, tt.want, tt.bad)
		}
	}
	if v := readCount("-1").Value; v <= 1e300 {
		t.Errorf("readCount(-1) = %v, want unlimited", v)
	}
}

func TestDecodePlan(t *testing.T) {
	good, err := json.Marshal(doc(node(spec{name: "fix"})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePlan(good, "good.json"); err != nil {
		t.Errorf("DecodePlan(good) = %v", err)
	}
	saved := strings.Replace(string(good), `"format_version"`, `"saved":{"config_path":"x"},"format_version"`, 1)
	if _, err := DecodePlan([]byte(saved), "saved.json"); err != nil {
		t.Errorf("DecodePlan(saved plan) = %v", err)
	}
	tests := map[string]string{
		"{\n  \"format_version\": \"1.0\",\n  \"nodes\": [\n    {\"name\": 3}\n  ]\n}": "bad.json: not a kewplan plan: invalid JSON at line 4, column",
		"{\"format_version\":\"1.0\"\n,}":                                              "bad.json: not a kewplan plan: invalid JSON at line 2, column 2",
		`{"format_version":"2.0","nodes":[]}`:                                          "bad.json: plan format 2.0 is not supported",
		`{"nodes":[]}`:                                                                 "bad.json: not a kewplan plan: it has no format_version",
		`{"format_version":"1.0","nodes":[{"name":"a"},{"name":"a"}]}`:                 `bad.json: node "a" appears twice`,
		`{"format_version":"1.0","nodes":[{}]}`:                                        "bad.json: node 0 has no name",
		`{"format_version":"1.0"} {}`:                                                  "bad.json: not a kewplan plan: $ (line 1, column 26): the document holds more than one JSON value",
		`{"format_version":"1.0","Format_Version":"1.0"}`:                              `bad.json: not a kewplan plan: $.Format_Version (line 1, column 25): the key "Format_Version" differs from the field "format_version" only by case`,
		``: "bad.json: not a kewplan plan: EOF",
	}
	for in, want := range tests {
		_, err := DecodePlan([]byte(in), "bad.json")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("DecodePlan(%q) = %v, want an error starting %q", in, err, want)
		}
	}
}

func TestCompareNodeWithErrorsHasNoHardeningFindings(t *testing.T) {
	base := doc(node(spec{name: "fix"}))
	head := doc(node(spec{name: "fix"}))
	head.Nodes[0].Argv = []string{}
	head.Nodes[0].Errors = true
	d := Compare("b", base, "h", head)
	if len(d.Exposure) != 0 {
		t.Errorf("a node without argv cannot be judged on hardening: %+v", d.Exposure)
	}
	if len(d.Changed) != 1 {
		t.Fatalf("Changed = %+v, want the node", d.Changed)
	}
	if diff := cmp.Diff([]FieldChange{{Field: "errors", Base: "false", Head: "true"}}, d.Changed[0].Fields); diff != "" {
		t.Errorf("Fields mismatch (-want +got):\n%s", diff)
	}
}

// generatedPlan is a plan of n nodes in a chain, for the benchmark and the fuzz seeds.
func generatedPlan(n int, pids int64) *jsonplan.Document {
	var nodes []jsonplan.NodeDocument
	for i := 0; i < n; i++ {
		s := spec{name: fmt.Sprintf("node-%05d", i), pids: pids, line: i + 1}
		if i > 0 {
			s.deps = []string{fmt.Sprintf("node-%05d", i-1)}
		}
		nodes = append(nodes, node(s))
	}
	return doc(nodes...)
}

func BenchmarkCompare(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		base, head := generatedPlan(n, 512), generatedPlan(n, 1024)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Compare("b", base, "h", head)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
		})
	}
}

func FuzzDecodeAndCompare(f *testing.F) {
	seed, err := json.Marshal(generatedPlan(3, 512))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, seed)
	f.Add([]byte(`{"format_version":"1.0","nodes":[{"name":"a","argv":["docker","run","--pids-limit"]}]}`),
		[]byte(`{"format_version":"1.0","nodes":[{"name":"a","argv":["docker","run","-e"],"credentials":["X"],"credential_origins":[]}]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		base, err := DecodePlan(a, "a")
		if err != nil {
			return
		}
		head, err := DecodePlan(b, "b")
		if err != nil {
			return
		}
		d := Compare("a", base, "b", head) // must never panic
		_ = d.Widened()
	})
}

// TestCompareProviderFetch: a node that gains a provider-fetch feature (its own opt-in, or its credentials moved
// to its container, which has every feature) widens, and a new brokered node with one widens; one that loses a
// feature narrows.
func TestCompareProviderFetch(t *testing.T) {
	brokered := func(name string, features ...string) jsonplan.NodeDocument {
		n := node(spec{name: name})
		n.CredentialMode, n.ProviderFetch = "brokered", features
		return n
	}
	forwarded := func(name string) jsonplan.NodeDocument {
		n := node(spec{name: name})
		n.CredentialMode = "forward"
		return n
	}
	base := doc(brokered("fix"), brokered("lint", "web_search", "url_sources"), brokered("docs"))
	head := doc(brokered("fix", "web_search"), brokered("lint", "web_search"), forwarded("docs"), brokered("new", "mcp_servers"))
	d := Compare("base.json", base, "head.json", head)
	var got []Finding
	for _, f := range d.Exposure {
		if strings.Contains(f.Kind, "provider-fetch") {
			got = append(got, f)
		}
	}
	want := []brief{
		{Kind: KindProviderFetchWidened, Node: "docs", Widening: true},
		{Kind: KindProviderFetchWidened, Node: "fix", Widening: true},
		{Kind: KindProviderFetchWidened, Node: "new", Widening: true},
		{Kind: KindProviderFetchNarrowed, Node: "lint"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Fatalf("provider-fetch findings (-want +got):\n%s", diff)
	}
	if !d.Widened() {
		t.Error("Widened() = false, want true: kewplan diff exits 2")
	}
	for i, w := range []string{"web_search", "with web_search", "with mcp_servers", "url_sources"} {
		if !strings.Contains(got[i].Message, w) {
			t.Errorf("finding %q does not name %q", got[i].Message, w)
		}
	}
	if !strings.Contains(got[0].Message, "code_execution, mcp_servers, url_sources, web_fetch, web_search") || !strings.Contains(got[0].Message, "forwarded") {
		t.Errorf("the forwarded node's finding %q does not name every feature and why", got[0].Message)
	}
	var fields []FieldChange
	for _, c := range d.Changed {
		if c.Name == "fix" {
			fields = c.Fields
		}
	}
	if !slices.ContainsFunc(fields, func(f FieldChange) bool { return f.Field == "provider fetch" }) {
		t.Errorf("node fix's changes %+v lack the provider fetch field", fields)
	}
	if d2 := Compare("a", head, "b", head); d2.Widened() {
		t.Errorf("a plan against itself widens: %+v", d2.Exposure)
	}
}
