//go:build !unix

package safefile

import "os"

// Without O_NONBLOCK, the best available is to stat before opening; special files are rare off Unix.
func openFlags(Options) int { return os.O_RDONLY }

func openNonBlocking(path string, opts Options) (*os.File, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if opts.NoFollow && info.Mode()&os.ModeSymlink != 0 {
		return nil, &Error{Path: path, Reason: "is a symbolic link, which is not followed here", Err: ErrNotRegular}
	}
	if info, err = os.Stat(path); err != nil {
		return nil, err
	}
	if err := Check(path, info, 0); err != nil {
		return nil, err
	}
	return os.Open(path)
}

func clearNonBlock(*os.File) error { return nil }

func isLoopError(error) bool { return false }
