package base

import (
	"os"
	"path/filepath"
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
	var created []string // deepest first
	for d := filepath.Clean(dir); ; {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		parent := filepath.Dir(created[i])
		if synced != nil {
			synced(parent)
		}
		if err := SyncDir(parent); err != nil {
			return err
		}
	}
	return nil
}
