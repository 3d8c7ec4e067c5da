package filestore

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/flashmend/flashmend/internal/fsys"
)

// writeAt2 writes a then b, back to back, at off of f with one pwritev(2)
// when f is an operating system file, so that a record's header and its
// content need not be copied into one buffer first. It reports false, having
// written nothing, when f cannot take a vectored write (fsys.Mem in tests).
func writeAt2(f fsys.File, a, b []byte, off int64) (bool, error) {
	sc, ok := f.(syscall.Conn)
	// NB: pwritev takes the offset as two longs; only 64-bit platforms
	// are handled here (the high word 0).
	if !ok || len(a) == 0 || len(b) == 0 || off < 0 || unsafe.Sizeof(uintptr(0)) != 8 {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	iov := [2]syscall.Iovec{{Base: &a[0]}, {Base: &b[0]}}
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	var n uintptr
	var errno syscall.Errno
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.Syscall6(syscall.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), 2, uintptr(off), 0, 0)
			if errno != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		return true, err
	}
	if errno != 0 {
		return true, fmt.Errorf("pwritev: %w", errno)
	}
	// A regular file takes the whole write but on error (ENOSPC, say,
	// after part of it): the rest goes out as plain writes, which then
	// report the error.
	w := int(n)
	if w < len(a) {
		if _, err := f.WriteAt(a[w:], off+int64(w)); err != nil {
			return true, err
		}
		w = len(a)
	}
	if w < len(a)+len(b) {
		if _, err := f.WriteAt(b[w-len(a):], off+int64(w)); err != nil {
			return true, err
		}
	}
	return true, nil
}
