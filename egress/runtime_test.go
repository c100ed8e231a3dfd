package egress

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildProgram builds a tiny Go program with the given environment and flags.
func buildProgram(t *testing.T, cgo bool, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	// os/user with cgo links libc's getpwuid_r: a dynamic binary with a real DT_NEEDED list.
	prog := "package main\n\nimport \"os/user\"\n\nfunc main() { _, _ = user.Current() }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), src)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=off", "CGO_ENABLED=0")
	if cgo {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestRuntimeFilesStatic(t *testing.T) {
	files, err := RuntimeFiles(buildProgram(t, false))
	if err != nil || len(files) != 0 {
		t.Fatalf("RuntimeFiles(static) = %v, %v; want none", files, err)
	}
	if _, err := RuntimeFiles("runtime_test.go"); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("RuntimeFiles(a Go source file) error = %v, want one saying it is not an ELF executable", err)
	}
}

// TestRuntimeFilesDynamic: a cgo build needs its PT_INTERP and libc, each listed at the path the loader opens,
// read from a regular file, and every library's own DT_NEEDED is in the list too.
func TestRuntimeFilesDynamic(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler: no dynamic binary to resolve")
	}
	bin := buildProgram(t, true, "-ldflags=-linkmode=external")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	interp, err := interpreter(f)
	f.Close()
	if err != nil || interp == "" {
		t.Fatalf("the cgo build has no PT_INTERP (%v): the test cannot check a dynamic binary", err)
	}
	files, err := RuntimeFiles(bin)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]string{}
	sonames := map[string]bool{}
	for _, rf := range files {
		byPath[rf.Path] = rf.Source
		sonames[filepath.Base(rf.Path)] = true
		st, err := os.Lstat(rf.Source)
		if err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: source %s is not a regular file (%v)", rf.Path, rf.Source, err)
		}
	}
	if byPath[interp] == "" {
		t.Errorf("the interpreter %s is not listed: %v", interp, files)
	}
	var sawLibc bool
	for _, rf := range files {
		if strings.HasPrefix(filepath.Base(rf.Path), "libc.so") {
			sawLibc = true
		}
		if rf.Path == interp {
			continue
		}
		lib, err := elf.Open(rf.Source)
		if err != nil {
			t.Fatal(err)
		}
		needed, _ := lib.DynString(elf.DT_NEEDED)
		lib.Close()
		for _, n := range needed {
			if !sonames[filepath.Base(n)] {
				t.Errorf("%s needs %s, which is not listed: %v", rf.Path, n, files)
			}
		}
	}
	if !sawLibc {
		t.Errorf("libc is not listed: %v", files)
	}
}

// TestNewImageContext: a static binary's context and tag are exactly what they always were; a dynamic one's
// tag changes with any copied file, and its recipe copies the runtime files onto the root.
func TestNewImageContext(t *testing.T) {
	bin := []byte("kewplan binary bytes")
	static, err := NewImageContext(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantTag, _ := ImageTag(strings.NewReader(string(bin)))
	if static.Tag != wantTag || string(static.Files["Dockerfile"]) != Dockerfile || len(static.Files) != 2 ||
		string(static.Files["kewplan"]) != string(bin) || !static.Executables["kewplan"] {
		t.Errorf("static context = %q %v, want tag %s and only Dockerfile and kewplan", static.Tag, static.Executables, wantTag)
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ld, libc := write("ld", "loader"), write("libc", "libc one")
	runtime := []RuntimeFile{{Path: "/usr/local/lib/libc.so.6", Source: libc}, {Path: "/lib64/ld-linux-x86-64.so.2", Source: ld}}
	dyn, err := NewImageContext(bin, runtime)
	if err != nil {
		t.Fatal(err)
	}
	df := string(dyn.Files["Dockerfile"])
	for _, want := range []string{"FROM scratch\n", "COPY rootfs/ /\n", "ENV LD_LIBRARY_PATH=/lib64:/usr/local/lib\n", "USER 65534:65534\n", `"egress-proxy", "--config", "-"`} {
		if !strings.Contains(df, want) {
			t.Errorf("dynamic Dockerfile lacks %q:\n%s", want, df)
		}
	}
	if string(dyn.Files["rootfs/lib64/ld-linux-x86-64.so.2"]) != "loader" || !dyn.Executables["rootfs/lib64/ld-linux-x86-64.so.2"] ||
		string(dyn.Files["rootfs/usr/local/lib/libc.so.6"]) != "libc one" {
		t.Errorf("dynamic context files: %v", dyn.Executables)
	}
	if dyn.Tag == static.Tag || !strings.HasPrefix(dyn.Tag, ImageRepository+":") || len(dyn.Tag) != len(static.Tag) {
		t.Errorf("dynamic tag %q (static %q)", dyn.Tag, static.Tag)
	}
	again, _ := NewImageContext(bin, []RuntimeFile{runtime[1], runtime[0]})
	if again.Tag != dyn.Tag {
		t.Errorf("the tag depends on the order of the runtime files: %s, %s", again.Tag, dyn.Tag)
	}
	write("libc", "libc two")
	changed, err := NewImageContext(bin, runtime)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Tag == dyn.Tag {
		t.Errorf("a changed library kept the tag %s", dyn.Tag)
	}
	moved, _ := NewImageContext(bin, []RuntimeFile{{Path: "/usr/lib/libc.so.6", Source: libc}, runtime[1]})
	if moved.Tag == changed.Tag {
		t.Errorf("a library at another path kept the tag %s", changed.Tag)
	}
	for _, bad := range []string{"lib/libc.so.6", "/usr/../lib/libc.so.6", BinaryPath} {
		if _, err := NewImageContext(bin, []RuntimeFile{{Path: bad, Source: libc}}); err == nil {
			t.Errorf("runtime path %q was accepted", bad)
		}
	}
}

func TestCheckKewplanBinary(t *testing.T) {
	if err := CheckKewplanBinary(buildProgram(t, false)); err == nil || !strings.Contains(err.Error(), "not of kewplan") {
		t.Errorf("CheckKewplanBinary(another Go program) = %v, want a refusal", err)
	}
}
