//go:build unix

package broker

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kewplan/kewplan/executor/hostilefs"
	"github.com/kewplan/kewplan/planner"
)

// The uncommitted changes, as a commit the host builds. The agent's HEAD tree is the starting point; the walk of
// the checkout (through hostilefs: one component at a time, no link followed, nothing opened that fstatat did not
// call a regular file) replaces each regular file's blob, drops what is gone, and leaves the HEAD's entry as it
// was wherever the walk could not or would not look: a link, a FIFO, a socket or a device, a file over the bound,
// a directory on another filesystem, a submodule. Blobs, trees and the commit are written by the host as loose
// objects of its own repository; nothing is ever checked out or run.

type treeEntry struct {
	mode string // git's octal mode: 100644, 100755, 120000, 160000
	id   string
}

type worktreeWalk struct {
	s       *salvager
	head    map[string]treeEntry // the HEAD tree, by path
	files   map[string]treeEntry // what the walk found
	keep    map[string]bool      // paths (files or directories) whose HEAD entries stand
	written int64                // bytes of new blobs
	entries int                  // directory entries left to walk
}

func (s *salvager) commitWorktree(ctx context.Context) error {
	head, err := s.headTree(ctx)
	if err != nil {
		return err
	}
	root, err := hostilefs.OpenRoot(s.req.Checkout)
	if err != nil {
		return err
	}
	defer root.Close()
	w := &worktreeWalk{s: s, head: head, files: map[string]treeEntry{}, keep: map[string]bool{}, entries: s.req.MaxEntries}
	if err := w.walk(ctx, root, ""); err != nil {
		return err
	}
	for p, e := range head {
		if _, ok := w.files[p]; !ok && w.kept(p) {
			w.files[p] = e
		}
	}
	tree, err := s.writeTree(w.files)
	if err != nil {
		return err
	}
	headTree, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "rev-parse", "--verify", s.res.Head+"^{tree}")
	if err != nil {
		return err
	}
	if tree == strings.TrimSpace(string(headTree)) {
		return nil // no uncommitted change
	}
	now := time.Now().Unix()
	ident := fmt.Sprintf("%s %d +0000", salvageIdentity, now)
	msg := salvageWorktreeCommitPrefix + "\n"
	if s.req.Message != "" {
		msg += "\n" + strings.TrimSpace(s.req.Message) + "\n"
	}
	commit := fmt.Sprintf("tree %s\nparent %s\nauthor %s\ncommitter %s\n\n%s", tree, s.res.Head, ident, ident, msg)
	id, err := s.writeObject("commit", []byte(commit))
	if err != nil {
		return err
	}
	out, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "diff-tree", "-r", "-z", "--name-only", "--no-renames", s.res.Head, id)
	if err != nil {
		return fmt.Errorf("count the changed files: %w", err)
	}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			s.res.FilesChanged++
		}
	}
	s.res.Worktree = id
	return nil
}

// headTree lists the HEAD's tree: every blob, link and submodule by path.
func (s *salvager) headTree(ctx context.Context) (map[string]treeEntry, error) {
	out, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "ls-tree", "-r", "-z", "--full-tree", s.res.Head)
	if err != nil {
		return nil, fmt.Errorf("list the tree of %s: %w", s.res.Head, err)
	}
	entries := map[string]treeEntry{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 3 {
			return nil, fmt.Errorf("unexpected ls-tree line %q", meta)
		}
		entries[p] = treeEntry{mode: f[0], id: f[2]}
	}
	return entries, nil
}

// kept reports whether p or a directory above it is one whose HEAD entries stand.
func (w *worktreeWalk) kept(p string) bool {
	for {
		if w.keep[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func (w *worktreeWalk) skip(rel, why string) {
	w.keep[rel] = true
	if len(w.s.res.Skipped) < maxSalvageSkippedListed {
		w.s.res.Skipped = append(w.s.res.Skipped, rel+": "+why)
	} else {
		w.s.res.SkippedMore++
	}
}

// hostOwnedName is a file the host writes into a checkout and never keeps: the prompt and the verdict sidecar
// (any case, as refusePlantedFiles compares them), and a nested .git.
func hostOwnedName(name string) bool {
	return strings.EqualFold(name, planner.PromptFilename) || strings.EqualFold(name, planner.VerdictFilename) ||
		strings.EqualFold(name, ".git")
}

func (w *worktreeWalk) walk(ctx context.Context, d *hostilefs.Dir, prefix string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	names, more, err := d.ReadNames(w.entries)
	if err != nil {
		w.skip(strings.TrimSuffix(prefix, "/"), "could not be listed: "+err.Error())
		return nil
	}
	w.entries -= len(names)
	if more {
		// What was not listed cannot be told from what is gone: the HEAD's entries below stand.
		w.skip(strings.TrimSuffix(prefix, "/"), fmt.Sprintf("the walk stopped after %d directory entries", w.s.req.MaxEntries))
	}
	sort.Strings(names)
	for _, name := range names {
		rel := prefix + name
		if hostOwnedName(name) {
			if prefix != "" && strings.EqualFold(name, ".git") {
				w.skip(rel, "a nested .git is never kept")
			}
			continue
		}
		if e, ok := w.head[rel]; ok && e.mode == "160000" {
			w.keep[rel] = true // a submodule: its commit stands
			continue
		}
		st, err := d.Lstat(name)
		if err != nil {
			w.skip(rel, err.Error())
			continue
		}
		switch {
		case st.IsDir():
			sub, err := d.OpenDir(name)
			if err != nil {
				w.skip(rel, "not read: "+err.Error())
				continue
			}
			err = w.walk(ctx, sub, rel+"/")
			sub.Close()
			if err != nil {
				return err
			}
		case st.IsRegular():
			if err := w.file(d, name, rel, st); err != nil {
				return err
			}
		default:
			if e, ok := w.head[rel]; ok && e.mode == "120000" && st.Mode&0o170000 == 0o120000 {
				w.keep[rel] = true // the repository's own link: never followed, its committed target stands
				continue
			}
			w.skip(rel, "is "+st.Kind()+", never followed or read")
		}
	}
	return nil
}

// file reads one regular file, bounded, and writes its blob when it differs from the HEAD's.
func (w *worktreeWalk) file(d *hostilefs.Dir, name, rel string, st hostilefs.Stat) error {
	limit := w.s.req.MaxFileBytes
	if st.Size > limit {
		w.skip(rel, fmt.Sprintf("%d bytes, over the %d-byte bound of one file; not read", st.Size, limit))
		return nil
	}
	f, opened, err := d.OpenRegular(name)
	if err != nil {
		w.skip(rel, "not read: "+err.Error())
		return nil
	}
	data, err := hostilefs.ReadAtMost(f, opened, limit, rel)
	f.Close()
	if err != nil {
		w.skip(rel, "not read: "+err.Error())
		return nil
	}
	mode := "100644"
	if opened.Mode&0o100 != 0 {
		mode = "100755"
	}
	id := objectID("blob", data)
	if e, ok := w.head[rel]; ok && e.id == id && e.mode == mode {
		w.files[rel] = e
		return nil
	}
	if w.written+int64(len(data)) > w.s.req.MaxTreeBytes {
		w.skip(rel, fmt.Sprintf("the changed files passed the %d-byte bound of all uncommitted changes; not kept", w.s.req.MaxTreeBytes))
		return nil
	}
	w.written += int64(len(data))
	if _, err := w.s.writeObject("blob", data); err != nil {
		return err
	}
	w.files[rel] = treeEntry{mode: mode, id: id}
	return nil
}

// writeTree writes the trees of a flat path -> entry map, deepest first, and returns the root tree's id.
func (s *salvager) writeTree(files map[string]treeEntry) (string, error) {
	type dirNode struct {
		entries map[string]treeEntry // name -> blob, link or submodule
		subdirs map[string]bool
	}
	dirs := map[string]*dirNode{"": {entries: map[string]treeEntry{}, subdirs: map[string]bool{}}}
	var ensure func(dir string) *dirNode
	ensure = func(dir string) *dirNode {
		if n, ok := dirs[dir]; ok {
			return n
		}
		n := &dirNode{entries: map[string]treeEntry{}, subdirs: map[string]bool{}}
		dirs[dir] = n
		parent, base := "", dir
		if i := strings.LastIndexByte(dir, '/'); i >= 0 {
			parent, base = dir[:i], dir[i+1:]
		}
		ensure(parent).subdirs[base] = true
		return n
	}
	for p, e := range files {
		dir, base := path.Split(p)
		ensure(strings.TrimSuffix(dir, "/")).entries[base] = e
	}
	var write func(dir string) (string, error)
	write = func(dir string) (string, error) {
		n := dirs[dir]
		type item struct {
			name, sortKey string
			e             treeEntry
		}
		var items []item
		for name, e := range n.entries {
			items = append(items, item{name, name, e})
		}
		for name := range n.subdirs {
			child := name
			if dir != "" {
				child = dir + "/" + name
			}
			id, err := write(child)
			if err != nil {
				return "", err
			}
			items = append(items, item{name, name + "/", treeEntry{mode: "40000", id: id}})
		}
		// git orders a tree's entries by name, a directory's name compared as if it ended in "/".
		sort.Slice(items, func(i, j int) bool { return items[i].sortKey < items[j].sortKey })
		var body bytes.Buffer
		for _, it := range items {
			raw, err := hex.DecodeString(it.e.id)
			if err != nil || len(raw) != sha1.Size {
				return "", fmt.Errorf("tree entry %s has an invalid id %q", it.name, it.e.id)
			}
			body.WriteString(it.e.mode + " " + it.name + "\x00")
			body.Write(raw)
		}
		return s.writeObject("tree", body.Bytes())
	}
	return write("")
}

func objectID(typ string, body []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, len(body))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// writeObject writes a loose object into the host repository (a host-owned directory) and returns its id.
func (s *salvager) writeObject(typ string, body []byte) (string, error) {
	id := objectID(typ, body)
	dir := filepath.Join(s.host, "objects", id[:2])
	dest := filepath.Join(dir, id[2:])
	if _, err := os.Lstat(dest); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	zw := zlib.NewWriter(tmp)
	fmt.Fprintf(zw, "%s %d\x00", typ, len(body))
	_, err = zw.Write(body)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write object %s: %w", id, err)
	}
	return id, os.Rename(tmp.Name(), dest)
}
