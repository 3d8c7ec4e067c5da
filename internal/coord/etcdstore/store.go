package etcdstore

import (
	"context"
	"path/filepath"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/flashmend/flashmend/internal/base"
)

// Options configures the embedded store. Zero values take the defaults
// noted.
type Options struct {
	// Dir is the coordinator's directory: the members keep their data in
	// Dir/etcd, Dir/etcd-2, ...
	Dir string
	// Members is 1 (default), 3 or 5.
	Members int
	// NoFsync disables etcd's fsyncs (tests).
	NoFsync bool
	// KeepDamaged makes a damaged store an error instead of setting it
	// aside for a new one.
	KeepDamaged bool
	// Clock dates the names of set-aside stores (default the system
	// clock).
	Clock base.Clock
	// Logf receives operational messages; nil discards them.
	Logf func(format string, args ...any)
}

// Store is a running embedded etcd: one member, or a replicated store of
// several in this process.
type Store struct {
	etcds     []*embed.Etcd
	endpoints []string
	setAside  string
}

// starter carries the options through a start and remembers what it set
// aside.
type starter struct {
	opts     Options
	setAside string
}

// Start checks, repairs and starts the store in opts.Dir.
func Start(ctx context.Context, opts Options) (*Store, error) {
	if opts.Members == 0 {
		opts.Members = 1
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &starter{opts: opts}
	switch opts.Members {
	case 1:
		e, eps, err := s.startStore(ctx, filepath.Join(opts.Dir, "etcd"))
		if err != nil {
			return nil, err
		}
		return &Store{etcds: []*embed.Etcd{e}, endpoints: eps, setAside: s.setAside}, nil
	case 3, 5:
		es, eps, err := s.startMembers(ctx, opts.Dir, opts.Members)
		if err != nil {
			return nil, err
		}
		return &Store{etcds: es, endpoints: eps, setAside: s.setAside}, nil
	}
	return nil, base.InvalidArgumentf("coordinator: %d etcd members (want 1, 3 or 5)", opts.Members)
}

// Endpoints are the members' client URLs.
func (s *Store) Endpoints() []string { return s.endpoints }

// SetAside is where a damaged single-member store was moved at start (""
// if none was): the coordinator then rebuilds its index from the nodes.
func (s *Store) SetAside() string { return s.setAside }

// Close stops every member, each bounded by etcdCloseTimeout.
func (s *Store) Close() {
	var wg sync.WaitGroup
	for _, e := range s.etcds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			closeEtcdBounded(e)
		}()
	}
	wg.Wait()
}
