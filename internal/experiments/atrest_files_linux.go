package experiments

import (
	"os"
	"syscall"
)

// errNoData is what SEEK_DATA returns past the last data extent.
var errNoData error = syscall.ENXIO

// dataExtents lists the data extents of f (SEEK_DATA = 3, SEEK_HOLE = 4 on
// Linux).
func dataExtents(f *os.File) ([][2]int64, error) { return dataExtentsBySeek(f, 3, 4) }
