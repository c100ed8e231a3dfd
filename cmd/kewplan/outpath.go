package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkOutPath checks, before anything is planned or printed, that a plan can be saved at path: its directory
// exists, is a directory and is writable, and path itself is absent or a regular file. The error names the
// user's path, never the temporary file the plan is first written to.
func checkOutPath(path string) error {
	dir := filepath.Dir(path)
	fail := func(why, fix string) error {
		return fmt.Errorf("cannot save the plan to %q: %s; %s", path, why, fix)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Sprintf("the directory %q does not exist", dir), "create it first or choose another --out path")
	case err != nil:
		return fail(fmt.Sprintf("the directory %q cannot be read: %v", dir, errors.Unwrap(err)), "choose another --out path")
	case !fi.IsDir():
		return fail(fmt.Sprintf("%q is not a directory", dir), "choose another --out path")
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fail(fmt.Sprintf("the directory %q is not writable", dir), "choose another --out path")
	}
	fi, err = os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fail(err.Error(), "choose another --out path")
	case fi.IsDir():
		return fail("it is a directory", "name a file, for example "+filepath.Join(path, "kewplan.plan"))
	case !fi.Mode().IsRegular():
		return fail("it exists and is not a regular file ("+fi.Mode().Type().String()+")", "remove it or choose another --out path")
	}
	return nil
}
