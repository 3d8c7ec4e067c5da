package base

import (
	"os"
	"path/filepath"
	"slices"
)

// WriteFileDurable writes data to path so that a crash leaves either the
// old file or the new one, and a return without error means the new one
// survives power loss: a synced temporary file beside it, renamed over
// it, then the directory synced.
func WriteFileDurable(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a failure; gone after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir (files created, renamed or removed in
// it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAllDurable is os.MkdirAll whose new directories survive a power
// loss: the parent of each directory it creates is synced, top-down (a
// process crash keeps a new directory anyway; a power loss keeps its entry
// only once its parent was synced, and with it everything synced into
// it). synced, if not nil, sees each directory synced (tests).
func MkdirAllDurable(dir string, perm os.FileMode, synced func(dir string)) error {
	exists := func(d string) bool { _, err := os.Stat(d); return err == nil }
	missing := MissingDirs(filepath.Clean(dir), exists, filepath.Dir)
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		parent := filepath.Dir(d)
		if synced != nil {
			synced(parent)
		}
		if err := SyncDir(parent); err != nil {
			return err
		}
	}
	return nil
}

// MissingDirs returns dir and those of its ancestors that do not exist,
// outermost first: the directories a MkdirAll of dir creates, each of
// whose parent must then be synced for it to be durable. exists and
// parent are the file system's; the walk stops at the first that exists,
// at the root and at the current directory ("" or ".").
func MissingDirs(dir string, exists func(string) bool, parent func(string) string) []string {
	var missing []string
	for d := dir; d != "" && d != "." && !exists(d); {
		missing = append(missing, d)
		p := parent(d)
		if p == d {
			break
		}
		d = p
	}
	slices.Reverse(missing)
	return missing
}
