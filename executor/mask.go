package executor

import (
	"io"
	"strings"

	"github.com/kewplan/kewplan/internal/redact"
)

// minSecretBytes is the shortest credential value that is masked. A shorter value is no secret worth the name,
// and masking it would rewrite ordinary text (a JSON key, a number) all through a node's stream, which would no
// longer re-meter to the same totals.
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

// maskString replaces each named credential's value, and its base64, URL-encoded and JSON-escaped forms, with
// "[redacted NAME]".
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

// maskedLogs wraps a node's stdout and stderr log files so that the value of every credential forwarded to it
// (and its encodings) is masked as it is written; every other byte is stored as the agent wrote it, so that the
// stored stream re-meters to the live totals. flush writes what the writers hold back; call it once the
// container's streams are drained and before the files are closed.
func (a *applier) maskedLogs(names []string, stdout, stderr io.Writer) (mout, merr io.Writer, flush func() error) {
	secrets := a.secretValues(names)
	o, e := redact.NewWriter(stdout, secrets), redact.NewWriter(stderr, secrets)
	return o, e, func() error {
		err := o.Close()
		if eerr := e.Close(); err == nil {
			err = eerr
		}
		return err
	}
}
