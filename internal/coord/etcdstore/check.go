package etcdstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"

	"github.com/flashmend/flashmend/internal/base"
)

// Check looks at an embedded etcd's data directory before etcd is
// started on it, because etcd does not fail cleanly on every kind of damage:
// a damaged bbolt page panics inside etcd's own goroutines (the process
// dies), and a WAL that lost entries the backend has applied (truncated, or
// deleted while the backend stayed) makes etcd wait forever for its own
// publish, with a Close that never returns. It returns nil for a directory
// that does not exist yet or that looks whole, and a corruption error that
// says what is damaged otherwise.
//
// What it checks: the backend (member/snap/db) opens read-only and passes
// bbolt's own consistency check (page structure, free list); the WAL
// (member/wal) exists when the backend does, every record up to its end
// verifies (a torn last record is what a crash leaves and is allowed), and
// its entries reach the backend's consistent index.
func Check(dataDir string) (err error) {
	member := filepath.Join(dataDir, "member")
	if _, err := os.Stat(member); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = base.CorruptionErrorf("coord: etcd store %s: checking it panicked: %v", dataDir, r)
		}
	}()
	db := filepath.Join(member, "snap", "db")
	consistent, dbErr := checkBackend(db)
	if dbErr != nil {
		return dbErr
	}
	walDir := filepath.Join(member, "wal")
	names, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if len(names) == 0 {
		if _, err := os.Stat(db); err == nil {
			return base.CorruptionErrorf("coord: etcd store %s: the WAL (%s) is missing while the backend exists", dataDir, walDir)
		}
		return nil
	}
	lg := zap.NewNop()
	snaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return base.CorruptionErrorf("coord: etcd store %s: WAL %s: %v", dataDir, walDir, err)
	}
	start := snaps[len(snaps)-1]
	w, err := wal.OpenForRead(lg, walDir, start)
	if err != nil {
		return base.CorruptionErrorf("coord: etcd store %s: WAL %s: %v", dataDir, walDir, err)
	}
	_, _, ents, err := w.ReadAll()
	w.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return base.CorruptionErrorf("coord: etcd store %s: WAL %s: %v", dataDir, walDir, err)
	}
	last := start.GetIndex()
	if len(ents) > 0 {
		last = max(last, ents[len(ents)-1].GetIndex())
	}
	if consistent > last {
		return base.CorruptionErrorf("coord: etcd store %s: the WAL ends at entry %d but the backend has applied entry %d: the WAL lost entries", dataDir, last, consistent)
	}
	return nil
}

// maxCheckedBackendBytes bounds the backend size checkBackend reads into
// memory; a larger backend is not checked (etcd opens it as it is).
const maxCheckedBackendBytes = 1 << 30

// checkBackend walks etcd's bbolt backend (boltCheck) and returns the
// consistent index it records (0 when there is no backend yet).
func checkBackend(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("coord: etcd backend %s: %w", path, err)
	}
	if fi.Size() > maxCheckedBackendBytes {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("coord: etcd backend %s: %w", path, err)
	}
	v, err := boltCheck(b, []byte("meta"), []byte("consistent_index"))
	if err != nil {
		return 0, base.CorruptionErrorf("coord: etcd backend %s: %v", path, err)
	}
	if len(v) != 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), nil
}
