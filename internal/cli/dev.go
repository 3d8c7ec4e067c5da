package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/objstore"
)

// devOptions are `flashmend dev`'s settings.
type devOptions struct {
	dir         string
	nodes       int
	etcdMembers int
	store       string
	// deviceSize is the data capacity of each node's emulated flash device
	// (sdf store); an existing device keeps its size.
	deviceSize base.Bytes
	readMode   string
	dieRepair  string
	reserve    float64
	maxObject  base.Bytes
	scrub      scrubFlags
	start      startFlags
	// kv makes every node host the KV store; kvSplits cut its shards.
	kv        bool
	kvSplits  string
	wear      wearFlags
	metrics   metricsFlag
	s3        s3Flags
	dashboard dashboardFlag
	tls       serverTLSFlags
	// unsafeNoDeviceSync: --unsafe-no-device-sync.
	unsafeNoDeviceSync bool
}

// newDevCmd is `flashmend dev`: a whole cluster in one process.
func newDevCmd() *cobra.Command {
	o := devOptions{maxObject: base.GiB, deviceSize: base.GiB}
	cmd := &cobra.Command{
		Use:   "dev --dir DIR [--nodes 6]",
		Short: "Run a local cluster: coordinator and nodes in one process",
		Long: `Runs a coordinator (embedded etcd) and N storage nodes in one process on
127.0.0.1, each node with its own store under DIR/node-ID (node IDs are 1..N).
The cluster endpoint's port is chosen the first time and kept for later runs
on the same DIR. While it runs, DIR/endpoint holds the endpoint; 'flashmend
ctl' finds .flashmend/dev/endpoint by itself, or takes --endpoint ADDR or
FLASHMEND_ENDPOINT.

Every node also hosts the replicated KV store (--kv) on the same port; the
coordinator places its shards (cut at --kv-splits) over the nodes the first
time, and keeps the placement: 'flashmend ctl kv put KEY VALUE' and friends.

Only one flashmend may run on a DIR: a second one fails at once, naming the
first one's pid. Ctrl-C (or SIGTERM) stops it cleanly and exits 0; a second
Ctrl-C stops it at once. Starting again on the same DIR keeps the data.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			return runDev(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr(), nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "data directory")
	f.IntVar(&o.nodes, "nodes", 6, "number of storage nodes")
	f.StringVar(&o.store, "store", "sdf", "node store: sdf (SDF extent files on an emulated flash device in each node's directory) or file (plain files)")
	f.Var(&o.deviceSize, "device-size", "data capacity of each node's emulated flash device (sdf store)")
	registerUnsafeNoDeviceSync(f, &o.unsafeNoDeviceSync)
	f.StringVar(&o.readMode, "read-mode", "direct", "cluster read mode: direct or hdfs (baseline)")
	f.StringVar(&o.dieRepair, "die-repair", "reparo", "what a failed flash die costs: reparo (repair only what the die held) or rebuild (baseline: retire the device, re-create all its data elsewhere)")
	f.Var(&o.maxObject, "max-object", "largest object accepted")
	registerRepairReserve(f, &o.reserve)
	// A dev cluster's nodes restart in seconds: one down for a minute has
	// failed (a node that cannot open is reported dead at start).
	o.scrub.register(cmd, time.Minute)
	o.start.register(cmd)
	f.BoolVar(&o.kv, "kv", true, "every node hosts the replicated KV store ('flashmend ctl kv')")
	f.StringVar(&o.kvSplits, "kv-splits", "g,n,t", "KV shard split keys, comma separated (used when the cluster has no KV layout yet)")
	o.wear.register(cmd)
	o.metrics.register(f)
	o.s3.register(f)
	o.dashboard.register(f)
	o.tls.register(f, true)
	f.IntVar(&o.etcdMembers, "etcd-members", 1,
		"embedded etcd members of the coordinator (1 or 3: with 3, a member whose store is damaged or lost is replaced from the other two)")
	return configurable(cmd, nil)
}

// runDev runs the dev cluster until ctx ends; ready, when set, receives the
// cluster once it serves (tests).
func runDev(ctx context.Context, o devOptions, out, errOut io.Writer, ready func(*devcluster.Cluster)) error {
	if o.dir == "" {
		return base.InvalidArgumentf("--dir is required")
	}
	tc, err := o.tls.load()
	if err != nil {
		return err
	}
	opts := devcluster.Options{TLS: tc,
		Dir: o.dir, Nodes: o.nodes, ReadMode: o.readMode, DieRepair: o.dieRepair, RepairReserve: repairReserveConfig(o.reserve), MaxObjectBytes: o.maxObject, SyncWrites: true, EtcdMembers: o.etcdMembers,
		Logf: func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) },
	}
	if o.kv {
		opts.KV, opts.KVSplits = &kv.Options{}, splitList(o.kvSplits)
	}
	store, err := devStore(o.store, o.deviceSize, o.unsafeNoDeviceSync)
	if err != nil {
		return err
	}
	opts.NodeStore = store
	if o.wear.policy != "" {
		opts.Wear, opts.WearMoveInterval = o.wear.config(), o.wear.moves
	}
	if !o.scrub.off {
		so := o.scrub.options()
		opts.Scrub = &so
	}
	// The cluster's directory, and those of its coordinator and nodes, so
	// that a 'flashmend coordinator' or 'flashmend node' pointed at one of
	// them fails at once too.
	dirs := []string{o.dir, filepath.Join(o.dir, "coordinator")}
	for i := 0; i < o.nodes; i++ {
		dirs = append(dirs, devcluster.NodeDir(o.dir, i))
	}
	for _, d := range dirs {
		lock, err := lockDir(d)
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	// A crash leaves the previous run's endpoint behind: drop it before
	// start-up, so that nobody follows it while this run starts.
	if err := removeEndpoint(o.dir); err != nil {
		return err
	}
	// The endpoint serves from the start (its line comes first): the
	// cluster's collectors join once it runs.
	reg, stopMetrics, err := o.metrics.start(out, errOut)
	if err != nil {
		return err
	}
	defer stopMetrics()
	opts.Metrics = reg
	startCtx, cancel := o.start.startContext(ctx)
	cl, err := devcluster.Start(startCtx, opts)
	if err != nil {
		err = startError(startCtx, err)
		cancel()
		return err
	}
	cancel()
	if err := writeEndpoint(o.dir, cl.Endpoint()); err != nil {
		cl.Close()
		return err
	}
	dead := cl.Dead()
	fmt.Fprintf(out, "flashmend dev cluster: %d of %d nodes serving (%s store), data in %s\n", o.nodes-len(dead), o.nodes, o.store, o.dir)
	for _, d := range dead {
		fmt.Fprintf(out, "dead: %v\n", d)
		fmt.Fprintf(out, "  its replicas and shards are served by the other nodes and re-created on them after --reprotect-after; "+
			"to reuse the node, remove %s (it is formatted afresh at the next start and refilled by the scrubber)\n", d.Dir)
	}
	fmt.Fprintf(out, "endpoint %s%s (in %s)\n", cl.Endpoint(), tlsNote(tc), filepath.Join(o.dir, endpointFile))
	clientTLS := ""
	if tc != nil {
		clientTLS = " --tls-ca " + o.tls.files.CAFile
		if o.tls.files.ClientAuth {
			clientTLS += " --tls-cert CERT --tls-key KEY"
		}
	}
	fmt.Fprintf(out, "try: flashmend ctl --endpoint %s%s nodes\n", cl.Endpoint(), clientTLS)
	if o.kv {
		fmt.Fprintf(out, "kv: every node hosts the KV store; try: flashmend ctl kv --endpoint %s%s put KEY VALUE\n", cl.Endpoint(), clientTLS)
	}
	stopS3 := func() {}
	if o.kv {
		// Without the gateway the cluster still serves: say why.
		if stop, err := o.s3.start(ctx, cl.Endpoint(), tc, tc, reg, out, errOut, opts.Logf); err != nil {
			fmt.Fprintf(errOut, "S3 gateway not started: %v\n", err)
		} else {
			stopS3 = stop
		}
	}
	stopDashboard := func() {}
	if stop, err := o.dashboard.start(ctx, reg, false, cl.Endpoint(), tc, out, errOut); err != nil {
		fmt.Fprintf(errOut, "dashboard not started: %v\n", err)
	} else {
		stopDashboard = stop
	}
	if ready != nil {
		ready(cl)
	}
	<-ctx.Done()
	stopDashboard()
	stopS3()
	fmt.Fprintln(out, "stopping")
	return errors.Join(removeEndpoint(o.dir), closeWithin(shutdownTimeout, cl.Close))
}

// devStore returns how `flashmend dev` opens a node's store (nil: the
// node's default plain-file store).
// unsafeNoDeviceSync opts out of the device fsyncs that keep acknowledged
// writes through a host power loss (objstore.SDFStoreOptions.PowerUnsafe).
func devStore(kind string, deviceSize base.Bytes, unsafeNoDeviceSync bool) (func(dir string, i int) (objstore.Store, error), error) {
	switch kind {
	case "file":
		return nil, nil
	case "sdf":
		g := objstore.DevGeometry()
		blockBytes := g.BlockSize() * base.Bytes(g.Dies())
		g.BlocksPerDie = int(deviceSize / blockBytes)
		if g.BlocksPerDie < 16 || g.BlocksPerDie > 1<<16 {
			return nil, base.InvalidArgumentf("--device-size %s outside [%s, %s]", deviceSize, 16*blockBytes, (1<<16)*blockBytes)
		}
		return func(dir string, i int) (objstore.Store, error) {
			return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1), PowerUnsafe: unsafeNoDeviceSync})
		}, nil
	}
	return nil, base.InvalidArgumentf("unknown store %q (want sdf or file)", kind)
}

// registerUnsafeNoDeviceSync adds --unsafe-no-device-sync (off: every SDF
// sync fsyncs the emulated device's page file, flash.Options.PowerSafe).
func registerUnsafeNoDeviceSync(f *pflag.FlagSet, v *bool) {
	f.BoolVar(v, "unsafe-no-device-sync", false, "UNSAFE, for measurements only: with --store sdf, do not fsync the emulated flash device's "+
		"page file when SDF syncs; a process crash still loses nothing, but a power loss of the host can lose acknowledged writes")
}
