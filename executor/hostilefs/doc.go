// Package hostilefs reads a directory tree an agent controlled without trusting any of it: every name, file type
// and link is hostile. It walks one component at a time from a directory descriptor with O_NOFOLLOW, opens role
// files only after fstatat says they are regular (O_NONBLOCK, O_NOCTTY, the very inode inspected) and refuses
// directories on another device, which stands in for openat2's RESOLVE_NO_XDEV without needing Linux 5.6. It
// never writes except to unlink one entry, and it needs a Unix host: elsewhere it has no API and callers refuse.
package hostilefs
