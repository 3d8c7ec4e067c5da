package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/reparo"
)

// demoOptions are `flashmend demo`'s settings.
type demoOptions struct {
	dir         string
	objects     int
	objectBytes base.Bytes
	seed        int64
	// keep: after the story, keep the cluster and its dashboard running
	// until Ctrl-C.
	keep bool
}

func newDemoCmd() *cobra.Command {
	o := demoOptions{objects: 24, objectBytes: 512 * base.KiB, seed: 1, keep: true}
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR]",
		Short: "Start a local cluster with its dashboard, damage it, and narrate what flashmend repairs",
		Long: `Starts a local cluster (as 'flashmend dev': coordinator and 6 nodes on
emulated flash, with metrics, the S3 gateway and the dashboard), then tells a
short story, step by step, on a cluster you can watch in the dashboard:

  1. loads objects, half replicated (REP), half erasure coded (EC);
  2. flips bits in one stored replica and reads it back: DIRECT finds the bad
     chunk and repairs it from a good copy;
  3. ramps the uncorrectable bit error rate (UBER) of one node's flash and
     reads everything at each step: every byte comes back right;
  4. fails a whole flash die and lets Reparo rebuild only what that die
     held, then reads everything again.

Each read is checked against the bytes written. At the end the cluster keeps
running (Ctrl-C stops it) so that you can look around with 'flashmend ctl',
the S3 endpoint and the dashboard; --keep=false exits instead. Without --dir
the data lives in a temporary directory that is removed at the end.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			return runDemo(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "data directory (default: a temporary one, removed at the end)")
	f.IntVar(&o.objects, "objects", o.objects, "objects to load")
	f.Var(&o.objectBytes, "object-size", "size of each object")
	f.Int64Var(&o.seed, "seed", o.seed, "seed of the objects' bytes and of the damage")
	f.BoolVar(&o.keep, "keep", o.keep, "after the story, keep the cluster running until Ctrl-C")
	return cmd
}

// lineWriter is an io.Writer whose lines are also kept (the demo finds
// dev's endpoint lines in them).
type lineWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) find(re *regexp.Regexp) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := re.FindStringSubmatch(l.buf.String()); m != nil {
		return m[1]
	}
	return ""
}

func runDemo(ctx context.Context, o demoOptions, out, errOut io.Writer) error {
	if o.objects < 2 || o.objectBytes < 64*base.KiB {
		return base.InvalidArgumentf("--objects at least 2 and --object-size at least 64KiB")
	}
	if o.dir == "" {
		dir, err := os.MkdirTemp("", "flashmend-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.dir = dir
	}
	dev := devOptions{dir: o.dir, nodes: 6, store: "sdf", deviceSize: 256 * base.MiB, readMode: client.ModeDirect,
		dieRepair: "reparo", maxObject: base.GiB, kv: true, kvSplits: "g,n,t"}
	dev.scrub.off = true // the story's repairs are the reads'; a scrub pass would race them
	dev.metrics.addr, dev.dashboard.addr = "127.0.0.1:0", "127.0.0.1:0"
	dev.s3 = s3Flags{addr: "127.0.0.1:0", accessKey: devS3AccessKey, secretKey: devS3SecretKey}
	devCtx, stopDev := context.WithCancel(ctx)
	defer stopDev()
	lines := &lineWriter{w: out}
	ready := make(chan *devcluster.Cluster, 1)
	done := make(chan error, 1)
	go func() { done <- runDev(devCtx, dev, lines, io.Discard, func(c *devcluster.Cluster) { ready <- c }) }()
	var cl *devcluster.Cluster
	select {
	case cl = <-ready:
	case err := <-done:
		return err
	}
	story := func() error {
		c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
		if err != nil {
			return err
		}
		defer c.Close()
		dash := lines.find(regexp.MustCompile(`(?m)^dashboard: (\S+)$`))
		fmt.Fprintf(out, "\n== the flashmend demo: watch it live at %s\n", dash)
		return demoStory(ctx, c, cl, o, out)
	}
	err := story()
	if err == nil && o.keep {
		fmt.Fprintf(out, "\nThe cluster keeps running: look around with 'flashmend ctl --endpoint %s nodes', the S3 endpoint and the dashboard. Ctrl-C stops it.\n", cl.Endpoint())
		<-ctx.Done()
	}
	stopDev()
	return errors.Join(err, <-done)
}

// demoObject is object i's bytes.
func demoObject(seed int64, i int, size base.Bytes) []byte {
	b := make([]byte, size)
	rand.New(rand.NewSource(seed*1_000_003 + int64(i))).Read(b)
	return b
}

// readAll reads every demo object, checks its bytes, and sums the repairs.
func readAll(ctx context.Context, c *client.Client, o demoOptions) (client.ReadReport, error) {
	var sum client.ReadReport
	for i := 0; i < o.objects; i++ {
		key := fmt.Sprintf("demo/obj-%03d", i)
		got, rep, err := c.GetWithReport(ctx, key, client.ModeDefault)
		if err != nil {
			return sum, fmt.Errorf("read %s: %w", key, err)
		}
		if !bytes.Equal(got, demoObject(o.seed, i, o.objectBytes)) {
			return sum, fmt.Errorf("read %s: the bytes differ from those written", key)
		}
		sum.Chunks += rep.Chunks
		sum.Repaired += rep.Repaired
		sum.Voted += rep.Voted
		sum.Reconstructed += rep.Reconstructed
		sum.RepairFailed += rep.RepairFailed
	}
	c.WaitBackground()
	return sum, nil
}

func repairLine(r client.ReadReport) string {
	return fmt.Sprintf("%d chunks or rows verified; %d chunks repaired from a good replica, %d rebuilt by majority vote, %d EC rows rebuilt from parity, %d repairs failed",
		r.Chunks, r.Repaired, r.Voted, r.Reconstructed, r.RepairFailed)
}

func demoStory(ctx context.Context, c *client.Client, cl *devcluster.Cluster, o demoOptions, out io.Writer) error {
	step := func(n int, title string) { fmt.Fprintf(out, "\n[%d] %s\n", n, title) }
	say := func(format string, args ...any) { fmt.Fprintf(out, "    "+format+"\n", args...) }

	step(1, fmt.Sprintf("loading %d objects of %s: even ones replicated 3 ways (REP), odd ones Reed-Solomon 4+2 (EC)", o.objects, o.objectBytes))
	start := time.Now()
	for i := 0; i < o.objects; i++ {
		red := objectpb.Redundancy_REP
		if i%2 == 1 {
			red = objectpb.Redundancy_EC
		}
		if _, err := c.Put(ctx, fmt.Sprintf("demo/obj-%03d", i), demoObject(o.seed, i, o.objectBytes), red); err != nil {
			return err
		}
	}
	say("stored %s in %v; every chunk carries CRC32C checksums per 512 bytes", base.Bytes(int64(o.objects)*int64(o.objectBytes)), time.Since(start).Round(time.Millisecond))

	step(2, "bit rot: flipping 3 bits in one stored replica of demo/obj-000, then reading it")
	if err := c.Corrupt(ctx, "demo/obj-000", 0, 1000, 3); err != nil {
		return err
	}
	got, rep, err := c.GetWithReport(ctx, "demo/obj-000", client.ModeDefault)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, demoObject(o.seed, 0, o.objectBytes)) {
		return errors.New("demo/obj-000: the bytes differ from those written")
	}
	c.WaitBackground()
	say("the read found the bad chunk by its checksum, served the good bytes from another replica and rewrote the bad one: %d repaired", rep.Repaired)

	rng := rand.New(rand.NewSource(o.seed))
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Id < nodes[j].Id })
	if len(nodes) < 2 {
		return fmt.Errorf("the demo needs at least 2 nodes, the cluster has %d", len(nodes))
	}
	victim := nodes[rng.Intn(len(nodes))].Id
	step(3, fmt.Sprintf("wearing out node %d's flash: raising its uncorrectable bit error rate (UBER), bits flipped where they are stored", victim))
	for _, uber := range []float64{1e-7, 1e-6, 1e-5} {
		if err := c.InjectUBER(ctx, victim, uber, true); err != nil {
			return err
		}
		r, err := readAll(ctx, c, o)
		if err != nil {
			return fmt.Errorf("UBER %g: %w", uber, err)
		}
		say("UBER %g: read all %d objects, every byte right; %s", uber, o.objects, repairLine(r))
	}
	if err := c.InjectUBER(ctx, victim, 0, true); err != nil {
		return err
	}
	say("(a datacenter drive is specified at UBER 1e-15; worn dense flash reaches 1e-7 and beyond)")

	dieNode, die, held, err := fullestDie(cl, victim)
	if err != nil {
		return err
	}
	step(4, fmt.Sprintf("a flash die fails: die %d of node %d's device (1 of its 16 dies), which holds %s of its data", die, dieNode, held))
	if err := c.FailDie(ctx, dieNode, die); err != nil {
		return err
	}
	r, err := readAll(ctx, c, o)
	if err != nil {
		return fmt.Errorf("with a failed die: %w", err)
	}
	say("read all %d objects at once, every byte right (what was on the die reads as damage, served from redundancy); %s", o.objects, repairLine(r))
	failed, repaired, err := waitDieRepair(ctx, c, dieNode)
	if err != nil {
		return err
	}
	say("the node detected it: %s", failed)
	if repaired == "" {
		say("the die held none of the cluster's data: nothing to rebuild, the device stays in service")
	} else {
		say("Reparo rebuilt only what the die held, from the cluster's redundancy, and kept the device in service: %s", repaired)
	}
	if r, err = readAll(ctx, c, o); err != nil {
		return fmt.Errorf("after the die repair: %w", err)
	}
	say("read all %d objects again, every byte right; %s", o.objects, repairLine(r))

	step(5, "what each node detected and repaired (its durable repair history, as 'flashmend ctl repairs' prints it)")
	reps, err := c.NodeReports(ctx, true, 10*time.Second)
	if err != nil {
		return err
	}
	for _, r := range reps {
		st := r.Stats
		if st == nil {
			say("node %d: did not answer (%v)", r.Info.GetId(), r.Err)
			continue
		}
		var kinds []string
		for k, v := range st.GetHistory().GetCounts() {
			if v > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
			}
		}
		sort.Strings(kinds)
		if len(kinds) == 0 {
			kinds = []string{"nothing"}
		}
		say("node %d: %s", st.NodeId, strings.Join(kinds, ", "))
	}
	return nil
}

// fullestDie is the die that holds the most data of any node but skip.
func fullestDie(cl *devcluster.Cluster, skip uint64) (node uint64, die int, held base.Bytes, err error) {
	for i := range cl.Nodes {
		n := cl.Node(i)
		if n == nil { // dead
			continue
		}
		st, ok := n.Store().(*objstore.SDFStore)
		if !ok || uint64(n.ID()) == skip {
			continue
		}
		g := st.Geometry()
		for d := 0; d < g.Dies(); d++ {
			loss, err := st.LostOnDie(flash.DieAddr{Channel: d / g.DiesPerChannel, Die: d % g.DiesPerChannel}, reparo.IdentifyCDRStar)
			if err != nil {
				return 0, 0, 0, err
			}
			if base.Bytes(loss.Bytes) > held {
				node, die, held = uint64(n.ID()), d, base.Bytes(loss.Bytes)
			}
		}
	}
	if held == 0 {
		return 0, 0, 0, errors.New("no die holds data")
	}
	return node, die, held, nil
}

// waitDieRepair runs the die repairs the nodes ask for (as the dev
// cluster's scrubber does, which the demo keeps off so that the story's
// repairs are its reads') until node id records its die failure and, if
// the die held data, its repair; up to 3 minutes. It returns the two
// records' details ("" repaired: nothing to repair).
func waitDieRepair(ctx context.Context, c *client.Client, id uint64) (failed, repaired string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	s, err := client.NewScrubber(c, client.ScrubberOptions{DieRepairPoll: -1})
	if err != nil {
		return "", "", err
	}
	kinds := ""
	for {
		if _, err = s.RepairDies(ctx); err == nil {
			var reps []client.NodeReport
			if reps, err = c.NodeReports(ctx, true, 10*time.Second); err == nil {
				for _, r := range reps {
					st := r.Stats
					if st == nil || st.NodeId != id {
						continue
					}
					kinds = fmt.Sprint(st.GetHistory().GetCounts())
					for _, ev := range st.GetHistory().GetRecent() {
						switch ev.Kind {
						case "die-failed":
							failed = ev.Detail
						case "die-repaired":
							repaired = ev.Detail
						}
					}
				}
				if repaired != "" || strings.Contains(failed, "lost 0 ranges") {
					return failed, repaired, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("node %d recorded no die failure and repair: %w (last error: %v; failure: %q; %s)", id, ctx.Err(), err, failed, kinds)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
