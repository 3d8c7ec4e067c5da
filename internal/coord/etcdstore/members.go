package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/flashmend/flashmend/internal/base"
)

// A replicated store: with Config.EtcdMembers = 3 the coordinator runs its
// embedded etcd as a three-member cluster, each member with its own data
// directory (Dir/etcd for the first, Dir/etcd-2, Dir/etcd-3) and ports, so
// that a member whose store is damaged or lost is replaced from the other
// two instead of the whole index being rebuilt from the nodes:
//
//   - every member's store is checked first (Check); a damaged one
//     is set aside (renamed, never deleted), and a member whose remembered
//     peer port is taken is replaced too (its peers know it by address);
//   - the members with a store start together (each needs a quorum to
//     become ready); then each member to replace is removed from the
//     membership, added again with its address, and started empty: it
//     catches up from the others (raft snapshot and log);
//   - with no member left that has a store (a new coordinator), the three
//     are bootstrapped together; when the members with a store cannot form a
//     quorum (two of three damaged), every store is set aside and a new
//     cluster bootstrapped, and the index is rebuilt from the nodes as for a
//     single lost store.
//
// NB: the members share the coordinator's process (and, unless their
// directories are placed apart, its disk): they survive the damage or loss
// of one member's files, not the loss of the process or the machine;
// members in separate coordinator processes are future work.

// memberReadyTimeout bounds how long the members with a store take to form
// a quorum before the coordinator gives up on them.
const memberReadyTimeout = 30 * time.Second

// storeMember is one member of a replicated store.
type storeMember struct {
	name  string
	dir   string
	ports ports
	// replace: start empty and join the running members (its store was
	// damaged, lost, or its peer address moved).
	replace bool
	e       *embed.Etcd
}

func (m *storeMember) peerURL() string {
	u := m.ports.peerURL()
	return u.String()
}

func (m *storeMember) clientURL() string {
	u := m.ports.clientURL()
	return u.String()
}

func memberDir(dir string, i int) string {
	if i == 0 {
		return filepath.Join(dir, "etcd")
	}
	return filepath.Join(dir, fmt.Sprintf("etcd-%d", i+1))
}

// startMembers starts (or repairs) the replicated store of n members under
// dir and returns the running members and their client endpoints.
func (s *starter) startMembers(ctx context.Context, dir string, n int) ([]*embed.Etcd, []string, error) {
	members := make([]*storeMember, n)
	withStore, existed := 0, 0
	for i := range members {
		m := &storeMember{name: fmt.Sprintf("m%d", i+1), dir: memberDir(dir, i)}
		members[i] = m
		if _, err := os.Stat(m.dir); err == nil {
			existed++
		}
		data := filepath.Join(m.dir, "data")
		p, moved, err := memberPorts(m.dir)
		if err != nil {
			return nil, nil, err
		}
		m.ports = p
		if _, err := os.Stat(filepath.Join(data, "member")); errors.Is(err, os.ErrNotExist) {
			m.replace = true
			continue
		}
		err = Check(data)
		switch {
		case err != nil && !base.IsCorruption(err):
			return nil, nil, err
		case err != nil && s.opts.KeepDamaged:
			return nil, nil, fmt.Errorf("coordinator: member %s: %w", m.name, err)
		case err != nil || moved:
			why := err
			if why == nil {
				why = fmt.Errorf("its peer port %d is taken", p.Peer)
			}
			if err := s.setAsideMember(m, why); err != nil {
				return nil, nil, err
			}
			m.replace = true
		default:
			withStore++
		}
	}
	if withStore == 0 {
		return s.bootstrapMembers(ctx, members)
	}
	// A quorum needs a majority of the members that ever existed (a store
	// grown from one member has only the first); starting fewer would wait
	// forever.
	var err error
	if withStore <= existed/2 {
		err = fmt.Errorf("%d of %d members have a store", withStore, existed)
	} else {
		err = s.startExisting(ctx, members)
	}
	if err != nil {
		// No quorum among the members with a store: start afresh; the
		// index is rebuilt from the nodes.
		s.opts.Logf("coordinator: the store's members with data do not form a quorum (%v); setting every member aside and starting a new store", err)
		for _, m := range members {
			if m.e != nil {
				closeEtcdBounded(m.e)
				m.e = nil
			}
			if !m.replace {
				if err := s.setAsideMember(m, errors.New("no quorum")); err != nil {
					return nil, nil, err
				}
				m.replace = true
			}
			// Fresh ports: an abandoned member may still hold its own.
			if err := os.Remove(filepath.Join(m.dir, "ports.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, nil, err
			}
			if m.ports, _, err = memberPorts(m.dir); err != nil {
				return nil, nil, err
			}
		}
		return s.bootstrapMembers(ctx, members)
	}
	for _, m := range members {
		if m.replace {
			if err := s.replaceMember(ctx, members, m); err != nil {
				closeMembers(members)
				return nil, nil, err
			}
		}
	}
	return running(members)
}

func (s *starter) setAsideMember(m *storeMember, why error) error {
	data := filepath.Join(m.dir, "data")
	if _, err := os.Stat(data); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dst := fmt.Sprintf("%s.damaged-%s", data, s.opts.Clock.Now().UTC().Format("20060102T150405.000"))
	if err := os.Rename(data, dst); err != nil {
		return fmt.Errorf("coordinator: store member %s in %s is damaged (%v) and could not be set aside: %w", m.name, m.dir, why, err)
	}
	s.opts.Logf("coordinator: store member %s in %s: %v; moved its data to %s, it is replaced from the other members", m.name, m.dir, why, filepath.Base(dst))
	return nil
}

// initialCluster is the etcd initial-cluster flag for members.
func initialCluster(members []*storeMember) string {
	var parts []string
	for _, m := range members {
		parts = append(parts, m.name+"="+m.peerURL())
	}
	return strings.Join(parts, ",")
}

// launchAll starts members together (each needs the others for a quorum)
// and waits until every one serves.
func (s *starter) launchAll(ctx context.Context, members []*storeMember, cluster, state string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	for i, m := range members {
		wg.Add(1)
		go func(i int, m *storeMember) {
			defer wg.Done()
			cfg := etcdConfig(m.dir, m.ports, m.name, cluster, state, s.opts.NoFsync, "error")
			m.e, errs[i] = launchEtcd(ctx, cfg, m.dir, memberReadyTimeout)
		}(i, m)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bootstrapMembers starts a new cluster of every member.
func (s *starter) bootstrapMembers(ctx context.Context, members []*storeMember) ([]*embed.Etcd, []string, error) {
	for attempt := 1; ; attempt++ {
		err := s.launchAll(ctx, members, initialCluster(members), embed.ClusterStateFlagNew)
		if err == nil {
			break
		}
		closeMembers(members)
		if attempt == 3 || !isAddrInUse(err) {
			return nil, nil, err
		}
		// A port found free was taken by another process before etcd bound
		// it (a shared machine): the store is new, so it starts again, on
		// new ports.
		s.opts.Logf("coordinator: starting the store: %v; again on new ports", err)
		for _, m := range members {
			if err := os.RemoveAll(filepath.Join(m.dir, "data")); err != nil {
				return nil, nil, err
			}
			if err := os.Remove(filepath.Join(m.dir, "ports.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, nil, err
			}
			if m.ports, _, err = memberPorts(m.dir); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, m := range members {
		m.replace = false
	}
	return running(members)
}

// startExisting starts the members that have a store.
func (s *starter) startExisting(ctx context.Context, members []*storeMember) error {
	var have []*storeMember
	for _, m := range members {
		if !m.replace {
			have = append(have, m)
		}
	}
	// The configuration is ignored for a member with a store (its
	// membership is in its WAL), but etcd still checks it for itself.
	return s.launchAll(ctx, have, initialCluster(members), embed.ClusterStateFlagExisting)
}

// replaceMember removes m from the membership (by its address, if the
// membership has it), adds it again, and starts it empty: it catches up
// from the running members.
func (s *starter) replaceMember(ctx context.Context, members []*storeMember, m *storeMember) error {
	eps, _ := endpointsOf(members)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, memberReadyTimeout)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: store members: %w", err)
	}
	names := map[string]bool{}
	for _, x := range members {
		names[x.name] = true
	}
	for _, mm := range list.Members {
		stale := mm.Name == m.name
		for _, u := range mm.PeerURLs {
			stale = stale || u == m.peerURL()
		}
		if stale {
			if _, err := cli.MemberRemove(ctx, mm.ID); err != nil {
				return fmt.Errorf("coordinator: remove store member %s: %w", m.name, err)
			}
		}
	}
	added, err := cli.MemberAdd(ctx, []string{m.peerURL()})
	if err != nil {
		return fmt.Errorf("coordinator: add store member %s: %w", m.name, err)
	}
	// The new member's view: every current member by name (the added
	// one has no name until it starts: it is m).
	var parts []string
	for _, mm := range added.Members {
		name := mm.Name
		if mm.ID == added.Member.ID {
			name = m.name
		}
		if name == "" {
			continue // added before and never started: not ours to name
		}
		for _, u := range mm.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	// The new member checks its view against the membership of the peer
	// it first reaches, which may not have applied the MemberAdd yet
	// ("member count is unequal"): wait until every running member lists
	// it, and start again if a peer still lagged.
	waitMemberListed(ctx, eps, added.Member.ID)
	for attempt := 1; ; attempt++ {
		if err := os.RemoveAll(filepath.Join(m.dir, "data")); err != nil {
			return err
		}
		cfg := etcdConfig(m.dir, m.ports, m.name, strings.Join(parts, ","), embed.ClusterStateFlagExisting, s.opts.NoFsync, "error")
		m.e, err = launchEtcd(ctx, cfg, m.dir, memberReadyTimeout)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "member count is unequal") || ctx.Err() != nil {
			return fmt.Errorf("coordinator: start the new store member %s: %w", m.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.replace = false
	s.opts.Logf("coordinator: store member %s in %s replaced; it caught up from the others", m.name, m.dir)
	return nil
}

// waitMemberListed waits (bounded by ctx) until the member list each of
// eps serves includes id.
func waitMemberListed(ctx context.Context, eps []string, id uint64) {
	for _, ep := range eps {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			continue
		}
		for ctx.Err() == nil {
			list, err := cli.MemberList(ctx)
			if err == nil && slices.ContainsFunc(list.Members, func(mm *etcdserverpb.Member) bool { return mm.ID == id }) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cli.Close()
	}
}

func endpointsOf(members []*storeMember) ([]string, bool) {
	var eps []string
	all := true
	for _, m := range members {
		if m.e != nil {
			eps = append(eps, m.clientURL())
		} else {
			all = false
		}
	}
	return eps, all
}

func running(members []*storeMember) ([]*embed.Etcd, []string, error) {
	var es []*embed.Etcd
	for _, m := range members {
		if m.e == nil {
			closeMembers(members)
			return nil, nil, fmt.Errorf("coordinator: store member %s is not running", m.name)
		}
		es = append(es, m.e)
	}
	eps, _ := endpointsOf(members)
	return es, eps, nil
}

// isAddrInUse reports whether err is a listener that could not bind its
// port.
func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func closeMembers(members []*storeMember) {
	for _, m := range members {
		if m.e != nil {
			closeEtcdBounded(m.e)
			m.e = nil
		}
	}
}
