package experiments

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncCountFS counts the syncs of the files opened through it, the raft
// logs' apart: what a KV operation costs the device, measured rather than
// derived.
type syncCountFS struct {
	vfs.FS
	raft, all atomic.Int64
}

type syncCountFile struct {
	vfs.File
	fs   *syncCountFS
	raft bool
}

func (f syncCountFile) count() {
	f.fs.all.Add(1)
	if f.raft {
		f.fs.raft.Add(1)
	}
}

func (f syncCountFile) Sync() error     { f.count(); return f.File.Sync() }
func (f syncCountFile) SyncData() error { f.count(); return f.File.SyncData() }

// SyncTo counts when it synced (Pebble's bytes-per-sync of tables).
func (f syncCountFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.count()
	}
	return full, err
}

func (fs *syncCountFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return syncCountFile{File: f, fs: fs, raft: strings.Contains(filepath.Base(name), "raftlog-")}, nil
}

func (fs *syncCountFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *syncCountFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, o...)
	return fs.wrap(name, f, err)
}

func (fs *syncCountFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// fsyncLatency is the median time of an fsync after a 1 KiB append, in a
// new file in dir, over n appends: the cost every synced log write pays on
// this file system, measured beside the systems that pay it.
func fsyncLatency(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1024)
	lat := make([]time.Duration, 0, n)
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], nil
}
