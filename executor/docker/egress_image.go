package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/kewplan/kewplan/egress"
)

// egressImage is the proxy image of kewplan's binary (ApplyOptions.ProxyBinary, else the running executable),
// built when the engine does not have it yet. The image is FROM scratch: a static binary alone, or a dynamic one
// with its ELF interpreter and shared libraries (egress.RuntimeFiles). The image's tag is a digest of everything
// copied; the state directory remembers it by the identity on disk of each of those files, so an apply reads and
// hashes the binary (tens of megabytes) only when one of them changed.
func (d *dockerEngine) egressImage(ctx context.Context) (string, error) {
	path := d.run.ProxyBinary
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the kewplan executable: %w", err)
		}
		path = self
	}
	runtime, err := egress.RuntimeFiles(path)
	if err == nil {
		err = egress.CheckKewplanBinary(path)
	}
	if err != nil {
		return "", fmt.Errorf("kewplan's egress proxy runs kewplan's own binary in an image FROM scratch, but %v; build kewplan with `make build` (CGO_ENABLED=0 go build ./cmd/kewplan) or `go build ./cmd/kewplan`, or set sandbox.egress.proxy to an existing proxy", err)
	}
	ids, idErr := identifyAll(path, runtime)
	if idErr == nil {
		if tag, ok := d.readImageTagCache(ids); ok {
			if _, err := d.engine.InspectImage(ctx, tag); err == nil {
				return tag, nil
			}
		}
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read kewplan's binary for the egress proxy image: %w", err)
	}
	ic, err := egress.NewImageContext(bin, runtime)
	if err != nil {
		return "", err
	}
	if _, err := d.engine.InspectImage(ctx, ic.Tag); err != nil {
		if err := d.engine.BuildImage(ctx, ic.Tag, ic.Files, ic.Executables); err != nil {
			return "", fmt.Errorf("build the egress proxy image %s: %v", ic.Tag, err)
		}
	}
	if idErr == nil {
		// The identities read before the files were: a file replaced meanwhile is hashed again next time.
		d.writeImageTagCache(ids, ic.Tag)
	}
	return ic.Tag, nil
}

// imageIdentity is what the proxy image is made of, file by file: the binary, then its runtime files by image path.
type imageIdentity struct {
	Binary  binaryIdentity
	Runtime []runtimeIdentity
}

type runtimeIdentity struct {
	Path   string         `json:"path"`
	Source binaryIdentity `json:"source"`
}

func identifyAll(path string, runtime []egress.RuntimeFile) (imageIdentity, error) {
	bin, err := identify(path)
	if err != nil {
		return imageIdentity{}, err
	}
	id := imageIdentity{Binary: bin}
	for _, f := range runtime {
		src, err := identify(f.Source)
		if err != nil {
			return imageIdentity{}, err
		}
		id.Runtime = append(id.Runtime, runtimeIdentity{Path: f.Path, Source: src})
	}
	return id, nil
}

func (id imageIdentity) equal(o imageIdentity) bool {
	return id.Binary == o.Binary && slices.Equal(id.Runtime, o.Runtime)
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
	// Runtime are the dynamic binary's interpreter and libraries; none for a static binary.
	Runtime []runtimeIdentity `json:"runtime,omitempty"`
	Tag     string            `json:"tag"`
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
func (d *dockerEngine) readImageTagCache(id imageIdentity) (string, bool) {
	data, err := os.ReadFile(d.run.Dir.EgressImageCache())
	if err != nil || len(data) > 1<<20 {
		return "", false
	}
	var c imageTagCache
	if json.Unmarshal(data, &c) != nil || !id.equal(imageIdentity{Binary: c.Binary, Runtime: c.Runtime}) || !proxyTagPattern.MatchString(c.Tag) {
		return "", false
	}
	return c.Tag, true
}

// writeImageTagCache records the tag; failing to is only slower next time.
func (d *dockerEngine) writeImageTagCache(id imageIdentity, tag string) {
	data, err := json.Marshal(imageTagCache{Binary: id.Binary, Runtime: id.Runtime, Tag: tag})
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
