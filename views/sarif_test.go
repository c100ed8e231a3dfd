package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
)

// securityRules are the credential and hardening rules: each must carry a security-severity (and so the
// "security" tag), which is what makes GitHub rank their alerts as security alerts.
var securityRules = []string{
	planner.RuleCredentialByValue, planner.RuleOpenNetworkCredentials, planner.RuleImageNotPinned,
	planner.RuleNoMemoryLimit, planner.RulePolicyCredentials, planner.RulePolicyAllowedNetworks,
	planner.RulePolicyRequirePinnedImages, planner.RulePolicyAllowedImagePrefixes, planner.RulePolicyMaxPidsLimit,
	plandiff.KindCredentialAdded, plandiff.KindNetworkOpened, plandiff.KindHardeningLost, plandiff.KindImageUnpinned,
}

var lineHash = regexp.MustCompile(`^[0-9a-f]{16}:[1-9][0-9]*$`)

// checkSARIF checks a SARIF log against the properties GitHub code scanning requires ("SARIF support for code
// scanning": sarifLog, run, toolComponent, reportingDescriptor, result, location and physicalLocation objects,
// where required properties must hold a non-empty value) and its upload limits. It reads the bytes as generic
// JSON, not through the types that wrote them, so a missing or misspelt key is caught.
func checkSARIF(t *testing.T, data []byte) {
	t.Helper()
	var log map[string]any
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatalf("SARIF is not JSON: %v", err)
	}
	errorf := func(format string, args ...any) { t.Helper(); t.Errorf("SARIF: "+format, args...) }
	str := func(v any, path string) string {
		s, ok := v.(string)
		if !ok || s == "" {
			errorf("%s: want a non-empty string, got %#v", path, v)
		}
		return s
	}
	obj := func(v any, path string) map[string]any {
		m, ok := v.(map[string]any)
		if !ok {
			errorf("%s: want an object, got %#v", path, v)
			return map[string]any{}
		}
		return m
	}
	arr := func(v any, path string) []any {
		a, ok := v.([]any)
		if !ok {
			errorf("%s: want an array, got %#v", path, v)
		}
		return a
	}
	num := func(v any, path string) int {
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) {
			errorf("%s: want an integer, got %#v", path, v)
		}
		return int(f)
	}
	levels := map[string]bool{"note": true, "warning": true, "error": true}

	str(log["$schema"], "$schema")
	if v := str(log["version"], "version"); v != "2.1.0" {
		errorf("version = %q, want 2.1.0", v)
	}
	runs := arr(log["runs"], "runs")
	if len(runs) == 0 || len(runs) > 20 {
		errorf("runs: %d runs, want 1 to 20", len(runs))
	}
	for ri, r := range runs {
		run := obj(r, fmt.Sprintf("runs[%d]", ri))
		driver := obj(obj(run["tool"], "tool")["driver"], "tool.driver")
		str(driver["name"], "tool.driver.name")
		if v, ok := driver["version"]; ok {
			str(v, "tool.driver.version")
		}
		rules := arr(driver["rules"], "tool.driver.rules")
		if len(rules) > 25000 {
			errorf("%d rules, GitHub accepts at most 25,000", len(rules))
		}
		ruleIndex := map[string]int{}
		severity := map[string]string{}
		for i, rv := range rules {
			p := fmt.Sprintf("rules[%d]", i)
			rule := obj(rv, p)
			id := str(rule["id"], p+".id")
			if _, dup := ruleIndex[id]; dup {
				errorf("%s: duplicate rule id %q", p, id)
			}
			ruleIndex[id] = i
			if name, ok := rule["name"]; ok && len(str(name, p+".name")) > 255 {
				errorf("%s.name longer than 255 characters", p)
			}
			for _, k := range []string{"shortDescription", "fullDescription"} {
				if text := str(obj(rule[k], p+"."+k)["text"], p+"."+k+".text"); len(text) > 1024 {
					errorf("%s.%s.text longer than 1024 characters", p, k)
				}
			}
			str(obj(rule["help"], p+".help")["text"], p+".help.text")
			if lv := str(obj(rule["defaultConfiguration"], p+".defaultConfiguration")["level"], p+".defaultConfiguration.level"); !levels[lv] {
				errorf("%s.defaultConfiguration.level = %q", p, lv)
			}
			props := obj(rule["properties"], p+".properties")
			if ss, ok := props["security-severity"]; ok {
				s, isString := ss.(string)
				f, err := strconv.ParseFloat(s, 64)
				if !isString || err != nil || f <= 0 || f > 10 {
					errorf("%s.properties.security-severity = %#v, want a string number in (0, 10]", p, ss)
				}
				severity[id] = s
				tags := arr(props["tags"], p+".properties.tags")
				if !containsAny(tags, "security") {
					errorf("%s: a rule with a security-severity must be tagged security", p)
				}
			}
		}
		for _, id := range securityRules {
			if _, listed := ruleIndex[id]; listed && severity[id] == "" {
				errorf("rule %s is a credential or hardening rule but has no security-severity", id)
			}
		}
		results := arr(run["results"], "results")
		if len(results) > 25000 {
			errorf("%d results, GitHub accepts at most 25,000", len(results))
		}
		fingerprints := map[string]bool{}
		for i, rv := range results {
			p := fmt.Sprintf("results[%d]", i)
			res := obj(rv, p)
			id := str(res["ruleId"], p+".ruleId")
			idx, known := ruleIndex[id]
			if !known {
				errorf("%s.ruleId %q is not a rule of the driver", p, id)
			}
			if v, ok := res["ruleIndex"]; ok && num(v, p+".ruleIndex") != idx {
				errorf("%s.ruleIndex = %v, want %d", p, v, idx)
			}
			if lv := str(res["level"], p+".level"); !levels[lv] {
				errorf("%s.level = %q", p, lv)
			}
			str(obj(res["message"], p+".message")["text"], p+".message.text")
			locs := arr(res["locations"], p+".locations")
			if len(locs) == 0 || len(locs) > 10 {
				errorf("%s: %d locations, want 1 to 10", p, len(locs))
			}
			for j, lv := range locs {
				lp := fmt.Sprintf("%s.locations[%d].physicalLocation", p, j)
				phys := obj(obj(lv, lp)["physicalLocation"], lp)
				uri := str(obj(phys["artifactLocation"], lp+".artifactLocation")["uri"], lp+".artifactLocation.uri")
				if strings.Contains(uri, `\`) || strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "./") || strings.Contains(uri, "://") {
					errorf("%s.artifactLocation.uri = %q, want a relative path with forward slashes", lp, uri)
				}
				region := obj(phys["region"], lp+".region")
				sl, sc := num(region["startLine"], lp+".region.startLine"), num(region["startColumn"], lp+".region.startColumn")
				el, ec := num(region["endLine"], lp+".region.endLine"), num(region["endColumn"], lp+".region.endColumn")
				if sl < 1 || sc < 1 || el < sl || ec < 1 || (el == sl && ec <= sc) {
					errorf("%s.region = %d:%d-%d:%d, not a region", lp, sl, sc, el, ec)
				}
			}
			fp := str(obj(res["partialFingerprints"], p+".partialFingerprints")["primaryLocationLineHash"],
				p+".partialFingerprints.primaryLocationLineHash")
			if !lineHash.MatchString(fp) {
				errorf("%s.partialFingerprints.primaryLocationLineHash = %q, want <16 hex>:<occurrence>", p, fp)
			}
			if fingerprints[fp] {
				errorf("%s: fingerprint %s repeats within the run", p, fp)
			}
			fingerprints[fp] = true
		}
	}
}

func containsAny(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// planSARIF plans dir (optionally with an organisation policy file) and renders the plan's SARIF the way
// `kewplan plan --format sarif` does.
func planSARIF(t *testing.T, dir, policy string) []byte {
	t.Helper()
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("config.Load(%s): %v", dir, diags)
	}
	vars, _ := cfg.ResolveVariables(config.VariableInputs{})
	in := planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)}
	files := []map[string][]byte{cfg.Files}
	if policy != "" {
		pol, polFiles, d := config.LoadPolicyFile(policy)
		if d.HasErrors() {
			t.Fatalf("LoadPolicyFile: %v", d)
		}
		in.Policy = pol
		files = append(files, polFiles)
	}
	p, _ := planner.Build(cfg, in)
	var buf bytes.Buffer
	// Ranges name configuration files relative to the configuration's directory; SARIF wants them relative to
	// the working directory (the repository root in CI), so the command maps them back with SourcePath.
	uri := func(name string) string {
		if _, ok := cfg.Files[name]; ok {
			name = filepath.ToSlash(cfg.SourcePath(name))
		}
		return SARIFRelativeURI(name)
	}
	if err := writePlanSARIF(&buf, jsonplan.NewDocument(p, "test", files...), SARIFOptions{KewplanVersion: "test", URI: uri}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPlanSARIF(t *testing.T) {
	out := planSARIF(t, filepath.Join("..", "planner", "testdata", "policy-violations"), "")
	checkSARIF(t, out)
	var log sarifLog
	if err := json.Unmarshal(out, &log); err != nil {
		t.Fatal(err)
	}
	run := log.Runs[0]
	if run.AutomationDetails.ID != sarifCategoryPlan {
		t.Errorf("automationDetails.id = %q, want %q", run.AutomationDetails.ID, sarifCategoryPlan)
	}
	// Every rule of the catalogue is described, whether or not it fired.
	var ids []string
	for _, r := range run.Tool.Driver.Rules {
		ids = append(ids, r.ID)
	}
	for _, r := range planner.Rules() {
		if !containsString(ids, r.ID) {
			t.Errorf("rule %s of the catalogue is missing from the SARIF driver", r.ID)
		}
	}
	var got []string
	for _, r := range run.Results {
		loc := r.Locations[0].PhysicalLocation
		got = append(got, fmt.Sprintf("%s %s %s:%d", r.Level, r.RuleID, loc.ArtifactLocation.URI, loc.Region.StartLine))
	}
	sort.Strings(got)
	want := []string{
		"error policy-allowed-image-prefixes ../planner/testdata/policy-violations/main.hcl:19",
		"error policy-allowed-networks ../planner/testdata/policy-violations/main.hcl:14",
		"error policy-credentials ../planner/testdata/policy-violations/main.hcl:26",
		"error policy-credentials ../planner/testdata/policy-violations/main.hcl:30",
		"error policy-credentials ../planner/testdata/policy-violations/main.hcl:44",
		"error policy-max-pids-limit ../planner/testdata/policy-violations/main.hcl:15",
		"error policy-require-pinned-images ../planner/testdata/policy-violations/main.hcl:19",
		"warning credentials-forwarded ../planner/testdata/policy-violations/main.hcl:14",
		"warning image-not-pinned ../planner/testdata/policy-violations/main.hcl:19",
		"warning open-network-credentials ../planner/testdata/policy-violations/main.hcl:14",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan SARIF results mismatch (-want +got):\n%s", diff)
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestSARIFFingerprintsSurviveLineMoves re-runs the analysis after lines were inserted above every finding and
// one was re-indented: the regions move, the fingerprints must not, or GitHub would open a duplicate alert for
// each.
func TestSARIFFingerprintsSurviveLineMoves(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "planner", "testdata", "policy-violations", "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	moved := append([]byte("# A comment the pull request added.\n\n#   and another.\n"),
		bytes.ReplaceAll(src, []byte("\n  network    ="), []byte("\n    network    ="))...)
	dir := t.TempDir()
	collect := func(log sarifLog) (fps []string, lines []int) {
		for _, r := range log.Runs[0].Results {
			fps = append(fps, r.RuleID+" "+r.PartialFingerprints["primaryLocationLineHash"])
			lines = append(lines, r.Locations[0].PhysicalLocation.Region.StartLine)
		}
		sort.Strings(fps)
		return fps, lines
	}
	before, linesBefore := collect(planSARIFAt(t, dir, src))
	after, linesAfter := collect(planSARIFAt(t, dir, moved))
	if len(before) == 0 {
		t.Fatal("no results to compare")
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("fingerprints changed when lines moved (-before +after):\n%s", diff)
	}
	if cmp.Equal(linesBefore, linesAfter) {
		t.Errorf("the edit should have moved the results' lines (%v)", linesBefore)
	}
}

// planSARIFAt writes src as dir/main.hcl and plans it, so two runs share their file names.
func planSARIFAt(t *testing.T, dir string, src []byte) sarifLog {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(planSARIF(t, dir, ""), &log); err != nil {
		t.Fatal(err)
	}
	return log
}

func TestSARIFDeterministic(t *testing.T) {
	dir := filepath.Join("..", "planner", "testdata", "policy-violations")
	first := planSARIF(t, dir, "")
	for i := 0; i < 3; i++ {
		if again := planSARIF(t, dir, ""); !bytes.Equal(first, again) {
			t.Fatalf("plan SARIF differs between runs")
		}
	}
}

func TestSARIFResultWithoutRange(t *testing.T) {
	doc := &jsonplan.Document{FormatVersion: "1.0", Diagnostics: jsonplan.Diagnostics{
		{Severity: "error", Summary: "Something broke", Detail: "Badly."},
		{Severity: "warning", Summary: "Unruled", Detail: "x", Rule: "no-such-rule"},
	}}
	var buf bytes.Buffer
	if err := writePlanSARIF(&buf, doc, SARIFOptions{DefaultURI: "examples/quickstart.hcl"}); err != nil {
		t.Fatal(err)
	}
	checkSARIF(t, buf.Bytes())
	var log sarifLog
	if err := json.Unmarshal(buf.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range log.Runs[0].Results {
		got = append(got, r.RuleID+" "+r.Locations[0].PhysicalLocation.ArtifactLocation.URI)
	}
	want := []string{"configuration-error examples/quickstart.hcl", "configuration-warning examples/quickstart.hcl"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
}

func TestSARIFRelativeURI(t *testing.T) {
	for in, want := range map[string]string{
		"main.hcl":             "main.hcl",
		"./examples/a b.hcl":   "examples/a%20b.hcl",
		"dir/über.hcl":         "dir/%C3%BCber.hcl",
		"examples/100%.hcl":    "examples/100%25.hcl",
		"examples/q?.hcl#frag": "examples/q%3F.hcl%23frag",
	} {
		if got := SARIFRelativeURI(in); got != want {
			t.Errorf("SARIFRelativeURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlanSARIFProviderFetch: a plan's SARIF run carries each node's provider-fetch features, as --json does.
func TestPlanSARIFProviderFetch(t *testing.T) {
	doc := &jsonplan.Document{FormatVersion: "1.0", Diagnostics: jsonplan.Diagnostics{}, Nodes: []jsonplan.NodeDocument{
		{Name: "fix", Credentials: []string{"ANTHROPIC_API_KEY"}, CredentialMode: "brokered", ProviderFetch: []string{"web_search"}},
		{Name: "lint", Credentials: []string{"ANTHROPIC_API_KEY"}, CredentialMode: "brokered"},
	}}
	var buf bytes.Buffer
	if err := writePlanSARIF(&buf, doc, SARIFOptions{DefaultURI: "main.hcl"}); err != nil {
		t.Fatal(err)
	}
	checkSARIF(t, buf.Bytes())
	var log sarifLog
	if err := json.Unmarshal(buf.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	if p := log.Runs[0].Properties; p == nil || !cmp.Equal(p.ProviderFetch, map[string][]string{"fix": {"web_search"}}) {
		t.Errorf("run properties %+v, want provider_fetch for fix only", p)
	}
}
