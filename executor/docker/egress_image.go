package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/kewplan/kewplan/egress"
)

// egressImage is the proxy image of kewplan's binary (ApplyOptions.ProxyBinary, else the running executable),
// built when the engine does not have it yet. The binary must be static: the image is FROM scratch. The image's
// tag is the binary's digest; the state directory remembers it by the binary's identity on disk, so an apply reads
// and hashes the binary (tens of megabytes) only when it changed.
func (d *dockerEngine) egressImage(ctx context.Context) (string, error) {
	path := d.run.ProxyBinary
	if path == "" {
		self, _, err := egress.StaticSelf()
		if err != nil {
			return "", err
		}
		path = self
	}
	id, idErr := identify(path)
	if idErr == nil {
		if tag, ok := d.readImageTagCache(id); ok {
			if _, err := d.engine.InspectImage(ctx, tag); err == nil {
				return tag, nil
			}
		}
	}
	static, err := egress.StaticBinary(path)
	if err != nil {
		return "", fmt.Errorf("kewplan's egress proxy runs kewplan's own binary in an image FROM scratch, but %v; build kewplan with `make build` (CGO_ENABLED=0), or set sandbox.egress.proxy to an existing proxy", err)
	}
	if !static {
		return "", fmt.Errorf("kewplan's egress proxy runs kewplan's own binary in an image FROM scratch, but %s is dynamically linked; build it with `make build` (CGO_ENABLED=0 go build ./cmd/kewplan), or set sandbox.egress.proxy to an existing proxy", path)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read kewplan's binary for the egress proxy image: %w", err)
	}
	tag, err := egress.ImageTag(bytes.NewReader(bin))
	if err != nil {
		return "", err
	}
	if _, err := d.engine.InspectImage(ctx, tag); err != nil {
		files := map[string][]byte{"Dockerfile": []byte(egress.Dockerfile), "kewplan": bin}
		if err := d.engine.BuildImage(ctx, tag, files, map[string]bool{"kewplan": true}); err != nil {
			return "", fmt.Errorf("build the egress proxy image %s: %v", tag, err)
		}
	}
	if idErr == nil {
		// The identity read before the binary was: a binary replaced meanwhile is hashed again next time.
		d.writeImageTagCache(id, tag)
	}
	return tag, nil
}

// binaryIdentity says which file a binary is: a binary rebuilt or replaced gets another inode, size or
// modification time.
type binaryIdentity struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
}

// imageTagCache is the state directory's record of the proxy image built from one binary.
type imageTagCache struct {
	Binary binaryIdentity `json:"binary"`
	Tag    string         `json:"tag"`
}

var proxyTagPattern = regexp.MustCompile(`^` + regexp.QuoteMeta(egress.ImageRepository) + `:[0-9a-f]{16}$`)

func identify(path string) (binaryIdentity, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return binaryIdentity{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return binaryIdentity{}, fmt.Errorf("%s: no inode to identify it by", path)
	}
	return binaryIdentity{Path: path, Dev: uint64(st.Dev), Ino: st.Ino, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}, nil
}

// readImageTagCache returns the tag recorded for exactly this binary; anything else (no record, another binary, a
// record that does not parse or names no proxy image) is a miss.
func (d *dockerEngine) readImageTagCache(id binaryIdentity) (string, bool) {
	data, err := os.ReadFile(d.run.Dir.EgressImageCache())
	if err != nil || len(data) > 4096 {
		return "", false
	}
	var c imageTagCache
	if json.Unmarshal(data, &c) != nil || c.Binary != id || !proxyTagPattern.MatchString(c.Tag) {
		return "", false
	}
	return c.Tag, true
}

// writeImageTagCache records the tag; failing to is only slower next time.
func (d *dockerEngine) writeImageTagCache(id binaryIdentity, tag string) {
	data, err := json.Marshal(imageTagCache{Binary: id, Tag: tag})
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(d.run.Dir.Root, filepath.Base(d.run.Dir.EgressImageCache())+".*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), d.run.Dir.EgressImageCache()) != nil {
		os.Remove(tmp.Name())
	}
}
