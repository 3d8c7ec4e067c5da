package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	pubclient "github.com/flashmend/flashmend/client"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/node"
)

// EndpointEnv names the environment variable ctl reads the endpoint from.
const EndpointEnv = "FLASHMEND_ENDPOINT"

// ctlFlags are the flags every ctl subcommand shares.
type ctlFlags struct {
	endpoint string
	readMode string
	timeout  time.Duration
	tls      clientTLSFlags
}

// dial connects to the cluster named by --endpoint, FLASHMEND_ENDPOINT, or
// the endpoint file of a dev cluster under .flashmend/dev (see
// findEndpoint). A cluster that does not answer is one line saying where
// the endpoint came from and what to check.
func (f *ctlFlags) dial(ctx context.Context) (*client.Client, error) {
	return dialEndpointMode(ctx, f.endpoint, f.readMode, &f.tls)
}

// dialEndpoint connects to the cluster as ctl's commands do (see
// ctlFlags.dial), with the cluster's read mode.
func dialEndpoint(ctx context.Context, flag string, tlsF *clientTLSFlags) (*client.Client, error) {
	return dialEndpointMode(ctx, flag, "", tlsF)
}

func dialEndpointMode(ctx context.Context, flag, readMode string, tlsF *clientTLSFlags) (*client.Client, error) {
	ep, err := resolveEndpoint(flag)
	if err != nil {
		return nil, err
	}
	tc, err := tlsF.load()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, ep.addr, client.Options{ReadMode: readMode, TLS: tc})
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		return nil, ep.unreachable(unreachable)
	}
	return c, err
}

// run dials, runs f with a deadline, and closes the client.
func (f *ctlFlags) run(fn func(ctx context.Context, c *client.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// runPublic is run with the public client (package client at the module's
// root): the commands that need nothing more use what other programs use.
func (f *ctlFlags) runPublic(fn func(ctx context.Context, c *pubclient.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	ep, err := resolveEndpoint(f.endpoint)
	if err != nil {
		return err
	}
	tc, err := f.tls.load()
	if err != nil {
		return err
	}
	c, err := pubclient.Dial(ctx, ep.addr, pubclient.Options{TLS: tc.ClientTLS()})
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		return ep.unreachable(unreachable)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// newCtlCmd is `flashmend ctl`: the client tool (internal/client).
func newCtlCmd() *cobra.Command {
	f := &ctlFlags{}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Client tool: objects, nodes, repairs and fault injection",
	}
	cmd.PersistentFlags().StringVar(&f.endpoint, "endpoint", "", "cluster endpoint (default $"+EndpointEnv+")")
	cmd.PersistentFlags().StringVar(&f.readMode, "read-mode", "", "read mode: direct or hdfs (default: the cluster's)")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Minute, "deadline of the command")
	f.tls.register(cmd)
	inject := &cobra.Command{Use: "inject", Short: "Inject faults into a node"}
	inject.AddCommand(ctlInjectUBER(f))
	cmd.AddCommand(ctlPut(f), ctlGet(f), ctlStat(f), ctlRm(f), ctlLs(f), ctlNodes(f), ctlRepairs(f),
		inject, ctlCorrupt(f), ctlFailDie(f), ctlScrub(f), ctlRebuildIndex(f), ctlWear(f))
	return cmd
}

func ctlPut(f *ctlFlags) *cobra.Command {
	var red string
	cmd := &cobra.Command{
		Use:   "put KEY FILE",
		Short: "Store FILE (- for standard input) as a new version of KEY",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client.ParseRedundancy(red)
			if err != nil {
				return err
			}
			// The file streams: memory is bounded by the client's
			// window, not by the file's size.
			var src io.Reader = cmd.InOrStdin()
			size := int64(-1)
			if args[1] != "-" {
				file, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer file.Close()
				st, err := file.Stat()
				if err != nil {
					return err
				}
				if st.Mode().IsRegular() {
					size = st.Size()
				}
				src = file
			}
			return f.run(func(ctx context.Context, c *client.Client) error {
				rec, err := c.PutReader(ctx, args[0], src, size, r)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), formatRecord(rec))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&red, "redundancy", "rep", "rep (3 copies) or ec (Reed-Solomon 4+2)")
	return cmd
}

func ctlGet(f *ctlFlags) *cobra.Command {
	var report bool
	cmd := &cobra.Command{
		Use:   "get KEY [FILE]",
		Short: "Read KEY to FILE (standard output when FILE is - or absent)",
		Args:  rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				var rep *client.ReadReport
				if len(args) == 2 && args[1] != "-" {
					r, err := getToFile(ctx, c, args[0], f.readMode, args[1])
					if err != nil {
						return err
					}
					rep = r
				} else {
					// Streamed: bytes reach standard output as they are
					// verified; a read that fails midway has written a
					// prefix and exits non-zero.
					_, r, err := c.GetTo(ctx, args[0], f.readMode, cmd.OutOrStdout())
					if err != nil {
						return err
					}
					rep = r
				}
				if report || rep.Repaired > 0 || rep.Failovers > 0 || rep.RepairFailed > 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "read:", rep)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&report, "report", false, "print what the read verified and repaired (standard error)")
	return cmd
}

// getToFile streams key into a temporary file next to path and renames it
// to path once the whole object is read and verified: a failed read leaves
// no partial file (and an existing file at path unchanged). A path that
// exists and is not a regular file (/dev/null, a FIFO) is written directly.
func getToFile(ctx context.Context, c *client.Client, key, mode, path string) (*client.ReadReport, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		out, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, err
		}
		_, rep, err := c.GetTo(ctx, key, mode, out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return rep, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	_, rep, err := c.GetTo(ctx, key, mode, tmp)
	if err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	return rep, os.Rename(tmp.Name(), path)
}

func formatRecord(r *objectpb.ObjectRecord) string {
	return fmt.Sprintf("%s %dB %s on nodes %v created %s", versionName(r), r.SizeBytes,
		redName(r.Redundancy), r.Placement, createdTime(r))
}

// versionName names a key's version for users: "KEY version N".
func versionName(r *objectpb.ObjectRecord) string {
	return fmt.Sprintf("%s version %s", displayKey(r.Key), versionNumber(r))
}

// versionNumber is the per-key version users see (1, 2, 3, ...); records
// written before per-key numbers existed show their internal version.
func versionNumber(r *objectpb.ObjectRecord) string {
	if r.KeyVersion == 0 {
		return fmt.Sprintf("(internal %d)", r.Version)
	}
	return strconv.FormatUint(r.KeyVersion, 10)
}

func createdTime(r *objectpb.ObjectRecord) string {
	return time.UnixMilli(r.CreatedUnixMs).UTC().Format(time.RFC3339)
}

func redName(r objectpb.Redundancy) string {
	switch r {
	case objectpb.Redundancy_REP:
		return "rep"
	case objectpb.Redundancy_EC:
		return "ec"
	}
	return r.String()
}

func ctlStat(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "stat KEY",
		Short: "Show KEY's current version, size, redundancy and placement",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				rec, err := c.Stat(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), formatRecord(rec))
				return nil
			})
		},
	}
}

func ctlRm(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm KEY",
		Short: "Delete KEY",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				rec, err := c.DeleteKey(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s (its chunks are collected in the background)\n", versionName(rec))
				return nil
			})
		},
	}
}

func ctlLs(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List keys (with size, redundancy and version)",
		Args:  rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			return f.runPublic(func(ctx context.Context, c *pubclient.Client) error {
				objs, err := c.List(ctx, prefix)
				if err != nil {
					return err
				}
				rows := [][]string{{"KEY", "SIZE", "REDUNDANCY", "VERSION", "CREATED"}}
				for _, o := range objs {
					version := "-" // written before per-key versions existed
					if o.Version > 0 {
						version = strconv.FormatUint(o.Version, 10)
					}
					rows = append(rows, []string{displayKey(o.Key), strconv.FormatInt(o.Size, 10), o.Redundancy.String(),
						version, o.Created.UTC().Format(time.RFC3339)})
				}
				return writeTable(cmd.OutOrStdout(), rows)
			})
		},
	}
}

func ctlNodes(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List the nodes: liveness, directory, capacity, wear and repair counts, asked of each node now",
		Long: `nodes lists the cluster's members. Each live node is asked for its figures
now (AS OF "now"); a node that does not answer shows those of its last
heartbeat, with their age. DIR is the node's data directory; its ID is the
one every other command and log line uses. Repair counts are the node's
durable totals (see 'ctl repairs').`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				reports, err := c.NodeReports(ctx, true, 5*time.Second)
				if err != nil {
					return err
				}
				now := time.Now()
				rows := [][]string{{"NODE", "STATE", "ADDRESS", "USED", "CAPACITY", "TRANSIENT", "PERSISTENT", "REPAIRED", "ERASES (MAX)", "AS OF", "DIR"}}
				for _, r := range reports {
					rows = append(rows, nodeRow(r, now))
				}
				if err := writeTable(cmd.OutOrStdout(), rows); err != nil {
					return err
				}
				for _, r := range reports {
					if r.Stats != nil && len(r.Stats.Devices) > 0 && r.Stats.Devices[0].Degraded {
						fmt.Fprintf(cmd.OutOrStdout(), "node %d: device degraded: %s\n", r.Info.Id, r.Stats.Devices[0].DegradedReason)
					}
				}
				for _, r := range reports {
					if r.Err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "node %d did not answer: %v\n", r.Info.Id, r.Err)
					}
				}
				return nil
			})
		},
	}
}

// nodeRow is one line of `ctl nodes`: the node's own figures when it
// answered, else its last heartbeat's.
func nodeRow(r client.NodeReport, now time.Time) []string {
	n := r.Info
	state := "down"
	if n.Live {
		state = "up"
	}
	used, capacity, wear := base.Bytes(n.UsedBytes), base.Bytes(n.CapacityBytes), erases(n.WearBlocks, n.EraseCountTotal, n.EraseCountMax)
	transient, persistent, repaired := n.Transient, n.Persistent, n.Repaired
	dir := n.Dir
	asOf := "-"
	if n.HeartbeatUnixMs > 0 {
		asOf = "heartbeat " + age(now.Sub(time.UnixMilli(n.HeartbeatUnixMs))) + " ago"
	}
	if st := r.Stats; st != nil {
		asOf, dir = "now", st.Dir
		used, capacity = base.Bytes(st.UsedBytes), base.Bytes(st.CapacityBytes)
		if len(st.Devices) > 0 {
			d := st.Devices[0]
			wear = erases(d.WearBlocks, d.EraseCountTotal, d.EraseCountMax)
			switch {
			case d.Degraded:
				state += ", DEGRADED"
			case d.FailedDies > 0:
				state += fmt.Sprintf(", %d dies failed", d.FailedDies)
			}
		}
		if h := st.History; h != nil {
			transient, persistent = h.Counts[node.KindTransient], h.Counts[node.KindPersistent]
			repaired = h.Counts[node.KindRepaired] + h.Counts[node.KindMissingRepaired]
		}
	}
	if dir == "" {
		dir = "-"
	}
	figures := []string{used.String(), capacity.String(), strconv.FormatInt(transient, 10), strconv.FormatInt(persistent, 10), strconv.FormatInt(repaired, 10), wear}
	if r.Stats == nil && n.HeartbeatUnixMs == 0 {
		figures = []string{"-", "-", "-", "-", "-", "-"}
	}
	return append(append([]string{strconv.FormatUint(n.Id, 10), state, n.Addr}, figures...), asOf, dir)
}

func erases(blocks, total, most int64) string {
	if blocks == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%d)", total, most)
}

// age prints a duration for people: 0.4s, 12s, 5m3s, 2h10m.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	}
	return d.Truncate(time.Minute).String()
}

func ctlRepairs(f *ctlFlags) *cobra.Command {
	var recent int
	cmd := &cobra.Command{
		Use:   "repairs",
		Short: "What each node detected and repaired (durable totals) and the most recent repairs",
		Long: `repairs prints, per node, the totals of its repair history since SINCE:
chunk reads, transient corruptions (the re-read verified), persistent ones
(damage on the device), chunks repaired and missing chunks re-created from
redundancy, repairs the node could not write (device full, write error; the
event's detail says why, and the chunk stays damaged until a later read or
scrub repairs it), writes refused because their data did not verify, new
writes refused to keep the repair reserve free (node --repair-reserve), and
local metadata copies rewritten; USED is the device's fill. Each node keeps this history durably (three
checksummed copies in its store, like its identity), so it survives
restarts; INJECTED FLIPS counts this run's fault injection only. Then it
lists the most recent events of all nodes, oldest first.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if recent < 0 {
				return base.InvalidArgumentf("--recent %d is negative", recent)
			}
			return f.run(func(ctx context.Context, c *client.Client) error {
				reports, err := c.NodeReports(ctx, true, 10*time.Second)
				if err != nil {
					return err
				}
				return printRepairs(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), c, reports, recent)
			})
		},
	}
	cmd.Flags().IntVar(&recent, "recent", 20, "how many recent events to list (0: none)")
	return cmd
}

func printRepairs(ctx context.Context, out, errOut io.Writer, c *client.Client, reports []client.NodeReport, recent int) error {
	rows := [][]string{{"NODE", "SINCE", "CHUNKS READ", "TRANSIENT", "PERSISTENT", "REPAIRED", "MISSING REPAIRED",
		"REPAIR FAILED", "REJECTED WRITES", "REFUSED FULL", "META REPAIRED", "INJECTED FLIPS", "USED", "DIR"}}
	type event struct {
		node uint64
		ev   *nodepb.RepairEvent
	}
	var events []event
	for _, r := range reports {
		if r.Stats == nil || r.Stats.History == nil {
			why := "down"
			if r.Err != nil {
				why = r.Err.Error()
			}
			fmt.Fprintf(errOut, "node %d: no report (%s)\n", r.Info.Id, why)
			continue
		}
		h := r.Stats.History
		var flips int64
		for _, d := range r.Stats.Devices {
			flips += d.InjectedFlips
		}
		row := []string{strconv.FormatUint(r.Info.Id, 10), time.UnixMilli(h.SinceUnixMs).Format(timeLayout)}
		for _, k := range []string{node.CountChunksRead, node.KindTransient, node.KindPersistent, node.KindRepaired,
			node.KindMissingRepaired, node.KindRepairFailed, node.KindRejectedWrite, node.CountRefusedFull, node.KindMetaRepaired} {
			row = append(row, strconv.FormatInt(h.Counts[k], 10))
		}
		used := "-"
		if r.Stats.CapacityBytes > 0 {
			used = fmt.Sprintf("%.1f%%", 100*float64(r.Stats.UsedBytes)/float64(r.Stats.CapacityBytes))
		}
		rows = append(rows, append(row, strconv.FormatInt(flips, 10), used, r.Stats.Dir))
		for _, e := range h.Recent {
			events = append(events, event{r.Info.Id, e})
		}
	}
	if err := writeTable(out, rows); err != nil {
		return err
	}
	if recent == 0 {
		return nil
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].ev.UnixMs < events[j].ev.UnixMs })
	if len(events) > recent {
		events = events[len(events)-recent:]
	}
	fmt.Fprintf(out, "\nrecent repairs (%d, oldest first):\n", len(events))
	if len(events) == 0 {
		return nil
	}
	// The per-key version of an event's object version, when it is still
	// the key's current one.
	current := map[string]*objectpb.ObjectRecord{}
	version := func(e *nodepb.RepairEvent) string {
		if e.Version == 0 {
			return "-"
		}
		if e.Key == "" {
			return fmt.Sprintf("(internal %d)", e.Version)
		}
		rec, ok := current[e.Key]
		if !ok {
			rec, _ = c.Stat(ctx, e.Key)
			current[e.Key] = rec
		}
		if rec != nil && rec.Version == e.Version {
			return versionNumber(rec)
		}
		return fmt.Sprintf("(replaced, internal %d)", e.Version)
	}
	rows = [][]string{{"TIME", "NODE", "KIND", "KEY", "VERSION", "SHARD", "CHUNK", "DETAIL"}}
	for _, e := range events {
		key, shard, chunk := "-", "-", "-"
		if e.ev.Version != 0 {
			key = fmt.Sprintf("(object %016x)", e.ev.Object)
			if e.ev.Key != "" {
				key = displayKey(e.ev.Key)
			}
			shard, chunk = strconv.FormatUint(uint64(e.ev.Shard), 10), strconv.FormatUint(uint64(e.ev.Index), 10)
		}
		detail := e.ev.Detail
		if detail == "" {
			detail = "-"
		}
		rows = append(rows, []string{time.UnixMilli(e.ev.UnixMs).Format(timeLayout), strconv.FormatUint(e.node, 10),
			e.ev.Kind, key, version(e.ev), shard, chunk, detail})
	}
	return writeTable(out, rows)
}

// timeLayout prints times in the local zone, to the second.
const timeLayout = "2006-01-02 15:04:05"

func parseNode(s uint64) (uint64, error) {
	if s == 0 {
		return 0, base.InvalidArgumentf("--node is required")
	}
	return s, nil
}

func ctlInjectUBER(f *ctlFlags) *cobra.Command {
	var nodeID uint64
	var persistent bool
	cmd := &cobra.Command{
		Use:   "uber --node N RATE",
		Short: "Flip each bit a node reads with probability RATE (0 stops)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNode(nodeID)
			if err != nil {
				return err
			}
			rate, err := strconv.ParseFloat(args[0], 64)
			if err != nil {
				return base.InvalidArgumentf("rate %q: %v", args[0], err)
			}
			return f.run(func(ctx context.Context, c *client.Client) error {
				if err := c.InjectUBER(ctx, id, rate, persistent); err != nil {
					return err
				}
				switch {
				case rate == 0:
					fmt.Fprintf(cmd.OutOrStdout(), "node %d: no longer injects bit flips\n", id)
				case persistent:
					fmt.Fprintf(cmd.OutOrStdout(), "node %d: flips each bit it reads with probability %g and writes the flips back (persistent)\n", id, rate)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "node %d: flips each bit it reads with probability %g on the way out (transient)\n", id, rate)
				}
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&nodeID, "node", 0, "node ID (as in 'ctl nodes')")
	cmd.Flags().BoolVar(&persistent, "persistent", false, "write the flips into the stored data")
	markRequired(cmd, "node")
	return cmd
}

func ctlCorrupt(f *ctlFlags) *cobra.Command {
	var replica int
	var offset int64
	var bits int
	cmd := &cobra.Command{
		Use:   "corrupt KEY --replica I --offset O [--bits K]",
		Short: "Flip K bits of replica (or EC shard) I's stored data at byte offset O",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				d, err := c.CorruptAt(ctx, args[0], replica, offset, bits)
				if err != nil {
					return err
				}
				what := "replica"
				if d.Record.Redundancy == objectpb.Redundancy_EC {
					what = "shard"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "flipped %d bits of %s %s %d at byte %d: node %d, chunk %d, byte %d of the chunk\n",
					d.Bits, versionName(d.Record), what, d.Replica, offset, d.Node, d.Chunk.Index, d.OffsetInChunk)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&replica, "replica", 0, "replica index (REP, 0-2) or shard index (EC, 0-5)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "byte offset in the replica's or shard's data")
	cmd.Flags().IntVar(&bits, "bits", 1, "number of consecutive bits to flip")
	markRequired(cmd, "replica", "offset")
	return cmd
}

func ctlFailDie(f *ctlFlags) *cobra.Command {
	var nodeID uint64
	var die int
	cmd := &cobra.Command{
		Use:   "fail-die --node N --die D",
		Short: "Fail one die of a node's emulated flash device",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNode(nodeID)
			if err != nil {
				return err
			}
			return f.run(func(ctx context.Context, c *client.Client) error {
				if err := c.FailDie(ctx, id, die); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %d: die %d of its emulated flash device failed\n", id, die)
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&nodeID, "node", 0, "node ID (as in 'ctl nodes')")
	cmd.Flags().IntVar(&die, "die", 0, "die index (flat, channel-major)")
	markRequired(cmd, "node", "die")
	return cmd
}

func ctlScrub(f *ctlFlags) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "scrub [PREFIX]",
		Short: "Verify every replica and EC parity of the keys under PREFIX now, and repair",
		Args:  rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			return f.run(func(ctx context.Context, c *client.Client) error {
				recs, err := c.List(ctx, prefix)
				if err != nil {
					return err
				}
				var chunks, repaired, missing, failed, repairFailed, noSpace int
				var verified int64
				p := cmdProgress(cmd, quiet)
				p.Linef("scrub: %d objects to verify", len(recs))
				for i, rec := range recs {
					p.Tickf("scrub: %d of %d objects, %s verified, %d chunks repaired", i, len(recs), base.Bytes(verified), repaired)
					rep, err := c.ScrubObject(ctx, rec, nil, nil)
					if rep != nil {
						chunks += rep.Chunks
						repaired += rep.Repaired
						missing += rep.RepairedMissing
						verified += rep.BytesRead
						repairFailed += rep.RepairFailed
						for _, f := range rep.RepairFailures {
							if f.NoSpace {
								noSpace++
							}
							fmt.Fprintf(cmd.ErrOrStderr(), "%s: repair failed: %s\n", rec.Key, f)
						}
						if n := rep.RepairFailed - len(rep.RepairFailures); n > 0 {
							fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d more repairs failed\n", rec.Key, n)
						}
					}
					if err != nil {
						failed++
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", rec.Key, err)
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "scrubbed %d objects (%d chunks or rows, %s of data): %d chunks repaired (%d of them missing), %d repairs failed, %d objects failed\n",
					len(recs), chunks, base.Bytes(verified), repaired, missing, repairFailed, failed)
				var errs []string
				if failed > 0 {
					errs = append(errs, fmt.Sprintf("%d objects could not be scrubbed", failed))
				}
				if repairFailed > 0 {
					why := ""
					if noSpace > 0 {
						why = fmt.Sprintf(", %d listed of them on a full device: free space there (delete objects) and scrub again", noSpace)
					}
					errs = append(errs, fmt.Sprintf("%d repairs could not be written (the chunks stay damaged on those nodes; see 'ctl repairs'%s)", repairFailed, why))
				}
				if len(errs) > 0 {
					return errors.New(strings.Join(errs, "; "))
				}
				return nil
			})
		},
	}
	registerQuiet(cmd, &quiet)
	return cmd
}
