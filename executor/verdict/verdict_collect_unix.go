//go:build unix

package verdict

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/executor/hostilefs"
	"github.com/kewplan/kewplan/planner"
)

func collectVerdict(checkout, storeDir string) (*Verdict, error) {
	name := planner.VerdictFilename
	root, err := hostilefs.OpenRoot(checkout)
	if err != nil {
		return nil, &Error{Location: name, Err: err,
			Reason: fmt.Sprintf("cannot open the checkout to read %s: %v", name, err)}
	}
	defer root.Close()

	loc, recovered := name, false
	if _, err := root.Lstat(name); err != nil {
		if !hostilefs.IsNotExist(err) {
			return nil, &Error{Location: loc, Err: err, Reason: fmt.Sprintf("cannot inspect %s: %v", name, err)}
		}
		found, truncated, err := searchVerdict(root, name, verdictSearchDepth, verdictSearchEntries)
		if err != nil {
			return nil, &Error{Location: loc, Err: err,
				Reason: fmt.Sprintf("no %s at the checkout root, and searching subdirectories failed: %v", name, err)}
		}
		switch len(found) {
		case 0:
			reason := fmt.Sprintf("the reviewer wrote no %s at the checkout root or in any subdirectory; only that "+
				"file carries a verdict (never the agent's output), and it must be written to %s", name, planner.VerdictMountPath)
			if truncated {
				reason += fmt.Sprintf(" (the subdirectory search stopped after %d entries)", verdictSearchEntries)
			}
			return nil, &Error{Location: loc, Err: ErrNoVerdict, Reason: reason}
		case 1:
			loc, recovered = found[0], true
		default:
			return nil, &Error{Location: found[0], Recovered: true, Err: ErrRefused,
				Reason: fmt.Sprintf("no %s at the checkout root, and %d candidates in subdirectories (%s); the verdict is "+
					"ambiguous, so none is used", name, len(found), strings.Join(found, ", "))}
		}
	}

	data, err := readVerdictSidecar(root, loc)
	if err != nil {
		ve := &Error{Location: loc, Recovered: recovered, Err: err, Reason: err.Error()}
		var hfe *hostilefs.FileError
		if errors.As(err, &hfe) {
			ve.Err = ErrRefused
			ve.Reason = fmt.Sprintf("%s; a reviewer must write a plain regular file at %s (links, pipes, "+
				"directories and files over %d bytes are never read)", hfe.Error(), planner.VerdictMountPath, MaxBytes)
		}
		return nil, ve
	}

	stored, err := storeVerdictBytes(storeDir, data)
	if err != nil {
		return nil, &Error{Location: loc, Recovered: recovered, Err: err, Reason: err.Error()}
	}
	v, err := decodeVerdict(data)
	if err != nil {
		ve := &Error{Location: loc, Recovered: recovered, StoredPath: stored, SHA256: verdictDigest(data),
			Err: ErrUnparseable, Reason: fmt.Sprintf("%s:%v (the refused bytes are kept at %s)", loc, err, stored)}
		return nil, ve
	}
	v.Location = loc
	v.Recovered = recovered
	v.StoredPath = stored
	return v, nil
}

// readVerdictSidecar reads the sidecar at a checkout-relative location, refusing links at every component, any
// file type but regular, a hard-linked inode, and anything over MaxBytes.
func readVerdictSidecar(root *hostilefs.Dir, loc string) ([]byte, error) {
	dir := root
	base := loc
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		d, err := root.OpenPath(loc[:i])
		if err != nil {
			return nil, err
		}
		defer d.Close()
		dir, base = d, loc[i+1:]
	}
	f, st, err := dir.OpenRegular(base)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Nlink != 1 {
		return nil, &hostilefs.FileError{Rel: loc, Reason: fmt.Sprintf("has %d hard links, so its inode is shared with "+
			"another path that may lie outside the checkout", st.Nlink)}
	}
	return hostilefs.ReadAtMost(f, st, MaxBytes, loc)
}

// searchVerdict looks for name in subdirectories of root, breadth first, at most maxDepth levels deep and
// maxEntries entries in all. It never descends into a link, a .git directory or another filesystem. It
// reports every candidate (of any file type) so that the caller can refuse ambiguity, and whether it stopped early.
func searchVerdict(root *hostilefs.Dir, name string, maxDepth, maxEntries int) (found []string, truncated bool, err error) {
	budget := maxEntries
	level := []string{"."}
	for depth := 0; depth <= maxDepth && len(level) > 0; depth++ {
		var next []string
		for _, rel := range level {
			dir := root
			if rel != "." {
				d, err := root.OpenPath(rel)
				if err != nil {
					var hfe *hostilefs.FileError
					if errors.As(err, &hfe) || hostilefs.IsNotExist(err) {
						continue // a directory swapped for a link or removed: not descended into
					}
					return nil, false, err
				}
				dir = d
			}
			names, more, err := dir.ReadNames(budget)
			if err != nil {
				if dir != root {
					dir.Close()
				}
				return nil, false, err
			}
			budget -= len(names)
			for _, n := range names {
				if n == name {
					if depth > 0 {
						found = append(found, dir.Join(n))
					}
					continue
				}
				if n == ".git" || depth == maxDepth {
					continue
				}
				st, err := dir.Lstat(n)
				if err != nil || !st.IsDir() || st.Dev != root.Dev() {
					continue
				}
				next = append(next, dir.Join(n))
			}
			if dir != root {
				dir.Close()
			}
			if more || budget <= 0 {
				return found, true, nil
			}
		}
		level = next
	}
	return found, false, nil
}

func removePlantedVerdicts(checkout string) ([]string, error) {
	name := planner.VerdictFilename
	root, err := hostilefs.OpenRoot(checkout)
	if err != nil {
		return nil, fmt.Errorf("remove planted verdicts: %w", err)
	}
	defer root.Close()
	found, _, err := searchVerdict(root, name, verdictSearchDepth, verdictSearchEntries)
	if err != nil {
		return nil, fmt.Errorf("remove planted verdicts: %w", err)
	}
	if _, err := root.Lstat(name); err == nil {
		found = append([]string{name}, found...)
	} else if !hostilefs.IsNotExist(err) {
		return nil, fmt.Errorf("remove planted verdicts: %w", err)
	}
	var removed []string
	for _, loc := range found {
		dir, base := root, loc
		if i := strings.LastIndexByte(loc, '/'); i >= 0 {
			d, err := root.OpenPath(loc[:i])
			if err != nil {
				return removed, fmt.Errorf("remove planted verdict %s: %w", loc, err)
			}
			dir, base = d, loc[i+1:]
		}
		err := func() error {
			if dir != root {
				defer dir.Close()
			}
			st, err := dir.Lstat(base)
			if err != nil {
				return err
			}
			if st.IsDir() {
				return fmt.Errorf("%s is a directory; a reviewer's verdict could not be written there, so the "+
					"checkout is refused", loc)
			}
			return dir.Unlink(base)
		}()
		if err != nil {
			return removed, fmt.Errorf("remove planted verdict %s: %w", loc, err)
		}
		removed = append(removed, loc)
	}
	return removed, nil
}
