package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms a process: <name>@<n>.
const Env = "FLASHMEND_CRASHPOINT"

// Point is one registered crash point.
type Point struct {
	Name string
	// Layer is the package whose step it is (for the report).
	Layer string
	// Doc says in one line which persistence step the point sits at and
	// what is on disk when the process dies there.
	Doc string
}

// Points is every crash point, in report order. NB: append only through
// this list; a Hit of a name not here is caught by TestEveryHitRegistered.
var Points = []Point{
	{"raftlog-append", "raftlog", "a raft Ready's records (entries, hard state) encoded; neither copy of the log written"},
	{"raftlog-hardstate", "raftlog", "a hard state about to be written alone (a Ready with a new term or vote; at start, the commit index raised to what the state machine applied)"},
	{"raftlog-copy", "raftlog", "copy 0 of an append written and synced, copy 1 not yet handed to its writer"},
	{"raftlog-synced", "raftlog", "copy 0 of an append synced and copy 1 queued for its writer (written and synced behind Save), the Ready not yet acknowledged to raft"},
	{"raftlog-rewrite", "raftlog", "a new log generation written and synced under temporary names, not yet renamed"},
	{"raftlog-rename", "raftlog", "copy 0 of a new log generation renamed into place, copy 1 not yet"},
	{"chunk-data", "objstore", "a new chunk's data written, its sums record not yet"},
	{"chunk-sums", "objstore", "a chunk's data and sums record written, the write not yet acknowledged"},
	{"index-update", "objstore", "a blob's chunks written, its local object index entry not yet"},
	{"meta-copy", "objstore", "one copy of a triplicated metadata file (index entry) written, the next not yet"},
	{"kv-apply", "kv/engine", "a committed raft entry's batch and applied index committed to Pebble (not synced), not yet published"},
	{"patch-ingest", "kv/engine", "a patch's or rebuild's sstables written, not yet ingested (IngestAndExcise)"},
	{"patch-applied", "kv/engine", "a patch ingested, its applied index not yet written and flushed"},
	{"sdf-meta-page", "sdf/journal", "one page of the metadata journal programmed on every copy, the rest of the stream not yet"},
	{"sdf-checkpoint-body", "sdf/journal", "a checkpoint body written to data zones, its root (superblock, body place) not yet"},
	{"sdf-checkpoint", "sdf/journal", "a new checkpoint epoch's root written on every copy, the old body's zones not yet released"},
	{"sdf-gc-move", "sdf", "a run of live pages copied to a new zone by garbage collection, the old extent not yet released"},
	{"sdf-zone-erased", "sdf", "a zone's blocks erased, the reset not yet in the journal"},
}

// Lookup returns the registered point called name.
func Lookup(name string) (Point, bool) {
	for _, p := range Points {
		if p.Name == name {
			return p, true
		}
	}
	return Point{}, false
}

// Names returns every registered point's name, in report order.
func Names() []string {
	out := make([]string, len(Points))
	for i, p := range Points {
		out[i] = p.Name
	}
	return out
}

// Spec is an armed point: crash at the At-th hit of Name.
type Spec struct {
	Name string
	At   int64 // 1 is the first hit
}

func (s Spec) String() string { return fmt.Sprintf("%s@%d", s.Name, s.At) }

// Parse reads <name>@<n> (or <name>, meaning @1) and checks it against
// the registry.
func Parse(s string) (Spec, error) {
	name, count, hasAt := strings.Cut(strings.TrimSpace(s), "@")
	spec := Spec{Name: name, At: 1}
	if name == "" {
		return Spec{}, fmt.Errorf("crashpoint: %q: no point name (want <name>@<n>, e.g. raftlog-copy@3)", s)
	}
	if _, ok := Lookup(name); !ok {
		return Spec{}, fmt.Errorf("crashpoint: unknown point %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	if hasAt {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return Spec{}, fmt.Errorf("crashpoint: %q: the hit count %q is not a positive integer", s, count)
		}
		spec.At = n
	}
	return spec, nil
}

// armed is the point this process crashes at; nil when disarmed (Hit's
// fast path). NB: process-wide by nature (a crash is process-wide), set
// only by ArmFromEnv at start and by tests.
var armed atomic.Pointer[arming]

type arming struct {
	spec  Spec
	hits  atomic.Int64
	crash func(Spec)
}

// Hit marks the persistence step name. Disarmed, it is one atomic load;
// armed at name, its At-th call crashes the process.
func Hit(name string) {
	a := armed.Load()
	if a == nil || a.spec.Name != name {
		return
	}
	if a.hits.Add(1) == a.spec.At {
		a.crash(a.spec)
	}
}

// HitIf is Hit when cond holds (keeps a conditional hook one line).
func HitIf(cond bool, name string) {
	if cond {
		Hit(name)
	}
}

// ArmFromEnv arms the process from Env, if set. It returns the point
// armed (ok false when Env is unset or empty) or an error naming what is
// wrong with the variable's value.
func ArmFromEnv() (spec Spec, ok bool, err error) {
	v, set := os.LookupEnv(Env)
	if !set || strings.TrimSpace(v) == "" {
		return Spec{}, false, nil
	}
	spec, err = Parse(v)
	if err != nil {
		return Spec{}, false, fmt.Errorf("%s=%q: %w", Env, v, err)
	}
	Arm(spec, Crash)
	return spec, true, nil
}

// Arm arms spec with crash as what happens at its hit (Crash in a real
// process; a recorder in tests). It replaces any earlier arming.
func Arm(spec Spec, crash func(Spec)) {
	armed.Store(&arming{spec: spec, crash: crash})
}

// Disarm makes every Hit a no-op again.
func Disarm() { armed.Store(nil) }

// Hits returns how often the armed point has been hit (0 when disarmed).
func Hits() int64 {
	if a := armed.Load(); a != nil {
		return a.hits.Load()
	}
	return 0
}

// Reached is the line a crashing process writes before it dies; the
// harness matches it.
func Reached(spec Spec) string { return fmt.Sprintf("crashpoint: %s reached, crashing", spec) }

// Crash ends the process at once: one line to standard output and error
// (raw write calls, no buffer), then SIGKILL to itself. Nothing after the
// point runs: no defer, no flush, no Close.
func Crash(spec Spec) {
	line := []byte(Reached(spec) + "\n")
	_, _ = syscall.Write(1, line)
	_, _ = syscall.Write(2, line)
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
	// SIGKILL to oneself is delivered before Kill returns to user code;
	// should it not be, exit without running anything else.
	os.Exit(137)
}
