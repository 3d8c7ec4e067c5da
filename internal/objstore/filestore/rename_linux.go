//go:build linux

package filestore

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// sysRenameat2 is renameat2(2)'s number where it is known (0: not used).
var sysRenameat2 = map[string]uintptr{"amd64": 316, "arm64": 276}[runtime.GOARCH]

const renameNoReplaceFlag = 1 // RENAME_NOREPLACE

// renameNoReplace renames oldpath to newpath unless newpath exists (then it
// fails with EEXIST), as one renameat2(2) with RENAME_NOREPLACE. ok is false
// when the platform has no such call here (nothing was done).
func renameNoReplace(oldpath, newpath string) (ok bool, err error) {
	if sysRenameat2 == 0 {
		return false, nil
	}
	o, err := syscall.BytePtrFromString(oldpath)
	if err != nil {
		return true, err
	}
	n, err := syscall.BytePtrFromString(newpath)
	if err != nil {
		return true, err
	}
	const atFDCWD = -100
	fd := atFDCWD
	_, _, errno := syscall.Syscall6(sysRenameat2, uintptr(fd), uintptr(unsafe.Pointer(o)), uintptr(fd), uintptr(unsafe.Pointer(n)), renameNoReplaceFlag, 0)
	if errno == syscall.ENOSYS || errno == syscall.EINVAL {
		return false, nil // an old kernel, or a file system without the flag
	}
	if errno != 0 {
		return true, &os.LinkError{Op: "renameat2", Old: oldpath, New: newpath, Err: errno}
	}
	return true, nil
}
