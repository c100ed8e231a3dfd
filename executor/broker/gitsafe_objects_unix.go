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

// DefaultMaxObjectBytes bounds the object data the broker copies out of a checkout, and separately what that data
// inflates to (loose objects and pack entries alike, deltas by the size they rebuild).
const DefaultMaxObjectBytes = 8 << 30

const (
	maxObjectEntries  = 1 << 20 // directory entries under .git/objects, all levels together
	maxShallowBytes   = 64 << 20
	maxLooseHeaderLen = 32
)

type objectImporter struct {
	git      *hostGit
	stage    string // the staging repository's git dir
	limit    int64  // object bytes that may be copied in all, and that they may inflate to in all
	budget   int64  // object bytes left to copy (as stored: compressed)
	inflated int64  // bytes the objects may still inflate to: every decompression is bounded by it
	entries  int    // directory entries left to list
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

// inflate charges n bytes of decompressed output before they are inflated: a few kilobytes of zlib can claim
// gigabytes, so the budget is spent on what the data becomes, not on what it occupies.
func (im *objectImporter) inflate(rel string, n int64) error {
	if n < 0 || n > im.inflated {
		return &inflateLimitError{rel: rel, limit: im.limit}
	}
	im.inflated -= n
	return nil
}

// inflateLimitError is a refusal by the decompression budget (as opposed to malformed data).
type inflateLimitError struct {
	rel   string
	limit int64
}

func (e *inflateLimitError) Error() string {
	return fmt.Sprintf("%s would inflate the object data copied from the checkout past its %d-byte limit; refused", e.rel, e.limit)
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
		err = verifyLooseObject(tmp, fan+name, func(size int64) error { return im.inflate(rel, size) })
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

// verifyLooseObject inflates a loose object and checks its header, its size and its id. charge is asked for the
// declared size before the content is inflated, and no more than that is ever inflated.
func verifyLooseObject(r io.Reader, id string, charge func(size int64) error) error {
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
	if err != nil || size < 0 || sizeText != strconv.FormatInt(size, 10) {
		return fmt.Errorf("invalid object size %q", sizeText)
	}
	if err := charge(size); err != nil {
		return err
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
	// The host's own copy is measured and then indexed, so what index-pack inflates is what was charged.
	tmp, err := os.CreateTemp(im.stage, "incoming-*.pack")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(f, st.Size+1))
	if err == nil && n != st.Size {
		err = fmt.Errorf("%s changed size while it was copied", rel)
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	if err := im.chargePack(rel, tmp); err != nil {
		var limit *inflateLimitError
		if errors.As(err, &limit) {
			return err
		}
		return fmt.Errorf("pack %s is not a valid git pack: %w", rel, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = im.git.sealed(ctx, tmp, "--git-dir="+im.stage, "index-pack", "--stdin",
		"--max-input-size="+strconv.FormatInt(st.Size, 10))
	if err != nil {
		return fmt.Errorf("pack %s is not a valid git pack: %w", rel, err)
	}
	return nil
}

// Pack entry types (gitformat-pack).
const (
	packOfsDelta = 6
	packRefDelta = 7
	maxPackCount = 1 << 28
)

// chargePack walks a pack's entries before git index-pack sees it and charges what each inflates to: an
// object's size, and for a delta also the size of the object it rebuilds (which index-pack materialises). Each
// entry's zlib stream is inflated here, bounded by its declared size, so a bomb is refused after at most its
// budget of output. Anything malformed is left for index-pack to reject with its own message.
func (im *objectImporter) chargePack(rel string, r io.Reader) error {
	br := bufio.NewReader(r)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || string(hdr[:4]) != "PACK" {
		return errors.New("not a git pack")
	}
	count := uint32(hdr[8])<<24 | uint32(hdr[9])<<16 | uint32(hdr[10])<<8 | uint32(hdr[11])
	if count > maxPackCount {
		return fmt.Errorf("claims %d objects; refused", count)
	}
	for i := uint32(0); i < count; i++ {
		typ, size, err := readPackEntryHeader(br)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if err := im.inflate(rel, size); err != nil {
			return err
		}
		zr, err := zlib.NewReader(br) // br is an io.ByteReader: flate reads no byte past the stream
		if err != nil {
			return fmt.Errorf("entry %d: not a zlib stream: %w", i, err)
		}
		limited := &io.LimitedReader{R: zr, N: size}
		var body io.Reader = limited
		if typ == packOfsDelta || typ == packRefDelta {
			dr := bufio.NewReader(limited)
			if _, err := readDeltaSize(dr); err != nil { // the base's size: already charged as an object
				return fmt.Errorf("entry %d: %w", i, err)
			}
			result, err := readDeltaSize(dr)
			if err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			if err := im.inflate(rel, result); err != nil {
				return err
			}
			body = dr
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		// The stream must end where its size says: one byte more or less, or a missing end, is malformed.
		if n, err := io.CopyN(io.Discard, zr, 1); limited.N != 0 || n != 0 || err != io.EOF {
			return fmt.Errorf("entry %d inflates to more than its declared %d bytes, or is cut short", i, size)
		}
	}
	return nil
}

// readPackEntryHeader reads an entry's type and inflated size, and skips a delta's base reference.
func readPackEntryHeader(br *bufio.Reader) (typ int, size int64, err error) {
	c, err := br.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ, size = int(c>>4&7), int64(c&15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, errors.New("object size overflows")
		}
		if c, err = br.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= int64(c&0x7f) << shift
	}
	switch typ {
	case 1, 2, 3, 4:
	case packOfsDelta:
		for i := 0; ; i++ {
			if c, err = br.ReadByte(); err != nil {
				return 0, 0, err
			}
			if c&0x80 == 0 {
				break
			}
			if i > 9 {
				return 0, 0, errors.New("delta offset overflows")
			}
		}
	case packRefDelta:
		if _, err := br.Discard(20); err != nil {
			return 0, 0, err
		}
	default:
		return 0, 0, fmt.Errorf("unknown object type %d", typ)
	}
	return typ, size, nil
}

// readDeltaSize reads one of a delta's two leading sizes (little-endian base-128).
func readDeltaSize(br *bufio.Reader) (int64, error) {
	var size int64
	for shift := 0; ; shift += 7 {
		if shift > 56 {
			return 0, errors.New("delta size overflows")
		}
		c, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("delta header: %w", err)
		}
		size |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			return size, nil
		}
	}
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
