package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/node"
)

// newNodeCmd is `flashmend node`: one storage node (internal/node).
func newNodeCmd() *cobra.Command {
	var cfg node.Config
	var id uint64
	cmd := &cobra.Command{
		Use:   "node --dir DIR --coordinator ADDR",
		Short: "Run a storage node",
		Long: `Runs a storage node: a gRPC server over a local store of 64 KiB chunks with
end-to-end CRC32C checksums. It joins the cluster through the coordinator,
keeps a lease in etcd and heartbeats its statistics. Ctrl-C stops it cleanly.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return base.InvalidArgumentf("--dir is required")
			}
			if cfg.CoordinatorAddr == "" {
				return base.InvalidArgumentf("--coordinator is required")
			}
			cfg.NodeID = base.NodeID(id)
			cfg.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := node.Start(ctx, cfg)
			if err != nil {
				return fmt.Errorf("node in %s did not start: %w", cfg.Dir, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s serving on %s\n", n.ID(), n.Addr())
			<-ctx.Done()
			return n.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", "", "data directory")
	f.StringVar(&cfg.CoordinatorAddr, "coordinator", "", "coordinator address (host:port)")
	f.StringVar(&cfg.ListenAddr, "listen", "127.0.0.1:0", "gRPC listen address")
	f.Uint64Var(&id, "id", 0, "node ID (0: from the identity file, or allocated)")
	f.BoolVar(&cfg.SyncWrites, "sync", true, "fsync every chunk write")
	return cmd
}
