//go:build unix

package broker

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/executor/hostilefs"
)

// Copying the agent's objects into a host-owned staging repository. Only object data crosses: loose objects
// (verified here: zlib stream, header, declared size, and that the content hashes to the file's name) and pack
// files (streamed into `git index-pack --stdin`, git's own untrusted-input path, which recomputes every object id
// and writes a fresh index). Nothing else of .git/objects is read: not info/alternates (refused outright, because
// a repository that borrows objects from another path would make the host read that path), not the agent's .idx,
// .bitmap, commit-graph or multi-pack-index files.

// DefaultMaxObjectBytes bounds the object data the broker copies out of a checkout.
const DefaultMaxObjectBytes = 8 << 30

const (
	maxObjectEntries  = 1 << 20 // directory entries under .git/objects, all levels together
	maxShallowBytes   = 64 << 20
	maxLooseHeaderLen = 32
)

type objectImporter struct {
	git     *hostGit
	stage   string // the staging repository's git dir
	limit   int64  // object bytes that may be copied in all
	budget  int64  // object bytes left to copy
	entries int    // directory entries left to list
}

// importObjects copies the object data of the checkout's .git into the staging repository.
func (im *objectImporter) importObjects(ctx context.Context, gitDir *hostilefs.Dir) error {
	objects, err := gitDir.OpenDir("objects")
	if err != nil {
		return fmt.Errorf("open .git/objects: %w", err)
	}
	defer objects.Close()
	if err := refuseAlternates(objects); err != nil {
		return err
	}
	names, err := im.list(objects)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case len(name) == 2 && isGitHex(name):
			if err := im.importLooseDir(objects, name); err != nil {
				return err
			}
		case name == "pack":
			if err := im.importPacks(ctx, objects); err != nil {
				return err
			}
		}
	}
	return im.copyShallow(gitDir)
}

func refuseAlternates(objects *hostilefs.Dir) error {
	st, err := objects.Lstat("info")
	if err != nil {
		if hostilefs.IsNotExist(err) {
			return nil
		}
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf(".git/objects/info is %s; refused", st.Kind())
	}
	info, err := objects.OpenDir("info")
	if err != nil {
		return err
	}
	defer info.Close()
	for _, name := range []string{"alternates", "http-alternates"} {
		if _, err := info.Lstat(name); err == nil {
			return fmt.Errorf(".git/objects/info/%s exists: the checkout borrows objects from another object store, "+
				"which the host never reads on its behalf", name)
		} else if !hostilefs.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func (im *objectImporter) list(d *hostilefs.Dir) ([]string, error) {
	names, more, err := d.ReadNames(im.entries)
	if err != nil {
		return nil, err
	}
	im.entries -= len(names)
	if more {
		return nil, fmt.Errorf(".git/objects has more than %d entries; refused", maxObjectEntries)
	}
	return names, nil
}

func (im *objectImporter) take(rel string, size int64) error {
	if size > im.budget {
		return fmt.Errorf("%s would take the object data copied from the checkout over its %d-byte limit; refused",
			rel, im.limit)
	}
	im.budget -= size
	return nil
}

func (im *objectImporter) importLooseDir(objects *hostilefs.Dir, fan string) error {
	dir, err := objects.OpenDir(fan)
	if err != nil {
		return err
	}
	defer dir.Close()
	names, err := im.list(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if len(name) != 38 || !isGitHex(name) {
			continue // tmp_obj_* and other leftovers are not objects
		}
		if err := im.importLoose(dir, fan, name); err != nil {
			return err
		}
	}
	return nil
}

// importLoose copies one loose object into the staging repository after checking that it is a well-formed zlib
// stream whose content hashes to its name. The check reads the host's own copy, not the checkout's file.
func (im *objectImporter) importLoose(dir *hostilefs.Dir, fan, name string) error {
	rel := dir.Join(name)
	f, st, err := dir.OpenRegular(name)
	if err != nil {
		return fmt.Errorf("loose object: %w", err)
	}
	defer f.Close()
	if err := im.take(rel, st.Size); err != nil {
		return err
	}
	destDir := filepath.Join(im.stage, "objects", fan)
	if err := os.MkdirAll(destDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(destDir, "tmp_obj_")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(f, st.Size+1))
	if err == nil && n != st.Size {
		err = fmt.Errorf("%s changed size while it was copied", rel)
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = verifyLooseObject(tmp, fan+name, im.limit)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("loose object .git/objects/%s/%s: %w", fan, name, err)
	}
	dest := filepath.Join(destDir, name)
	if _, err := os.Lstat(dest); err == nil {
		return nil // the same object also arrived in a pack
	}
	return os.Rename(tmp.Name(), dest)
}

// verifyLooseObject inflates a loose object and checks its header, its size and its id.
func verifyLooseObject(r io.Reader, id string, maxSize int64) error {
	zr, err := zlib.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a zlib stream: %w", err)
	}
	defer zr.Close()
	br := bufio.NewReader(zr)
	header, err := br.ReadSlice(0)
	if err != nil || len(header) > maxLooseHeaderLen {
		return errors.New("no valid object header")
	}
	typ, sizeText, ok := strings.Cut(string(header[:len(header)-1]), " ")
	if !ok {
		return errors.New("no valid object header")
	}
	switch typ {
	case "commit", "tree", "blob", "tag":
	default:
		return fmt.Errorf("unknown object type %q", typ)
	}
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 0 || size > maxSize || sizeText != strconv.FormatInt(size, 10) {
		return fmt.Errorf("invalid object size %q", sizeText)
	}
	h := sha1.New()
	h.Write(header)
	if n, err := io.CopyN(h, br, size); err != nil {
		return fmt.Errorf("content is %d bytes, the header says %d: %v", n, size, err)
	}
	if n, _ := io.CopyN(io.Discard, br, 1); n != 0 {
		return errors.New("content is longer than its header says")
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != id {
		return fmt.Errorf("content hashes to %s, not to its name", got)
	}
	return nil
}

// importPacks streams every .pack file into `git index-pack --stdin`, which verifies it and writes its own index.
func (im *objectImporter) importPacks(ctx context.Context, objects *hostilefs.Dir) error {
	packDir, err := objects.OpenDir("pack")
	if err != nil {
		return err
	}
	defer packDir.Close()
	names, err := im.list(packDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".pack") {
			continue
		}
		if err := im.importPack(ctx, packDir, name); err != nil {
			return err
		}
	}
	return nil
}

func (im *objectImporter) importPack(ctx context.Context, packDir *hostilefs.Dir, name string) error {
	rel := packDir.Join(name)
	f, st, err := packDir.OpenRegular(name)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	defer f.Close()
	if err := im.take(rel, st.Size); err != nil {
		return err
	}
	_, err = im.git.sealed(ctx, f, "--git-dir="+im.stage, "index-pack", "--stdin",
		"--max-input-size="+strconv.FormatInt(st.Size, 10))
	if err != nil {
		return fmt.Errorf("pack %s is not a valid git pack: %w", rel, err)
	}
	return nil
}

// copyShallow carries .git/shallow (the boundary of a shallow clone) into the staging repository, after checking
// that it lists nothing but commit ids.
func (im *objectImporter) copyShallow(gitDir *hostilefs.Dir) error {
	data, _, err := gitDir.ReadRegular("shallow", maxShallowBytes)
	if err != nil {
		if hostilefs.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("read .git/shallow: %w", err)
	}
	if len(data) == 0 {
		return nil
	}
	for line := range bytes.SplitSeq(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if !isObjectID(string(line)) {
			return errors.New(".git/shallow holds something other than commit ids; refused")
		}
	}
	return os.WriteFile(filepath.Join(im.stage, "shallow"), data, 0o644)
}

func isGitHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
