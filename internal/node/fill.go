package node

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/objstore"
)

// ballastPrefix names the ballast files Fill writes: outside the object
// store's name spaces ("d/", "i/", metadata), so no scrub, repair or
// listing of chunks sees them.
const ballastPrefix = "ballast/"

// ballastFile is the size of one ballast file (the last one is smaller).
const ballastFile = base.MiB

// Fill is the reliability harness's "device full" fault (the nemesis's
// fill): it writes ballast files straight to the node's device, past the
// repair reserve and the KV headroom that keep object writes back, until
// at most leave bytes are free or the device refuses a write (full). The
// node then meets what a device a runaway writer filled meets: object
// writes refused with no space, KV replicas whose raft log cannot persist
// fail-stop and are replaced once there is room again (Unfill). Only a
// store that reports its space (emulated flash) can be filled: on plain
// files the ballast would fill the host's file system. It returns the
// ballast and free bytes after the call.
func (n *Node) Fill(leave base.Bytes) (ballast, free base.Bytes, err error) {
	if leave < 0 {
		return 0, 0, base.InvalidArgumentf("fill: leave %d bytes is negative", leave)
	}
	var sr objstore.SpaceReporter
	switch st := n.inner.(type) {
	case *objstore.SDFStore:
		sr = st
	case *objstore.MemStore:
		sr = st
	default:
		return 0, 0, base.InvalidArgumentf("fill: node %s's store (%s) is not a device of its own; only an emulated flash device (or a memory store) can be filled, not the host's file system", n.id, n.inner.Name())
	}
	n.fillMu.Lock()
	defer n.fillMu.Unlock()
	names, err := n.inner.List(ballastPrefix)
	if err != nil {
		return 0, 0, fmt.Errorf("fill: %w", err)
	}
	seq := len(names)
	buf := make([]byte, ballastFile)
	// The file size halves at each refusal: the device's last free room
	// (a zone's tail, pages garbage collection frees) takes only small
	// writes.
	for size := ballastFile; size >= 4*base.KiB; {
		_, free, err = sr.Space()
		if err != nil {
			return 0, 0, fmt.Errorf("fill: space: %w", err)
		}
		room := free - leave
		if room < 4*base.KiB {
			break
		}
		name := fmt.Sprintf("%s%08d", ballastPrefix, seq)
		if err := n.inner.Put(name, buf[:min(room, size)]); err != nil {
			if base.IsNoSpace(err) || strings.Contains(err.Error(), "no space") {
				_ = n.inner.Delete(name) // a partial file, if any
				size /= 2
				continue
			}
			return 0, 0, fmt.Errorf("fill: %s: %w", name, err)
		}
		seq++
	}
	ballast, err = n.ballastBytes()
	if err != nil {
		return 0, 0, err
	}
	_, free, err = sr.Space()
	return ballast, free, err
}

// Unfill removes the ballast Fill wrote (after a restart too: the ballast
// files stay on the device until removed).
func (n *Node) Unfill() (free base.Bytes, err error) {
	n.fillMu.Lock()
	defer n.fillMu.Unlock()
	names, err := n.inner.List(ballastPrefix)
	if err != nil {
		return 0, fmt.Errorf("unfill: %w", err)
	}
	for _, name := range names {
		if err := n.inner.Delete(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("unfill: %s: %w", name, err)
		}
	}
	if sr, ok := n.inner.(objstore.SpaceReporter); ok {
		_, free, err = sr.Space()
	}
	return free, err
}

// ballastBytes sums the ballast files' sizes (reading them: a fault
// injection's cost, not a data path's).
func (n *Node) ballastBytes() (base.Bytes, error) {
	names, err := n.inner.List(ballastPrefix)
	if err != nil {
		return 0, fmt.Errorf("fill: %w", err)
	}
	var sum base.Bytes
	for _, name := range names {
		b, err := n.inner.Get(name)
		if err != nil {
			return 0, fmt.Errorf("fill: %s: %w", name, err)
		}
		sum += base.Bytes(len(b))
	}
	return sum, nil
}
