package cli

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/netfault"
	"github.com/flashmend/flashmend/internal/node"
)

// newNodeCmd is `flashmend node`: one storage node (internal/node).
func newNodeCmd() *cobra.Command {
	var cfg node.Config
	var id uint64
	var start startFlags
	var withKV bool
	var reserve float64
	var metricsF metricsFlag
	var nemesisControl string
	var storeKind string
	var unsafeNoDeviceSync bool
	deviceSize := base.Bytes(1) * base.GiB
	var tlsF serverTLSFlags
	cmd := &cobra.Command{
		Use:   "node --dir DIR --coordinator ADDR",
		Short: "Run a storage node",
		Long: `Runs a storage node: a gRPC server over a local store of 64 KiB chunks with
end-to-end CRC32C checksums. It joins the cluster through the coordinator,
keeps a lease in etcd and heartbeats its statistics. With --kv (the default) it
also hosts the replicated KV store on the same port: its replicas of the shards
the coordinator placed on it, in DIR/kv. Only one flashmend may run
on a DIR. Ctrl-C (or SIGTERM) stops it cleanly and exits 0.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return base.InvalidArgumentf("--dir is required")
			}
			if cfg.CoordinatorAddr == "" {
				return base.InvalidArgumentf("--coordinator is required")
			}
			cfg.NodeID = base.NodeID(id)
			tc, err := tlsF.load()
			if err != nil {
				return err
			}
			cfg.TLS = tc
			if withKV {
				cfg.KV = &kv.Options{}
			}
			cfg.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			ctx, stop := signalContext()
			defer stop()
			lock, err := lockDir(cfg.Dir)
			if err != nil {
				return fmt.Errorf("node in %s did not start: %w", cfg.Dir, err)
			}
			defer lock.Close()
			open, err := devStore(storeKind, deviceSize, unsafeNoDeviceSync)
			if err != nil {
				return err
			}
			if open != nil {
				// The node closes its store when it stops (or fails to start).
				if cfg.Store, err = open(cfg.Dir, int(id)); err != nil {
					return fmt.Errorf("node in %s: emulated flash device: %w", cfg.Dir, err)
				}
			}
			startCtx, cancel := start.startContext(ctx)
			cfg.RepairReserve = repairReserveConfig(reserve)
			reg, stopMetrics, err := metricsF.start(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				cancel()
				return err
			}
			defer stopMetrics()
			if reg != nil {
				cfg.Metrics = reg.Text // the coordinator's dashboard reads them
				cfg.ServerOptions = reg.ServerOptions
				if cfg.KV != nil {
					kvOpts := reg.KVOptions(*cfg.KV)
					cfg.KV = &kvOpts
				}
			}
			if nemesisControl != "" {
				stopGate, err := startNemesisGate(cmd.OutOrStdout(), nemesisControl, &cfg)
				if err != nil {
					cancel()
					return err
				}
				defer stopGate()
			}
			n, err := node.Start(startCtx, cfg)
			if err != nil {
				err = startError(startCtx, err)
				cancel()
				return err
			}
			cancel()
			if reg != nil {
				if err := reg.AddNodes(func() []*node.Node { return []*node.Node{n} }); err != nil {
					n.Close()
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s serving on %s%s (data in %s)\n", n.ID(), n.Addr(), tlsNote(tc), cfg.Dir)
			<-ctx.Done()
			return closeWithin(shutdownTimeout, n.Close)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", "", "data directory")
	f.StringVar(&cfg.CoordinatorAddr, "coordinator", "", "coordinator address (host:port)")
	f.StringVar(&cfg.ListenAddr, "listen", "127.0.0.1:0", "gRPC listen address")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", "", "the address the node registers for clients and peers to dial, HOST or HOST:PORT (default: --listen's; set it when listening on 0.0.0.0, or to a name its TLS certificate carries)")
	f.StringVar(&cfg.DieRepair, "die-repair", "reparo", "what a failed flash die costs: reparo (repair only what the die held) or rebuild (baseline: retire the device, re-create all its data elsewhere)")
	registerRepairReserve(f, &reserve)
	f.Uint64Var(&id, "id", 0, "node ID (0: from the identity file, or allocated)")
	f.StringVar(&storeKind, "store", "file", "node store: file (plain files in DIR/store) or sdf (SDF extent files on an emulated flash device in DIR/sdf; the KV replicas live on it too)")
	f.Var(&deviceSize, "device-size", "data capacity of the emulated flash device (sdf store)")
	registerUnsafeNoDeviceSync(f, &unsafeNoDeviceSync)
	f.BoolVar(&cfg.SyncWrites, "sync", true, "fsync every chunk write")
	f.BoolVar(&withKV, "kv", true, "host the replicated KV store (replicas of the shards the coordinator places here)")
	start.register(cmd)
	metricsF.register(f)
	tlsF.register(f, true)
	f.StringVar(&nemesisControl, "nemesis-control", "", "reliability harness only: serve the node's partition switch (internal/netfault) over HTTP on this address")
	_ = f.MarkHidden("nemesis-control")
	return configurable(cmd, nil)
}

// startNemesisGate puts a partition switch (internal/netfault) at the
// node's gRPC boundary and serves its control endpoint on addr; it prints
// "nemesis control: http://ADDR" for the harness.
func startNemesisGate(out io.Writer, addr string, cfg *node.Config) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--nemesis-control: %w", err)
	}
	gate := netfault.New(cfg.NodeID)
	inner := cfg.ServerOptions
	cfg.ServerOptions = func(id base.NodeID) []grpc.ServerOption {
		gate.SetSelf(id)
		opts := gate.ServerOptions()
		if inner != nil {
			opts = append(opts, inner(id)...)
		}
		return opts
	}
	cfg.PeerDialOptions = gate.DialOptions
	cfg.CoordinatorDialOptions = gate.DialOptions(netfault.Coordinator)
	srv := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }() // ends when stop closes it
	fmt.Fprintf(out, "nemesis control: http://%s\n", lis.Addr())
	return func() { srv.Close() }, nil
}

// registerRepairReserve adds --repair-reserve (node.Config.RepairReserve).
func registerRepairReserve(f *pflag.FlagSet, reserve *float64) {
	f.Float64Var(reserve, "repair-reserve", node.DefaultRepairReserve,
		"fraction of each node's device kept free for repairs: a new write that would leave less free is refused "+
			"with a clear error (the client places it elsewhere) while repairs may use it (0: no reserve)")
}

// repairReserveConfig maps the flag onto node.Config (where 0 is the
// default and negative is none).
func repairReserveConfig(flag float64) float64 {
	if flag == 0 {
		return -1
	}
	return flag
}
