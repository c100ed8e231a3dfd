// Package gitobj commits a file into a git repository without a git binary, for the static fake and demo agents
// that run in FROM scratch images. A FROM scratch image has no git, so the agent commits by writing loose git
// objects itself. It reads only loose objects: a repository whose HEAD commit or tree sits in a pack file is refused with a clear message. A local
// repository cloned with `git clone` (kewplan clones with --no-hardlinks, which copies the object store as it is)
// keeps the loose objects of a freshly made source repository.
package gitobj

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CommitFile writes name (a slash-separated path below the repository root; its directories are made as needed)
// with content, commits it on top of HEAD, and moves HEAD's branch (or a detached HEAD) to the new commit. It
// returns the new commit id.
func CommitFile(repo, name, content, message string) (string, error) {
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || p == ".git" || strings.ContainsRune(p, 0) {
			return "", fmt.Errorf("file name %q must be a clean relative path outside .git", name)
		}
	}
	gitDir := filepath.Join(repo, ".git")
	refFile, parent, err := resolveHEAD(gitDir)
	if err != nil {
		return "", err
	}
	typ, body, err := readObject(gitDir, parent)
	if err != nil {
		return "", err
	}
	if typ != "commit" {
		return "", fmt.Errorf("HEAD %s is a %s, not a commit", parent, typ)
	}
	treeID := ""
	for _, line := range strings.Split(string(body), "\n") {
		if t, ok := strings.CutPrefix(line, "tree "); ok {
			treeID = t
			break
		}
		if line == "" {
			break
		}
	}
	if treeID == "" {
		return "", fmt.Errorf("commit %s has no tree", parent)
	}
	path := filepath.Join(repo, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return "", err
	}
	blob, err := writeObject(gitDir, "blob", []byte(content))
	if err != nil {
		return "", err
	}
	newTree, err := treeWith(gitDir, treeID, parts, blob)
	if err != nil {
		return "", err
	}
	now := time.Now().Unix()
	ident := fmt.Sprintf("kew-agent <agent@kew.local> %d +0000", now)
	commit := fmt.Sprintf("tree %s\nparent %s\nauthor %s\ncommitter %s\n\n%s\n", newTree, parent, ident, ident, message)
	id, err := writeObject(gitDir, "commit", []byte(commit))
	if err != nil {
		return "", err
	}
	tmp := refFile + ".kew-tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, refFile); err != nil {
		return "", err
	}
	return id, nil
}

// treeWith writes the tree treeID ("" for none) with the blob at the path parts, making or rewriting the trees
// on the way, and returns the new tree's id.
func treeWith(gitDir, treeID string, parts []string, blob string) (string, error) {
	var entries []treeEntry
	if treeID != "" {
		typ, body, err := readObject(gitDir, treeID)
		if err != nil {
			return "", err
		}
		if typ != "tree" {
			return "", fmt.Errorf("object %s is a %s, not a tree", treeID, typ)
		}
		if entries, err = parseTree(body); err != nil {
			return "", err
		}
	}
	name := parts[0]
	mode, id := "100644", blob
	i := slices.IndexFunc(entries, func(e treeEntry) bool { return e.name == name })
	if len(parts) > 1 {
		sub := ""
		if i >= 0 {
			if entries[i].mode != "40000" {
				return "", fmt.Errorf("%s is a file in HEAD", name)
			}
			sub = entries[i].id
		}
		var err error
		if id, err = treeWith(gitDir, sub, parts[1:], blob); err != nil {
			return "", err
		}
		mode = "40000"
	} else if i >= 0 && entries[i].mode == "40000" {
		return "", fmt.Errorf("%s is a directory in HEAD", name)
	}
	if i >= 0 {
		entries[i].mode, entries[i].id = mode, id
	} else {
		entries = append(entries, treeEntry{mode: mode, name: name, id: id})
	}
	return writeObject(gitDir, "tree", encodeTree(entries))
}

// resolveHEAD returns the file to update (the branch's loose ref, or HEAD when detached) and the current commit.
func resolveHEAD(gitDir string) (string, string, error) {
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", "", fmt.Errorf("read HEAD: %w", err)
	}
	h := strings.TrimSpace(string(head))
	ref, ok := strings.CutPrefix(h, "ref: ")
	if !ok {
		if !isID(h) {
			return "", "", fmt.Errorf("HEAD holds %q, neither a ref nor a commit id", h)
		}
		return filepath.Join(gitDir, "HEAD"), h, nil
	}
	if !strings.HasPrefix(ref, "refs/heads/") || strings.Contains(ref, "..") {
		return "", "", fmt.Errorf("HEAD points at %q, not a branch", ref)
	}
	refFile := filepath.Join(gitDir, filepath.FromSlash(ref))
	if b, err := os.ReadFile(refFile); err == nil {
		id := strings.TrimSpace(string(b))
		if !isID(id) {
			return "", "", fmt.Errorf("%s holds %q, not a commit id", ref, id)
		}
		return refFile, id, nil
	}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if err == nil {
		for _, line := range strings.Split(string(packed), "\n") {
			if id, name, ok := strings.Cut(line, " "); ok && name == ref && isID(id) {
				return refFile, id, nil
			}
		}
	}
	return "", "", fmt.Errorf("branch %s has no commit (an empty repository?)", ref)
}

func isID(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func objectPath(gitDir, id string) string {
	return filepath.Join(gitDir, "objects", id[:2], id[2:])
}

func readObject(gitDir, id string) (string, []byte, error) {
	if !isID(id) {
		return "", nil, fmt.Errorf("%q is not an object id", id)
	}
	f, err := os.Open(objectPath(gitDir, id))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("object %s is not a loose object (the repository is packed); this agent has no git and reads loose objects only: dispatch it against a repository whose recent objects are loose (a freshly made local repository is)", id)
	}
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(f)
	if err != nil {
		return "", nil, fmt.Errorf("object %s: %w", id, err)
	}
	defer z.Close()
	return inflateObject(z, id)
}

// maxObjectSize bounds one object this package inflates: a commit, a tree or a small blob of a fake agent.
const maxObjectSize = 64 << 20

// inflateObject reads a loose object's header first and inflates no more than the size it declares (at most
// maxObjectSize) and one byte to prove the content ends there: a tiny zlib stream can claim gigabytes.
func inflateObject(z io.Reader, id string) (string, []byte, error) {
	br := bufio.NewReaderSize(z, 64)
	hdr, err := br.ReadSlice(0)
	if err != nil || len(hdr) > 32 {
		return "", nil, fmt.Errorf("object %s has no header", id)
	}
	typ, size, ok := strings.Cut(string(hdr[:len(hdr)-1]), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n < 0 || size != strconv.FormatInt(n, 10) {
		return "", nil, fmt.Errorf("object %s has a bad header %q", id, hdr)
	}
	if n > maxObjectSize {
		return "", nil, fmt.Errorf("object %s is %d bytes, more than the %d this agent reads", id, n, maxObjectSize)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", nil, fmt.Errorf("object %s is shorter than its header says: %w", id, err)
	}
	if k, _ := io.CopyN(io.Discard, br, 1); k != 0 {
		return "", nil, fmt.Errorf("object %s is longer than its header says", id)
	}
	return typ, body, nil
}

func writeObject(gitDir, typ string, body []byte) (string, error) {
	raw := append([]byte(fmt.Sprintf("%s %d\x00", typ, len(body))), body...)
	sum := sha1.Sum(raw)
	id := hex.EncodeToString(sum[:])
	path := objectPath(gitDir, id)
	if _, err := os.Stat(path); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	z := zlib.NewWriter(&buf)
	z.Write(raw)
	if err := z.Close(); err != nil {
		return "", err
	}
	tmp := path + ".kew-tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o444); err != nil {
		return "", err
	}
	return id, os.Rename(tmp, path)
}

type treeEntry struct {
	mode, name, id string
}

func parseTree(b []byte) ([]treeEntry, error) {
	var out []treeEntry
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || len(b) < nul+21 {
			return nil, errors.New("malformed tree object")
		}
		out = append(out, treeEntry{mode: string(b[:sp]), name: string(b[sp+1 : nul]), id: hex.EncodeToString(b[nul+1 : nul+21])})
		b = b[nul+21:]
	}
	return out, nil
}

// encodeTree sorts entries the way git does (a directory sorts as if its name ended in "/").
func encodeTree(entries []treeEntry) []byte {
	key := func(e treeEntry) string {
		if e.mode == "40000" {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var buf bytes.Buffer
	for _, e := range entries {
		id, _ := hex.DecodeString(e.id)
		buf.WriteString(e.mode + " " + e.name + "\x00")
		buf.Write(id)
	}
	return buf.Bytes()
}
