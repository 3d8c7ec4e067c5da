package engine

import (
	"bytes"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// flushLog records the tables Pebble's memtable flushes wrote (its
// FlushEnd events), for ingestSpan's check of an excise: an ingest whose
// span holds keys of the memtable makes Pebble flush it first, and the
// excise then cuts the flushed table too, which the tables listed before
// the ingest do not show. With the flushes in between added to them, the
// tables before and after an excise (no compaction running: the
// compaction gate) say exactly which remainders it kept, without reading
// a row.
type flushLog struct {
	mu     sync.Mutex
	seq    uint64 // flushes recorded so far
	recent []flushed
}

type flushed struct {
	seq    uint64
	tables []tableBounds
}

// maxFlushLog bounds the flushes a flushLog keeps; an ingest that spans
// more (since) cannot tell what the excise cut.
const maxFlushLog = 32

// flushEnd is Pebble's EventListener.FlushEnd.
func (l *flushLog) flushEnd(info pebble.FlushInfo) {
	if info.Err != nil || info.Ingest {
		return // nothing written, or ingested tables already listed
	}
	f := flushed{}
	for _, t := range info.Output {
		f.tables = append(f.tables, tableBounds{backing: uint64(t.FileNum),
			smallest: bytes.Clone(t.Smallest.UserKey), largest: bytes.Clone(t.Largest.UserKey)})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	f.seq = l.seq
	if len(l.recent) == maxFlushLog {
		l.recent = append(l.recent[:0], l.recent[1:]...)
	}
	l.recent = append(l.recent, f)
}

// mark returns the position after the flushes recorded so far.
func (l *flushLog) mark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// since returns the tables of the flushes recorded after mark; complete
// is false if some of them are no longer kept.
func (l *flushLog) since(mark uint64) (tables []tableBounds, complete bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq == mark {
		return nil, true
	}
	if len(l.recent) == 0 || l.recent[0].seq > mark+1 {
		return nil, false
	}
	for _, f := range l.recent {
		if f.seq > mark {
			tables = append(tables, f.tables...)
		}
	}
	return tables, true
}
