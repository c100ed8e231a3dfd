//go:build unix

package broker

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/executor/hostilefs"
)

// The checkout's HEAD is resolved here, by reading .git/HEAD, a loose ref or packed-refs as plain files, instead of
// asking git inside the checkout: any git command run there would read the agent's .git/config first.

const (
	maxRefFileBytes    = 4096
	maxPackedRefsBytes = 64 << 20
)

// openGitDir opens the checkout's .git, which must be a real directory: a .git file is a gitdir pointer to some
// other repository, and a link could point anywhere on the host.
func openGitDir(root *hostilefs.Dir) (*hostilefs.Dir, error) {
	st, err := root.Lstat(".git")
	if err != nil {
		if hostilefs.IsNotExist(err) {
			return nil, errors.New("the checkout has no .git directory")
		}
		return nil, err
	}
	switch {
	case st.IsRegular():
		return nil, errors.New(".git in the checkout is a file (a gitdir pointer to another repository); it is refused " +
			"because following it would let the agent choose which repository the host reads")
	case !st.IsDir():
		return nil, fmt.Errorf(".git in the checkout is %s; it must be the checkout's own directory", st.Kind())
	}
	gd, err := root.OpenDir(".git")
	if err != nil {
		return nil, err
	}
	// A linked worktree's .git directory shares another repository's objects through commondir.
	if _, err := gd.Lstat("commondir"); err == nil {
		gd.Close()
		return nil, errors.New(".git/commondir exists: the checkout borrows another repository's objects and refs, " +
			"which the host never reads on its behalf")
	}
	return gd, nil
}

// readCheckoutHead returns the 40-hex commit the checkout's HEAD names.
func readCheckoutHead(gitDir *hostilefs.Dir) (string, error) {
	data, _, err := gitDir.ReadRegular("HEAD", maxRefFileBytes)
	if err != nil {
		return "", fmt.Errorf("read .git/HEAD: %w", err)
	}
	content := strings.TrimSuffix(string(data), "\n")
	if isObjectID(content) {
		return content, nil // detached HEAD
	}
	ref, ok := strings.CutPrefix(content, "ref: ")
	if !ok {
		return "", fmt.Errorf(".git/HEAD holds neither a commit id nor \"ref: <name>\" (%d bytes)", len(data))
	}
	if err := checkRefName(ref); err != nil {
		return "", fmt.Errorf(".git/HEAD: %w", err)
	}
	if ref == "refs/heads/.invalid" {
		return "", errors.New(".git/HEAD points at refs/heads/.invalid: the checkout uses the reftable format, which " +
			"the host broker does not read")
	}
	id, err := readRef(gitDir, ref)
	if err != nil {
		return "", err
	}
	return id, nil
}

// readRef resolves a ref through its loose file, else packed-refs. A missing ref means HEAD is unborn.
func readRef(gitDir *hostilefs.Dir, ref string) (string, error) {
	parts := strings.Split(ref, "/")
	dir, err := gitDir.OpenPath(strings.Join(parts[:len(parts)-1], "/"))
	if err == nil {
		data, _, rerr := dir.ReadRegular(parts[len(parts)-1], maxRefFileBytes)
		dir.Close()
		switch {
		case rerr == nil:
			content := strings.TrimSuffix(string(data), "\n")
			if strings.HasPrefix(content, "ref: ") {
				return "", fmt.Errorf("%s is itself a symbolic ref; HEAD must name a branch holding a commit id", ref)
			}
			if !isObjectID(content) {
				return "", fmt.Errorf(".git/%s does not hold a 40-hex commit id", ref)
			}
			return content, nil
		case !hostilefs.IsNotExist(rerr):
			return "", fmt.Errorf("read .git/%s: %w", ref, rerr)
		}
	} else if !hostilefs.IsNotExist(err) {
		return "", fmt.Errorf("read .git/%s: %w", ref, err)
	}
	data, _, err := gitDir.ReadRegular("packed-refs", maxPackedRefsBytes)
	if err != nil {
		if hostilefs.IsNotExist(err) {
			return "", fmt.Errorf("HEAD names %s, which has no commit (an unborn branch)", ref)
		}
		return "", fmt.Errorf("read .git/packed-refs: %w", err)
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		id, name, ok := bytes.Cut(line, []byte(" "))
		if !ok || string(name) != ref {
			continue
		}
		if !isObjectID(string(id)) {
			return "", fmt.Errorf(".git/packed-refs: %s does not have a 40-hex commit id", ref)
		}
		return string(id), nil
	}
	return "", fmt.Errorf("HEAD names %s, which has no commit (an unborn branch)", ref)
}

// isObjectID reports whether s is a full lowercase SHA-1 object id.
func isObjectID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkRefName applies git's check-ref-format rules to a full ref name under refs/, so that each component can
// also be opened as a plain file name.
func checkRefName(ref string) error {
	bad := func(why string) error { return fmt.Errorf("ref name %q is not valid: %s", ref, why) }
	if !strings.HasPrefix(ref, "refs/") {
		return bad("it must start with refs/")
	}
	if len(ref) > 1024 {
		return bad("it is longer than 1024 bytes")
	}
	if strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") {
		return bad(`it contains "..", "@{" or "//"`)
	}
	if strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") {
		return bad(`it ends with "/" or "."`)
	}
	for _, comp := range strings.Split(ref, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return bad(`a component is empty, starts with "." or ends with ".lock"`)
		}
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return bad("it contains a space, a control character or one of ~^:?*[\\")
		}
	}
	return nil
}
