//go:build !linux

package pagefile

import (
	"errors"
	"os"
)

// punchHole is unsupported here; erase zeroes the slot headers instead.
func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }

// lockFile is a no-op where flock is not wired up: do not open one device
// from two processes.
func lockFile(*os.File) error { return nil }
