package statedir

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeName(t *testing.T) {
	for _, tc := range []struct{ address, slug, want string }{
		{"fix", "fix", "fix"},
		{`fix["api"]`, "fix-api", "fix-api"},
		{"plain", "", "plain"},
		// A ledger row knows only the address: the name is the slug the planner gave the instance.
		{`fix["api"]`, "", "fix-api"},
		{"shard[2]", "", "shard-2"},
	} {
		if got := NodeName(tc.address, tc.slug); got != tc.want {
			t.Errorf("NodeName(%q, %q) = %q, want %q", tc.address, tc.slug, got, tc.want)
		}
	}
	// A hostile key or slug still gives one plain component, distinct per address.
	names := map[string]string{}
	for _, tc := range []struct{ address, slug string }{{`fix["../x"]`, ""}, {`fix["x"]`, "../x"}, {`fix[`, ""}, {`fix["a/b"]`, "."}} {
		got := NodeName(tc.address, tc.slug)
		if !safeComponent(got) || strings.Contains(got, "/") {
			t.Errorf("NodeName(%q, %q) = %q: not one plain component", tc.address, tc.slug, got)
		}
		if prev, ok := names[got]; ok {
			t.Errorf("%q and %q share the name %q", prev, tc.address, got)
		}
		names[got] = tc.address
	}
}

// Every path is under the root, and attempts after the first sit beside the first.
func TestLayout(t *testing.T) {
	d, err := New("state")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(d.Root) {
		t.Fatalf("root %q is not absolute", d.Root)
	}
	out, errLog := d.Logs("RUN", `fix["api"]`, "", 2)
	for _, p := range []string{d.Ledger(), d.Lock(), d.Checkout("RUN", "fix", "fix", 1), out, errLog, d.Verdict("RUN", "review", "review"), d.Broker(), d.ProxyState("RUN"), d.EgressImageCache(), d.Receipt("RUN")} {
		if rel, err := filepath.Rel(d.Root, p); err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s is outside the state directory %s", p, d.Root)
		}
	}
	if want := filepath.Join(d.Root, "logs", "RUN", "fix-api.a2.stdout.log"); out != want {
		t.Errorf("Logs = %s, want %s", out, want)
	}
	if got, want := d.Checkout("RUN", "fix", "fix", 3), filepath.Join(d.Root, "checkouts", "RUN", "fix.a3"); got != want {
		t.Errorf("Checkout = %s, want %s", got, want)
	}
	if d, _ := New(""); filepath.Base(d.Root) != DefaultName {
		t.Errorf(`New("") = %s, want the default name`, d.Root)
	}
}
