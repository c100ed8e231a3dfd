// Package statedir is the one description of a state directory's layout: where the run ledger, the apply lock,
// each node's checkout, logs, verdict copy and salvage, each run's receipt, the broker's scratch repositories, the
// egress proxy's broker state and its image cache live. Apply, `runs`, `logs`, `--resume` and the sweeps all take
// their paths from a Dir; no other package joins a path under a state directory. It creates and reads nothing
// itself.
package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/kewplan/kewplan/config"
)

// DefaultName is the state directory's name beside the configuration.
const DefaultName = ".kewplan"

// Dir is a state directory: Root and everything under it.
type Dir struct {
	Root string
}

// New returns the state directory at root ("" means DefaultName in the current directory), made absolute so that
// the paths it gives stay valid when the process changes directory; the error is filepath.Abs's.
func New(root string) (Dir, error) {
	if root == "" {
		root = DefaultName
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Dir{}, fmt.Errorf("state directory %s: %w", root, err)
	}
	return Dir{Root: abs}, nil
}

// Beside is the default state directory of a configuration in dir.
func Beside(dir string) string { return filepath.Join(dir, DefaultName) }

// Ledger is the SQLite run ledger.
func (d Dir) Ledger() string { return filepath.Join(d.Root, "dispatch.db") }

// Lock is the file apply holds an exclusive flock on for its whole run.
func (d Dir) Lock() string { return filepath.Join(d.Root, "apply.lock") }

// Checkouts holds every run's checkouts, one directory per run.
func (d Dir) Checkouts() string { return filepath.Join(d.Root, "checkouts") }

// RunCheckouts holds one run's checkouts.
func (d Dir) RunCheckouts(run string) string { return filepath.Join(d.Checkouts(), run) }

// Checkout is the checkout of one attempt of a node: its path name for the first attempt, NAME.aN beside it for
// the later ones.
func (d Dir) Checkout(run, node, slug string, attempt int) string {
	return filepath.Join(d.RunCheckouts(run), NodeName(node, slug)+AttemptSuffix(attempt))
}

// RunLogs holds one run's logs.
func (d Dir) RunLogs(run string) string { return filepath.Join(d.Root, "logs", run) }

// Logs are the stdout and stderr logs of one attempt of a node.
func (d Dir) Logs(run, node, slug string, attempt int) (stdout, stderr string) {
	base := filepath.Join(d.RunLogs(run), NodeName(node, slug)+AttemptSuffix(attempt))
	return base + ".stdout.log", base + ".stderr.log"
}

// Verdict is where a reviewer's verdict sidecar is copied once its container is gone.
func (d Dir) Verdict(run, node, slug string) string {
	return filepath.Join(d.Root, "verdicts", run, NodeName(node, slug))
}

// SalvageRuns holds the salvage of every run, one directory per run.
func (d Dir) SalvageRuns() string { return filepath.Join(d.Root, "salvage") }

// RunSalvage holds one run's salvage, one directory per node.
func (d Dir) RunSalvage(run string) string { return filepath.Join(d.SalvageRuns(), run) }

// Salvage is where the work of a worker that ended without its push is kept (a bundle of its commits, a patch
// of its uncommitted changes), beside its logs.
func (d Dir) Salvage(run, node, slug string) string {
	return filepath.Join(d.RunSalvage(run), NodeName(node, slug))
}

// Broker is the host-owned scratch space in which the broker publishes a worker's commits.
func (d Dir) Broker() string { return filepath.Join(d.Root, "broker") }

// ProxyState is where a run's egress proxy keeps its credential broker's state (meters, attempts, ended nodes;
// never a secret): the one directory mounted into the proxy's container, so that a proxy started again after a
// death goes on from it. Apply removes it when the run ends.
func (d Dir) ProxyState(run string) string { return filepath.Join(d.Broker(), "egress-"+run) }

// ProxyStates is the glob pattern of every run's ProxyState, for the sweep of what dead applies left.
func (d Dir) ProxyStates() string { return filepath.Join(d.Broker(), "egress-*") }

// Receipt is the receipt of one run (kewplan apply writes it when the run ends, the next command when its apply
// died; its signature, when signed, is beside it with the suffix .sig).
func (d Dir) Receipt(run string) string { return filepath.Join(d.Root, "receipts", run+".json") }

// StartReceipt is the receipt apply writes as the run starts, before any node runs (signed like the final one);
// the receipt of a run whose apply died is made from it.
func (d Dir) StartReceipt(run string) string {
	return filepath.Join(d.Root, "receipts", run+".start.json")
}

// EgressImageCache remembers the egress proxy image's tag for the binary that built it.
func (d Dir) EgressImageCache() string { return filepath.Join(d.Root, "egress-image.json") }

// AttemptSuffix names an attempt's logs and checkout: attempt 1 (and 0, "the node's") keeps the node's own names.
func AttemptSuffix(attempt int) string {
	if attempt <= 1 {
		return ""
	}
	return fmt.Sprintf(".a%d", attempt)
}

// NodeName is the one file-name component a node's paths are made of. It is the node's slug ([a-z0-9_-], unique
// in a plan) when slug is a plain file name, else the slug derived from its address (config.InstanceSlug, so
// `logs` finds from a ledger row's address what apply wrote from the plan's slug), never the address itself: an
// instance address such as fix["../x"] holds quotes, brackets, slashes and dots. An address that names no
// instance gets a name hashed from it, so no path ever leaves the state directory.
func NodeName(address, slug string) string {
	if safeComponent(slug) {
		return slug
	}
	if name, key, err := config.ParseInstanceAddress(address); err == nil {
		if s := config.InstanceSlug(name, key); safeComponent(s) {
			return s
		}
	}
	sum := sha256.Sum256([]byte(address))
	return "node-" + hex.EncodeToString(sum[:8])
}

// safeComponent reports whether s is one plain file name: [A-Za-z0-9_.-], at most 200 bytes, not "." or "..".
func safeComponent(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
