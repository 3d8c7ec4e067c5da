package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
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
			startCtx, cancel := start.startContext(ctx)
			cfg.RepairReserve = repairReserveConfig(reserve)
			reg, stopMetrics, err := metricsF.start(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				cancel()
				return err
			}
			defer stopMetrics()
			if reg != nil {
				cfg.ServerOptions = reg.ServerOptions
				if cfg.KV != nil {
					kvOpts := reg.KVOptions(*cfg.KV)
					cfg.KV = &kvOpts
				}
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
			fmt.Fprintf(cmd.OutOrStdout(), "node %s serving on %s (data in %s)\n", n.ID(), n.Addr(), cfg.Dir)
			<-ctx.Done()
			return closeWithin(shutdownTimeout, n.Close)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", "", "data directory")
	f.StringVar(&cfg.CoordinatorAddr, "coordinator", "", "coordinator address (host:port)")
	f.StringVar(&cfg.ListenAddr, "listen", "127.0.0.1:0", "gRPC listen address")
	f.StringVar(&cfg.DieRepair, "die-repair", "reparo", "what a failed flash die costs: reparo (repair only what the die held) or rebuild (baseline: retire the device, re-create all its data elsewhere)")
	registerRepairReserve(f, &reserve)
	f.Uint64Var(&id, "id", 0, "node ID (0: from the identity file, or allocated)")
	f.BoolVar(&cfg.SyncWrites, "sync", true, "fsync every chunk write")
	f.BoolVar(&withKV, "kv", true, "host the replicated KV store (replicas of the shards the coordinator places here)")
	start.register(cmd)
	metricsF.register(f)
	return cmd
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
