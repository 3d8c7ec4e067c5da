//go:build !linux

package filestore

import "github.com/flashmend/flashmend/internal/fsys"

// writeAt2 reports false: vectored writes are used on Linux only (the
// caller copies the two parts into one buffer).
func writeAt2(f fsys.File, a, b []byte, off int64) (bool, error) { return false, nil }
