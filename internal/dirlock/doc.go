// Package dirlock keeps two flashmend processes off one data directory.
//
// # What it owns
//
// The file DIR/flashmend.lock: an advisory flock(2) lock held for the life of
// the process that serves DIR, with that process's ID written in the file so
// a second process can say who holds it. Lock fails at once (it never waits)
// with an error naming the directory and the holder's pid.
//
// # Invariants
//
//   - At most one open Lock per directory on a machine, also within one
//     process (flock locks belong to the open file, not the process).
//   - The lock file is never deleted: deleting it would let a later process
//     lock a new file while an older one still holds the unlinked one. A lock
//     file left behind by a dead process is harmless; the kernel dropped its
//     lock when the process ended.
//
// # Failure model
//
// A crash (even SIGKILL) releases the lock with the process. The pid in the
// file is a hint for the operator and is only trusted while the lock is
// held; Holder reports whether a process still holds it.
package dirlock
