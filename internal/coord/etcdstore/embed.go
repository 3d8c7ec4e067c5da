package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/flashmend/flashmend/internal/base"
)

// ports are the embedded etcd's ports, kept in the coordinator's directory
// so that a restart reuses them when they are still free.
type ports struct {
	Client int `json:"client"`
	Peer   int `json:"peer"`
}

func freePort(want int) (int, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", want))
	if err != nil && want != 0 {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// memberPorts returns the ports of the member in dir: the ones it used
// last time when they are still free (moved reports that they were not, so
// the member's peer address changed), and remembers them.
func memberPorts(dir string) (p ports, moved bool, err error) {
	// The etcd member's directory (its data under it) must survive a
	// power loss with it.
	if err := base.MkdirAllDurable(dir, 0o755, nil); err != nil {
		return p, false, err
	}
	portsFile := filepath.Join(dir, "ports.json")
	if b, err := os.ReadFile(portsFile); err == nil {
		if json.Unmarshal(b, &p) != nil {
			p = ports{} // a bad file only means new ports
		}
	}
	old := p
	if p.Client, err = freePort(p.Client); err != nil {
		return p, false, err
	}
	if p.Peer, err = freePort(p.Peer); err != nil || p.Peer == p.Client {
		if p.Peer, err = freePort(0); err != nil {
			return p, false, err
		}
	}
	if b, err := json.Marshal(p); err == nil {
		if err := os.WriteFile(portsFile, b, 0o644); err != nil {
			return p, false, fmt.Errorf("coord: remember etcd ports: %w", err)
		}
	}
	return p, old.Peer != 0 && old.Peer != p.Peer, nil
}

func (p ports) clientURL() url.URL {
	u, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p.Client))
	return *u
}

func (p ports) peerURL() url.URL {
	u, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p.Peer))
	return *u
}

// etcdConfig is the embedded etcd configuration of a member in dir. name
// and initialCluster are empty for the single default member.
func etcdConfig(dir string, p ports, name, initialCluster, state string, noFsync bool, logLevel string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cu, pu := p.clientURL(), p.peerURL()
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	if name != "" {
		cfg.Name = name
		cfg.InitialCluster = initialCluster
		cfg.InitialClusterToken = "flashmend"
		cfg.ClusterState = state
		// The coordinator changes the membership itself, one member at a
		// time and only with the others serving; etcd's own check waits
		// for peers to have been connected for seconds, which members that
		// just started have not.
		cfg.StrictReconfigCheck = false
	} else {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	cfg.UnsafeNoFsync = noFsync
	cfg.LogLevel = logLevel
	// NB: even at level error, etcd logs expected errors on every clean
	// shutdown; the coordinator reports through its own Logf instead.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = "10000"
	return cfg
}

// startEmbeddedEtcd starts a single-member etcd with its data in dir, on
// loopback ports chosen at run time. It returns the client endpoints.
func startEmbeddedEtcd(ctx context.Context, dir string, noFsync bool, logLevel string) (*embed.Etcd, []string, error) {
	p, _, err := memberPorts(dir)
	if err != nil {
		return nil, nil, err
	}
	cfg := etcdConfig(dir, p, "", "", "", noFsync, logLevel)
	e, err := launchEtcd(ctx, cfg, dir, 60*time.Second)
	if err != nil {
		return nil, nil, err
	}
	cu := p.clientURL()
	return e, []string{cu.String()}, nil
}

// launchEtcd starts an embedded etcd and waits until it serves.
//
// Every blocking step honours ctx: embed.StartEtcd itself cannot be
// interrupted (it waits, for instance, on the bbolt file lock of a data
// directory another process holds), so it runs in its own goroutine, and an
// abandoned start is closed when it returns.
func launchEtcd(ctx context.Context, cfg *embed.Config, dir string, wait time.Duration) (*embed.Etcd, error) {
	type started struct {
		e   *embed.Etcd
		err error
	}
	startedc := make(chan started, 1)
	go func() {
		e, err := embed.StartEtcd(cfg)
		startedc <- started{e, err}
	}()
	abandon := func() {
		go func() {
			if s := <-startedc; s.e != nil {
				closeEtcdBounded(s.e)
			}
		}()
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	var e *embed.Etcd
	select {
	case s := <-startedc:
		if s.err != nil {
			var ne *net.OpError
			if errors.As(s.err, &ne) || errors.Is(s.err, os.ErrPermission) {
				return nil, fmt.Errorf("coord: embedded etcd: %w", s.err)
			}
			return nil, fmt.Errorf("coord: embedded etcd in %s: %w: %w", dir, errEtcdStore, s.err)
		}
		e = s.e
	case <-ctx.Done():
		abandon()
		return nil, fmt.Errorf("coord: starting the embedded etcd in %s: %w", dir, context.Cause(ctx))
	case <-timeout.C:
		abandon()
		return nil, fmt.Errorf("coord: the embedded etcd in %s did not start in %v (is another process using it?)", dir, wait)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		closeEtcdBounded(e)
		return nil, fmt.Errorf("coord: waiting for the embedded etcd in %s: %w", dir, context.Cause(ctx))
	case <-timeout.C:
		closeEtcdBounded(e)
		return nil, fmt.Errorf("coord: embedded etcd in %s did not become ready in %v: %w", dir, wait, errEtcdStore)
	case err := <-e.Err():
		closeEtcdBounded(e)
		return nil, fmt.Errorf("coord: embedded etcd in %s: %w: %w", dir, errEtcdStore, err)
	}
	return e, nil
}

// errEtcdStore marks a start failure of the embedded etcd that comes from
// its data (not from ports, permissions, a lock or a cancelled start).
var errEtcdStore = errors.New("its store does not start")

// etcdCloseTimeout bounds embed.Etcd.Close: NB: an etcd that never became
// ready (a store whose WAL lost entries its backend applied, say) waits in
// Close forever for its own apply loop. The coordinator goes on without it;
// its listeners are closed first, so its ports are free.
const etcdCloseTimeout = 10 * time.Second

// closeEtcdBounded closes e, giving up after etcdCloseTimeout.
func closeEtcdBounded(e *embed.Etcd) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(etcdCloseTimeout):
	}
}

// startStore starts the embedded etcd on dir. Its store is checked first
// (Check); a damaged store, or one etcd itself fails to start on,
// is set aside and a new one started, whose index is then rebuilt from the
// nodes (unless Config.KeepDamagedStore, which makes it an error).
func (s *starter) startStore(ctx context.Context, dir string) (*embed.Etcd, []string, error) {
	data := filepath.Join(dir, "data")
	hint := " (the coordinator sets a damaged store aside and rebuilds the index from the nodes unless told to keep it)"
	if err := Check(data); err != nil {
		if !base.IsCorruption(err) || s.opts.KeepDamaged {
			return nil, nil, fmt.Errorf("%w%s", err, hint)
		}
		if err := s.setAsideStore(data, err); err != nil {
			return nil, nil, err
		}
	}
	e, eps, err := startEmbeddedEtcd(ctx, dir, s.opts.NoFsync, "error")
	if err == nil || !storeDamaged(err) || ctx.Err() != nil || s.setAside != "" {
		return e, eps, err
	}
	if s.opts.KeepDamaged {
		return nil, nil, fmt.Errorf("%w%s", err, hint)
	}
	if err := s.setAsideStore(data, err); err != nil {
		return nil, nil, err
	}
	return startEmbeddedEtcd(ctx, dir, s.opts.NoFsync, "error")
}
