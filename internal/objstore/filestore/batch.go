package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/objstore"
)

var _ objstore.Batcher = (*Store)(nil)

// NewBatch implements objstore.Batcher: a batch's writes of packed names
// (a blob's chunk data and sums records) are appended to their packs
// without an fsync each, and Commit fsyncs every pack they went to once.
// Other names are written (and synced) at once, as without a batch.
//
// NB: a PUT's chunk of 64 KiB cost two fsyncs (its data record, then its
// sums record) per replica: 256 a replica for an 8 MiB object, each
// waiting for the device. A batch of the whole stream costs two.
func (s *Store) NewBatch() objstore.Batch {
	return &batch{s: s}
}

// batch is a Store's objstore.Batch. Invariant: every pack that holds a
// record appended for the batch and not yet synced is in packs (and has
// unsynced set), and so is every pack written by the batch whose file may
// run on past its records (stale).
type batch struct {
	s     *Store
	packs []*pack
}

func (b *batch) add(p *pack) {
	for _, q := range b.packs {
		if q == p {
			return
		}
	}
	b.packs = append(b.packs, p)
}

// Create implements objstore.Batch.
func (b *batch) Create(name string, data []byte) error {
	if _, err := b.s.path(name); err != nil {
		return err
	}
	if key, member, ok := packedName(name); ok {
		return b.s.packPut(name, key, member, data, b)
	}
	return b.s.Create(name, data)
}

// WriteFresh implements objstore.Batch.
func (b *batch) WriteFresh(name string, off int64, data []byte) error {
	if _, err := b.s.path(name); err != nil {
		return err
	}
	if off < 0 {
		return base.InvalidArgumentf("filestore: write at %d of %s", off, name)
	}
	if key, member, ok := packedName(name); ok {
		return b.s.packWriteFresh(name, key, member, off, data, b)
	}
	return b.s.WriteFresh(name, off, data)
}

// Commit implements objstore.Batch: one fsync per pack written. A pack
// removed since (its blob deleted) needs none; one whose file was closed
// (the store closed) is opened again to sync it. A failed fsync leaves the
// pack to be loaded again from its file before its next use.
func (b *batch) Commit() error {
	packs := b.packs
	b.packs = nil
	var first error
	for _, p := range packs {
		if err := b.s.syncPack(p); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// syncPack fsyncs p's file when records appended for a batch await it,
// and cuts off the bytes a reused file held past them (stale).
func (s *Store) syncPack(p *pack) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone {
		p.trimStaleLocked()
	}
	if p.gone || !p.unsynced {
		return nil
	}
	f := p.f
	if f == nil {
		var err error
		f, err = s.fs.OpenFile(p.path, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			p.unsynced = false // removed: nothing left to make durable
			return nil
		}
		if err != nil {
			return fmt.Errorf("filestore: sync pack %s: %w", p.key, err)
		}
		defer f.Close()
	}
	if err := f.Sync(); err != nil {
		// NB: after a failed fsync the kernel may have dropped the dirty
		// pages; what the file holds is read again before the next use.
		p.broken = true
		return fmt.Errorf("filestore: sync pack %s: %w", p.key, err)
	}
	p.unsynced = false
	return nil
}
