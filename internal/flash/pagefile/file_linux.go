package pagefile

import (
	"os"

	"golang.org/x/sys/unix"
)

// punchHole deallocates [off, off+n) of f, which then reads as zeros.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// lockFile takes an exclusive, non-blocking advisory lock on f.
func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
