package executor

import (
	"fmt"
	"io"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/redact"
	"github.com/kewplan/kewplan/planner"
)

// minSecretBytes is the shortest credential value that is masked. A shorter value is no secret worth the name,
// and masking it would rewrite ordinary text (a JSON key, a number) all through a node's stream, which would no
// longer re-meter to the same totals. Preflight says so for every such value (shortCredentialWarnings).
const minSecretBytes = 6

// secretValues are the values of the named credentials forwarded to a node, those long enough to mask.
func (a *applier) secretValues(names []string) []string {
	var out []string
	for _, name := range names {
		if v := a.env[name]; len(v) >= minSecretBytes {
			out = append(out, v)
		}
	}
	return out
}

// nodeMasker masks, in what a node's agent prints, every value it holds: its credentials' values and the run's
// secrets the engine registered (its egress proxy's, which HTTPS_PROXY carries), with their encodings.
func (a *applier) nodeMasker(names []string) *redact.Masker {
	secrets := a.secretValues(names)
	a.secrets.mu.Lock()
	secrets = append(secrets, a.secrets.values...)
	a.secrets.mu.Unlock()
	return redact.New(secrets...)
}

// maskString replaces each named credential's value, and its encodings, with "[redacted NAME]".
func (a *applier) maskString(s string, names []string) string {
	for _, name := range names {
		v := a.env[name]
		if len(v) < minSecretBytes {
			continue
		}
		if m := redact.String(s, []string{v}); m != s {
			s = strings.ReplaceAll(m, redact.Mask, "[redacted "+name+"]")
		}
	}
	return s
}

// nodeCredentials are the credential names forwarded to the named node ("" or an unknown name: none).
func (a *applier) nodeCredentials(node string) []string {
	if node == "" || a.opts.Plan == nil {
		return nil
	}
	for _, np := range a.opts.Plan.Nodes {
		if np.Name == node {
			return np.Credentials
		}
	}
	return nil
}

// maskedLogs wraps a node's stdout and stderr log files so that every value the node holds (nodeMasker) is
// masked as it is written, in every spelling a reader of the log could decode; every other byte is stored as
// the agent wrote it, so that the stored stream re-meters to the live totals. flush writes what the writers hold
// back; call it once the container's streams are drained and before the files are closed.
func (a *applier) maskedLogs(names []string, stdout, stderr io.Writer) (mout, merr io.Writer, flush func() error) {
	m := a.nodeMasker(names)
	o, e := m.Writer(stdout), m.Writer(stderr)
	return o, e, func() error {
		err := o.Close()
		if eerr := e.Close(); err == nil {
			err = eerr
		}
		return err
	}
}

// shortCredentialWarnings are preflight's warnings, one per node and credential, for a value set in kewplan's
// environment but shorter than minSecretBytes: it is forwarded to the agent and never masked in its logs, its
// transcript or the ledger (rule planner.RuleCredentialTooShortToMask). A brokered node's values never enter its
// container (it holds placeholders; the proxy adds the values on the way out), so there is nothing to warn of.
func (a *applier) shortCredentialWarnings() []string {
	if a.opts.Plan == nil {
		return nil
	}
	var out []string
	for _, np := range a.opts.Plan.Nodes {
		if np.CredentialMode == config.CredentialsBrokered {
			continue
		}
		for _, name := range np.Credentials {
			if v := a.env[name]; v != "" && len(v) < minSecretBytes {
				out = append(out, fmt.Sprintf("%s: node %q: the value of %s is %d bytes, shorter than the %d kewplan masks, so it is forwarded to the agent and shown in clear wherever the agent prints it (logs, transcript, ledger); use a real credential, or unset it",
					planner.RuleCredentialTooShortToMask, np.Name, name, len(v), minSecretBytes))
			}
		}
	}
	return out
}
