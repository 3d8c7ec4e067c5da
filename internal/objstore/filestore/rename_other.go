//go:build !linux

package filestore

// renameNoReplace reports false: the pool of recycle.go is used on Linux
// only.
func renameNoReplace(oldpath, newpath string) (ok bool, err error) { return false, nil }
