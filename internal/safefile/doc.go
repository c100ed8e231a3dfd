// Package safefile reads files whose path, type and size an attacker may choose (a configuration under review, a
// plan file from a pull request, an agent's checkout) without ever blocking on them: the file is opened
// non-blocking, checked with fstat to be a regular file within a size limit, and only then read.
//
// A named pipe (FIFO) opened for reading blocks until a writer appears, forever when none does; a character
// device such as /dev/zero never ends; a socket or a directory is no file to read. Each of these is refused with
// an error that names the path and what it is. The package does not decide what a caller does with the bytes,
// nor where a caller may read from (os.Root does that: see ReadIn).
package safefile
