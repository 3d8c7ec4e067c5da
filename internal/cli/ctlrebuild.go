package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/client"
)

// ctlRebuildIndex is `flashmend ctl rebuild-index`: the object index and
// mapping table rebuilt from the nodes' local indexes (the coordinator does
// it by itself when its store is lost or damaged).
func ctlRebuildIndex(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild-index",
		Short: "Rebuild the object index from the nodes' local indexes (restores objects the index lost)",
		Long: `Asks every member node for its local object index and merges it into the
coordinator's index: a key whose record is missing or names an older version
than a complete one the nodes hold is restored (with its mapping entry), and
versions nobody refers to are collected. Writes in progress and versions being
collected are left alone. The coordinator does this by itself after its store
was lost or damaged; this command runs it on demand.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				resp, err := c.RebuildIndex(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "asked %d nodes, %d answered, %d blob entries: %d objects restored, %d already current, %d versions to collect, %d entries unrestorable\n",
					resp.NodesAsked, resp.NodesAnswered, resp.Blobs, resp.ObjectsRestored, resp.ObjectsKept, resp.VersionsGarbage, resp.BlobsUnrestorable)
				for _, e := range resp.Errors {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", e)
				}
				return nil
			})
		},
	}
}
