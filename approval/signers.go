package approval

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kewplan/kewplan/internal/safefile"
)

// MaxSignersBytes bounds an allowed signers file: a line per person.
const MaxSignersBytes = 1 << 20

// Signer is one line of an allowed signers file: who (Principals, as written) holds Key, for which namespaces and
// when.
type Signer struct {
	Principals string
	Key        ssh.PublicKey
	// Namespaces is the namespaces="..." pattern list, nil when the line allows every namespace.
	Namespaces []string
	// ValidAfter and ValidBefore bound when the key may sign; zero when not written.
	ValidAfter, ValidBefore time.Time
	Line                    int
}

// AllowedSigners is a parsed allowed signers file.
type AllowedSigners struct {
	Path    string
	Signers []Signer
}

// ReadAllowedSigners reads and parses an allowed signers file (a regular file, not followed through a link).
func ReadAllowedSigners(name string) (*AllowedSigners, error) {
	b, err := safefile.Read(name, MaxSignersBytes)
	if err != nil {
		return nil, fmt.Errorf("allowed signers file: %w", err)
	}
	return ParseAllowedSigners(b, name)
}

// ParseAllowedSigners parses git's allowed signers format (ssh-keygen(1), ALLOWED SIGNERS): one key a line as
// `principals [options] keytype base64-key [comment]`, '#' comments and blank lines ignored. The options
// namespaces="…", valid-after="…" and valid-before="…" are honoured; cert-authority is refused (kewplan checks
// each approver's own key, not certificates), as is any option it does not know, so that a line never means less
// than its author wrote.
func ParseAllowedSigners(b []byte, name string) (*AllowedSigners, error) {
	out := &AllowedSigners{Path: name}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxSignersBytes)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSignerLine(line)
		if err != nil {
			return nil, fmt.Errorf("allowed signers file %s:%d: %w", name, n, err)
		}
		s.Line = n
		out.Signers = append(out.Signers, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("allowed signers file %s: %w", name, err)
	}
	if len(out.Signers) == 0 {
		return nil, fmt.Errorf("allowed signers file %s lists no key: write one line per approver, `name@example.com ssh-ed25519 AAAA…`", name)
	}
	return out, nil
}

func parseSignerLine(line string) (Signer, error) {
	var s Signer
	principals, rest, err := firstField(line)
	if err != nil {
		return s, err
	}
	s.Principals = principals
	key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return s, fmt.Errorf("no public key after the principals %q: write `principals [options] keytype base64-key`", principals)
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return s, errors.New("a certificate is not an approver's key: list the key itself")
	}
	s.Key = key
	for _, o := range options {
		name, value, hasValue := strings.Cut(o, "=")
		name = strings.ToLower(name)
		if hasValue {
			value = strings.Trim(value, `"`)
		}
		switch {
		case name == "cert-authority":
			return s, errors.New("cert-authority is not supported: kewplan checks each approver's own key, so list every approver's public key on a line of its own")
		case name == "namespaces" && hasValue:
			s.Namespaces = strings.Split(value, ",")
		case (name == "valid-after" || name == "valid-before") && hasValue:
			t, err := parseSignerTime(value)
			if err != nil {
				return s, fmt.Errorf("%s=%q: %w", name, value, err)
			}
			if name == "valid-after" {
				s.ValidAfter = t
			} else {
				s.ValidBefore = t
			}
		default:
			return s, fmt.Errorf("the option %q is not one kewplan knows (namespaces, valid-after, valid-before)", o)
		}
	}
	return s, nil
}

// firstField splits off the principals: a word, or a double-quoted string.
func firstField(line string) (string, string, error) {
	if strings.HasPrefix(line, `"`) {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return "", "", errors.New("the principals' opening quote is never closed")
		}
		return line[1 : end+1], strings.TrimSpace(line[end+2:]), nil
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", errors.New("a principal alone, with no key: write `principals [options] keytype base64-key`")
	}
	return line[:i], strings.TrimSpace(line[i:]), nil
}

// parseSignerTime reads ssh-keygen's timestamps: YYYYMMDD or YYYYMMDDHHMM[SS], local time unless ending in Z.
func parseSignerTime(v string) (time.Time, error) {
	loc := time.Local
	if strings.HasSuffix(v, "Z") || strings.HasSuffix(v, "z") {
		v, loc = v[:len(v)-1], time.UTC
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(v)]
	if !ok {
		return time.Time{}, errors.New("not a timestamp: write YYYYMMDD or YYYYMMDDHHMM[SS], with Z for UTC")
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, errors.New("not a timestamp: write YYYYMMDD or YYYYMMDDHHMM[SS], with Z for UTC")
	}
	return t, nil
}

// Lookup returns the lines listing key.
func (a *AllowedSigners) Lookup(key ssh.PublicKey) []Signer {
	want := key.Marshal()
	var out []Signer
	for _, s := range a.Signers {
		if bytes.Equal(s.Key.Marshal(), want) {
			out = append(out, s)
		}
	}
	return out
}

// allows says why s may not sign in namespace at now, or "" when it may.
func (s Signer) allows(namespace string, now time.Time) string {
	if s.Namespaces != nil && !matchPatternList(namespace, s.Namespaces) {
		return fmt.Sprintf("line %d of the allowed signers file limits %s to the namespaces %q, which does not include %s",
			s.Line, s.Principals, strings.Join(s.Namespaces, ","), namespace)
	}
	if !s.ValidAfter.IsZero() && now.Before(s.ValidAfter) {
		return fmt.Sprintf("the key of %s is valid only after %s (valid-after on line %d of the allowed signers file)",
			s.Principals, s.ValidAfter.Format(time.RFC3339), s.Line)
	}
	if !s.ValidBefore.IsZero() && !now.Before(s.ValidBefore) {
		return fmt.Sprintf("the key of %s expired at %s (valid-before on line %d of the allowed signers file)",
			s.Principals, s.ValidBefore.Format(time.RFC3339), s.Line)
	}
	return ""
}

// matchPatternList is OpenSSH's pattern-list match: comma-separated globs (* and ?), a leading ! negating; a
// negated match refuses whatever else matches.
func matchPatternList(s string, patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		// path.Match treats '[' and '\\' specially; OpenSSH does not, so they are escaped to match themselves.
		p = strings.NewReplacer(`\`, `\\`, "[", `\[`).Replace(p)
		if ok, _ := path.Match(p, s); ok {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}
