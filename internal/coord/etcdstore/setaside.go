package etcdstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// setAsideStore moves a damaged embedded etcd data directory out of the way
// (never deleting it) so that a new store starts, and remembers to rebuild
// the index from the nodes.
func (s *starter) setAsideStore(dataDir string, why error) error {
	dst := fmt.Sprintf("%s.damaged-%s", dataDir, s.opts.Clock.Now().UTC().Format("20060102T150405.000"))
	if err := os.Rename(dataDir, dst); err != nil {
		return fmt.Errorf("coordinator: etcd store %s is damaged (%v) and could not be set aside: %w", dataDir, why, err)
	}
	s.opts.Logf("coordinator: etcd store %s is damaged: %v; moved it to %s, starting a new store and rebuilding the object index from the nodes",
		dataDir, why, filepath.Base(dst))
	s.setAside = dst
	return nil
}

// storeDamaged reports whether a start error of the embedded etcd is about
// its data (as opposed to ports, permissions, a lock or a cancelled start).
func storeDamaged(err error) bool {
	return errors.Is(err, errEtcdStore)
}
