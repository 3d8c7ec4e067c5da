package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
)

// kvAddrsEnv is read when --addrs is not given; `kv serve` prints it.
const kvAddrsEnv = "FLASHMEND_KV_ADDRS"

// addKVCmds mounts the KV commands as `flashmend kv` and, when the client
// tool exists, as `flashmend ctl kv` (without touching ctl.go).
func addKVCmds(root *cobra.Command) {
	root.AddCommand(newKVCmd())
	for _, c := range root.Commands() {
		if c.Name() == "ctl" {
			c.AddCommand(newCtlKVCmd())
		}
	}
}

// newCtlKVCmd is `flashmend ctl kv`: the client side of `flashmend kv`
// (no serve, no demo), with its own help.
func newCtlKVCmd() *cobra.Command {
	cmd := newKVCmd()
	cmd.Short = "Read, write, scan and damage the KV store of a running cluster"
	cmd.Long = `ctl kv is the client of flashmend's replicated KV store: put, get, del, scan,
damage a replica's sstable block (corrupt), show every replica (status), and
place the shards (init) of the cluster ctl finds (--endpoint, $` + EndpointEnv + `, or the
.flashmend/dev that 'make run' keeps): its storage nodes host the KV store and
its coordinator keeps the shard placement. For a KV-only cluster of 'flashmend
kv serve', pass the nodes' addresses (--addrs "1=127.0.0.1:7001,2=...", or
$` + kvAddrsEnv + `, which kv serve prints) and its split keys (--splits).`
	for _, sub := range cmd.Commands() {
		if sub.Name() == "serve" || sub.Name() == "demo" {
			cmd.RemoveCommand(sub)
		}
	}
	return cmd
}

// newKVCmd is `flashmend kv`: the replicated KV store (internal/kv).
func newKVCmd() *cobra.Command {
	var (
		addrs    string
		splits   string
		endpoint string
		timeout  time.Duration
		tlsF     clientTLSFlags
	)
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "The replicated KV store: serve a local cluster, read and write, damage a replica, demo DIRECT repair",
		Long: `kv talks to flashmend's replicated KV store: range shards, each a raft group of
three replicas with a Pebble state machine, repaired from corruption key range
by key range through the raft log (DIRECT).

The client commands talk to the cluster ctl finds (--endpoint, $` + EndpointEnv + `, or
the .flashmend/dev that 'make run' keeps), whose storage nodes host the KV store
with the coordinator's shard placement; or, with the nodes' addresses (--addrs
"1=127.0.0.1:7001,2=...", or $` + kvAddrsEnv + `) and split keys (--splits), to a KV-only
cluster of 'kv serve'.`,
	}
	cmd.PersistentFlags().StringVar(&addrs, "addrs", "", "node addresses, ID=host:port comma separated (default $"+kvAddrsEnv+")")
	cmd.PersistentFlags().StringVar(&splits, "splits", "", "shard split keys, comma separated (with --addrs: as the cluster was started; with init: where to cut)")
	cmd.PersistentFlags().StringVar(&endpoint, "endpoint", "", "cluster endpoint (default $"+EndpointEnv+", or .flashmend/dev)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "request timeout")
	tlsF.register(cmd)

	client := func() (*kvclient.Client, context.Context, context.CancelFunc, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if addrs == "" {
			addrs = os.Getenv(kvAddrsEnv)
		}
		var c *kvclient.Client
		var err error
		if addrs != "" {
			c, err = staticKVClient(addrs, splits, &tlsF)
		} else {
			c, err = clusterKVClient(ctx, endpoint, &tlsF)
		}
		if err != nil {
			cancel()
			return nil, nil, nil, err
		}
		return c, ctx, cancel, nil
	}
	initCmd := func() *cobra.Command {
		return &cobra.Command{
			Use:   "init",
			Short: "Place the KV store's shards on the cluster's live nodes (cut at --splits), once",
			Args:  exactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				c, err := dialEndpoint(ctx, endpoint, &tlsF)
				if err != nil {
					return err
				}
				defer c.Close()
				m, created, err := c.KVLayout(ctx, true, splitList(splits))
				if err != nil {
					return err
				}
				l, err := kvapi.LayoutFromProto(m)
				if err != nil {
					return err
				}
				if !created {
					fmt.Fprintln(cmd.OutOrStdout(), "the cluster already has a KV layout (kept as it is):")
				}
				for _, s := range l.Shards {
					fmt.Fprintln(cmd.OutOrStdout(), s)
				}
				return nil
			},
		}
	}
	cmd.AddCommand(initCmd())
	cmd.AddCommand(newKVServeCmd(), newKVDemoCmd())
	cmd.AddCommand(newKVDataCmds(client)...)
	return cmd
}

type kvClientFunc func() (*kvclient.Client, context.Context, context.CancelFunc, error)

// staticKVClient is a client of a KV-only cluster ('kv serve'): every
// shard on every node.
func staticKVClient(addrs, splits string, tlsF *clientTLSFlags) (*kvclient.Client, error) {
	m, err := parseAddrs(addrs)
	if err != nil {
		return nil, err
	}
	tc, err := tlsF.load()
	if err != nil {
		return nil, err
	}
	var ids []base.NodeID
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return kvclient.New(kvapi.UniformLayout(ids, splitList(splits)...), m, kvclient.Options{TLS: tc})
}

// clusterKVClient is a client of the KV store that a cluster's storage
// nodes host: the coordinator gives the shard layout and the nodes'
// addresses.
func clusterKVClient(ctx context.Context, endpoint string, tlsF *clientTLSFlags) (*kvclient.Client, error) {
	c, err := dialEndpoint(ctx, endpoint, tlsF)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.KVClient(ctx, kvclient.Options{})
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func parseAddrs(s string) (map[base.NodeID]string, error) {
	if s == "" {
		return nil, base.InvalidArgumentf("no node addresses: pass --addrs or set $%s (kv serve prints it)", kvAddrsEnv)
	}
	out := map[base.NodeID]string{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, base.InvalidArgumentf("bad address %q: want ID=host:port", part)
		}
		out[base.NodeID(n)] = addr
	}
	return out, nil
}

func readOption(consistency string, index uint64) (kvclient.ReadOption, error) {
	switch consistency {
	case "strong":
		return kvclient.Strong(), nil
	case "eventual":
		return kvclient.Eventual(), nil
	case "after":
		return kvclient.AfterIndex(index), nil
	}
	return nil, base.InvalidArgumentf("unknown consistency %q (strong, eventual or after)", consistency)
}

func newKVDataCmds(client kvClientFunc) []*cobra.Command {
	var consistency string
	var index uint64
	addRead := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&consistency, "consistency", "strong", "strong (leader read index), after (--index), or eventual (any replica)")
		c.Flags().Uint64Var(&index, "index", 0, "for --consistency after: the log index a write printed")
		return c
	}
	put := &cobra.Command{
		Use: "put KEY VALUE", Short: "Write a key", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			idx, err := c.Put(ctx, []byte(args[0]), []byte(args[1]))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok index=%d\n", idx)
			return nil
		},
	}
	del := &cobra.Command{
		Use: "del KEY", Short: "Delete a key", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			idx, err := c.Delete(ctx, []byte(args[0]))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok index=%d\n", idx)
			return nil
		},
	}
	get := addRead(&cobra.Command{
		Use: "get KEY", Short: "Read a key", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opt, err := readOption(consistency, index)
			if err != nil {
				return err
			}
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			v, found, err := c.Get(ctx, []byte(args[0]), opt)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("key %q not found", args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", v)
			return nil
		},
	})
	var limit int
	scan := addRead(&cobra.Command{
		Use:   "scan [START [END]]",
		Short: "List the keys in [START, END), page by page (no START: from the first key; no END or \"\": to the last)",
		Args:  rangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opt, err := readOption(consistency, index)
			if err != nil {
				return err
			}
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			var start, end []byte
			if len(args) > 0 {
				start = []byte(args[0])
			}
			if len(args) > 1 && args[1] != "" {
				end = []byte(args[1])
			}
			w := cmd.OutOrStdout()
			return c.ScanEach(ctx, start, end, limit, func(r kvclient.KeyValue) error {
				_, err := fmt.Fprintf(w, "%s\t%s\n", r.Key, r.Value)
				return err
			}, opt)
		},
	})
	scan.Flags().IntVar(&limit, "limit", 0, "at most this many rows (0: every row)")
	var node uint64
	corrupt := &cobra.Command{
		Use:   "corrupt KEY",
		Short: "Damage the sstable data block holding KEY on one node's replica (testing DIRECT repair)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			shard := c.Layout().ShardFor([]byte(args[0]))
			ac, err := c.AdminClient(base.NodeID(node))
			if err != nil {
				return err
			}
			resp, err := ac.CorruptBlock(ctx, &kvpb.CorruptBlockRequest{Shard: uint64(shard.ID), Key: []byte(args[0])})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "damaged the data block at offset %d of %s on %s (%s)\n",
				resp.BlockOffset, resp.File, base.NodeID(node), shard.ID)
			return nil
		},
	}
	corrupt.Flags().Uint64Var(&node, "node", 0, "node whose replica to damage")
	markRequired(corrupt, "node")
	status := &cobra.Command{
		Use: "status", Short: "Show every replica: applied index, leader, content checksum, repairs", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := client()
			if err != nil {
				return err
			}
			defer cancel()
			defer c.Close()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-6s %-5s %-8s %-6s %-8s %-8s %-7s %-9s %-9s %-8s %-8s %s\n",
				"shard", "node", "replica", "leader", "applied", "crc", "keys", "detected", "transient", "patches", "rebuilds", "state")
			for _, s := range c.Layout().Shards {
				var nodes []base.NodeID
				for _, n := range s.Replicas {
					nodes = append(nodes, n)
				}
				sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
				for _, n := range nodes {
					ac, err := c.AdminClient(n)
					if err != nil {
						return err
					}
					st, err := ac.ReplicaStatus(ctx, &kvpb.ReplicaStatusRequest{Shard: uint64(s.ID)})
					if err != nil {
						fmt.Fprintf(w, "%-6s %-5s unreachable: %v\n", s.ID, n, err)
						continue
					}
					fmt.Fprintf(w, "%-6s %-5s %-8s %-6t %-8d %08x %-7d %-9d %-9d %-8d %-8d %s\n", s.ID, n, base.ReplicaID(st.Replica),
						st.Leader, st.AppliedIndex, st.ContentCrc, st.Keys, st.CorruptionsDetected, st.TransientErrors,
						st.PatchesApplied, st.Rebuilds, st.State)
					for _, line := range kvStatusDetails(st) {
						fmt.Fprintf(w, "%14s%s\n", "", line)
					}
				}
			}
			return nil
		},
	}
	return []*cobra.Command{put, get, del, scan, corrupt, status}
}

// kvStatusDetails says, for one replica, what happened to its last
// detection, why it was rebuilt, what is pending, and what could not open.
func kvStatusDetails(st *kvpb.ReplicaStatusResponse) []string {
	var out []string
	if st.LastDetection != "" {
		d := "last detection: " + st.LastDetection
		switch st.LastDetection {
		case "transient":
			d += " (the block verified on a re-read: a flip on the way, nothing to repair)"
		case "pending":
			d += fmt.Sprintf(" (%d patch requests in flight)", st.PendingRepairs)
		case "already repaired":
			d += " (damage in a range a patch already replaced)"
		}
		out = append(out, d)
	}
	if st.BlocksMerged > 0 {
		out = append(out, fmt.Sprintf("blocks merged: %d (damaged on every replica, put back together from their copies)", st.BlocksMerged))
	}
	if len(st.RebuildReasons) > 0 {
		var reasons []string
		for k, v := range st.RebuildReasons {
			reasons = append(reasons, fmt.Sprintf("%d %s", v, k))
		}
		sort.Strings(reasons)
		out = append(out, "rebuilds: "+strings.Join(reasons, "; "))
	}
	if st.Failed != "" {
		out = append(out, "could not open: "+st.Failed)
	}
	if st.RaftLog != "" {
		out = append(out, "raft log: "+st.RaftLog)
	}
	return out
}

func newKVServeCmd() *cobra.Command {
	var (
		nodes  int
		dir    string
		splits string
		mode   string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a local KV cluster (N nodes, real gRPC on 127.0.0.1) until interrupted",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := kv.ParseRepairMode(mode)
			if err != nil {
				return err
			}
			cfg := kvcluster.Config{Nodes: nodes, Splits: splitList(splits), Options: kv.Options{Mode: m}}
			if dir != "" {
				cfg.FS, cfg.Dir = vfs.Default, dir
			}
			c, err := kvcluster.Start(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			var parts []string
			for _, id := range c.NodeIDs() {
				parts = append(parts, fmt.Sprintf("%d=%s", uint64(id), c.Addrs[id]))
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "kv cluster of %d nodes up (mode %s, data %s)\n", len(parts), m, map[bool]string{true: "in memory", false: dir}[dir == ""])
			fmt.Fprintf(w, "export %s=%s\n", kvAddrsEnv, strings.Join(parts, ","))
			if splits != "" {
				fmt.Fprintf(w, "# pass --splits %s to clients\n", splits)
			}
			for _, id := range c.NodeIDs() {
				for _, f := range c.Node(id).Failures() {
					// One replica's failure is only that replica's: say
					// which, and that its peers keep the shard.
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: node %s: replica of %v\n", id, f)
				}
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt)
			<-sig
			return nil
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 3, "number of nodes")
	cmd.Flags().StringVar(&dir, "dir", "", "data directory (default: in memory)")
	cmd.Flags().StringVar(&splits, "splits", "", "shard split keys, comma separated")
	cmd.Flags().StringVar(&mode, "mode", "direct", "corruption repair: direct (patch through the log) or crash (baseline)")
	return cmd
}

// newKVDemoCmd runs DIRECT's KV experiment in miniature: load a 3-node
// cluster, damage one sstable data block on a follower, keep reading through
// the client, and report how the damage was repaired.
func newKVDemoCmd() *cobra.Command {
	var (
		keys int
		mode string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Damage an sstable block on a replica of a local cluster and show the repair",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := kv.ParseRepairMode(mode)
			if err != nil {
				return err
			}
			if keys < 1000 || keys > 1_000_000 {
				return base.InvalidArgumentf("--keys %d outside [1000, 1000000]", keys)
			}
			rep, err := kvcluster.RunRepairDemo(context.Background(), kvcluster.RepairDemoConfig{Keys: keys, Mode: m})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), rep.String())
			return nil
		},
	}
	cmd.Flags().IntVar(&keys, "keys", 5000, "keys to load (values of 128 bytes)")
	cmd.Flags().StringVar(&mode, "mode", "direct", "direct or crash")
	return cmd
}
