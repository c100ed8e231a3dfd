package egress

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A kewplan built with cgo (`go run`, `go install` on a machine with a C compiler) is dynamically linked. Its proxy
// image is still FROM scratch: it carries the binary's ELF interpreter and every shared library the binary needs,
// found the way the dynamic loader finds them (DT_RPATH, DT_RUNPATH with $ORIGIN, the directories ld.so.cache is
// made from, the loader's built-in directories) and recursively for the libraries' own DT_NEEDED. Each is copied
// at the path the loader opens, with its symlinks followed, so nothing is fetched and nothing is compiled at apply
// time. LD_LIBRARY_PATH of the applying process is deliberately not honoured: the image must not depend on one
// shell's environment.

// RuntimeFile is one file of the proxy image besides kewplan's binary: the ELF interpreter or a shared library.
type RuntimeFile struct {
	// Path is where the image holds it: the path the dynamic loader opens (absolute, clean).
	Path string
	// Source is the host file read for it, with every symlink followed.
	Source string
}

// Bounds on what a dynamic binary may pull into the image; a real kewplan needs a handful of libraries.
const (
	maxRuntimeFiles = 256
	maxConfDepth    = 8
)

// RuntimeFiles lists what the ELF executable at path needs to run in an image FROM scratch, sorted by Path: nothing
// for a static binary; for a dynamic one its interpreter (PT_INTERP) and the closure of its DT_NEEDED libraries.
// A library the loader could not find either is an error that names it.
func RuntimeFiles(path string) ([]RuntimeFile, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF executable kewplan can put in an image: %w", path, err)
	}
	defer f.Close()
	interp, err := interpreter(f)
	if err != nil || interp == "" {
		return nil, err
	}
	if !filepath.IsAbs(interp) || filepath.Clean(interp) != interp {
		return nil, fmt.Errorf("%s asks for the interpreter %q, which is not a clean absolute path", path, interp)
	}
	r := &resolver{class: f.Class, machine: f.Machine, files: map[string]string{}, loaded: map[string]bool{},
		system: systemLibraryDirs(f.Machine, interp)}
	if err := r.add(interp); err != nil {
		return nil, fmt.Errorf("interpreter of %s: %w", path, err)
	}
	self, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	if err := r.load(f, self, nil); err != nil {
		return nil, fmt.Errorf("libraries of %s: %w", path, err)
	}
	out := make([]RuntimeFile, 0, len(r.files))
	for p, src := range r.files {
		out = append(out, RuntimeFile{Path: p, Source: src})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		s := strings.TrimRight(string(b), "\x00")
		if s == "" || strings.ContainsRune(s, 0) {
			return "", errors.New("PT_INTERP is empty or malformed")
		}
		return s, nil
	}
	return "", nil
}

// resolver walks the DT_NEEDED graph. files maps image path to host source; loaded holds the sonames (and
// absolute names) already resolved, as the loader loads each once.
type resolver struct {
	class   elf.Class
	machine elf.Machine
	system  []string // ld.so.conf directories, then the loader's built-in ones
	files   map[string]string
	loaded  map[string]bool
}

func (r *resolver) add(imagePath string) error {
	if _, ok := r.files[imagePath]; ok {
		return nil
	}
	if len(r.files) >= maxRuntimeFiles {
		return fmt.Errorf("more than %d runtime files", maxRuntimeFiles)
	}
	src, err := filepath.EvalSymlinks(imagePath)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	r.files[imagePath] = src
	return nil
}

// load resolves the DT_NEEDED entries of one object (at host path self) and recurses into each library found.
// parentRpath is the DT_RPATH of the objects that loaded this one (glibc searches the whole chain's RPATH).
func (r *resolver) load(f *elf.File, self string, parentRpath []string) error {
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		return err
	}
	rpath, _ := f.DynString(elf.DT_RPATH)
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	origin := filepath.Dir(self)
	var chain []string
	if len(runpath) == 0 { // DT_RUNPATH, when present, makes the loader ignore DT_RPATH
		chain = append(expandPaths(rpath, origin), parentRpath...)
	}
	dirs := append(append(append([]string{}, chain...), expandPaths(runpath, origin)...), r.system...)
	for _, name := range needed {
		if r.loaded[name] {
			continue
		}
		r.loaded[name] = true
		found, lib, err := r.find(name, dirs)
		if err != nil {
			return err
		}
		err = r.add(found)
		if err == nil {
			src := r.files[found]
			err = r.load(lib, src, chain)
		}
		lib.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// find is the loader's search for one DT_NEEDED name: a name with a slash is a path; otherwise the first
// directory holding an ELF object of the executable's class and machine.
func (r *resolver) find(name string, dirs []string) (string, *elf.File, error) {
	if strings.ContainsRune(name, '/') {
		if !filepath.IsAbs(name) {
			return "", nil, fmt.Errorf("needed library %q is a relative path", name)
		}
		lib, err := r.open(name)
		if err != nil {
			return "", nil, err
		}
		return filepath.Clean(name), lib, nil
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if lib, err := r.open(p); err == nil {
			return p, lib, nil
		}
	}
	return "", nil, fmt.Errorf("shared library %s not found (searched %s)", name, strings.Join(dirs, ", "))
}

func (r *resolver) open(p string) (*elf.File, error) {
	lib, err := elf.Open(p)
	if err != nil {
		return nil, err
	}
	if lib.Class != r.class || lib.Machine != r.machine {
		lib.Close()
		return nil, fmt.Errorf("%s is %v %v, not %v %v", p, lib.Class, lib.Machine, r.class, r.machine)
	}
	return lib, nil
}

// expandPaths splits DT_RPATH / DT_RUNPATH values on ':' and expands $ORIGIN; $LIB and $PLATFORM, which depend on
// the loader's build, make an entry unusable and it is skipped, as are relative entries.
func expandPaths(values []string, origin string) []string {
	var out []string
	for _, v := range values {
		for _, d := range strings.Split(v, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d == "" || strings.Contains(d, "$") || !filepath.IsAbs(d) {
				continue
			}
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// systemLibraryDirs are the directories the loader searches after a binary's own paths: what ld.so.cache is made
// of (/etc/ld.so.conf and its includes) for glibc, /etc/ld-musl-<arch>.path for musl, then the built-in
// directories.
func systemLibraryDirs(m elf.Machine, interp string) []string {
	var dirs []string
	if base := filepath.Base(interp); strings.HasPrefix(base, "ld-musl-") {
		arch := strings.TrimSuffix(strings.TrimPrefix(base, "ld-musl-"), ".so.1")
		if data, err := os.ReadFile("/etc/ld-musl-" + arch + ".path"); err == nil {
			for _, d := range strings.FieldsFunc(string(data), func(r rune) bool { return r == ':' || r == '\n' }) {
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
			return dedupe(dirs)
		}
		return []string{"/lib", "/usr/local/lib", "/usr/lib"}
	}
	dirs = readLdSoConf("/etc/ld.so.conf", 0, dirs)
	triplet := map[elf.Machine]string{elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu",
		elf.EM_386: "i386-linux-gnu", elf.EM_ARM: "arm-linux-gnueabihf", elf.EM_PPC64: "powerpc64le-linux-gnu",
		elf.EM_S390: "s390x-linux-gnu", elf.EM_RISCV: "riscv64-linux-gnu"}[m]
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	return dedupe(dirs)
}

// readLdSoConf reads ld.so.conf's directory lines and follows its include lines (globs, relative to the file).
func readLdSoConf(path string, depth int, dirs []string) []string {
	if depth > maxConfDepth {
		return dirs
	}
	fh, err := os.Open(path)
	if err != nil {
		return dirs
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "hwcap "):
		case strings.HasPrefix(line, "include "):
			for _, pat := range strings.Fields(strings.TrimPrefix(line, "include ")) {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(path), pat)
				}
				matches, _ := filepath.Glob(pat)
				sort.Strings(matches)
				for _, m := range matches {
					dirs = readLdSoConf(m, depth+1, dirs)
				}
			}
		default:
			for _, d := range strings.FieldsFunc(line, func(r rune) bool { return r == ':' || r == ',' || r == ' ' || r == '\t' }) {
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
		}
	}
	return dirs
}

func dedupe(dirs []string) []string {
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
