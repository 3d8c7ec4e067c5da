package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
)

// wearFlags turn the coordinator's wear balancer on (coordinator, dev).
type wearFlags struct {
	policy     string
	redundancy string
	epoch      time.Duration
	moves      time.Duration
}

func (w *wearFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&w.policy, "wear-policy", "", "run the wear balancer: rep, ec, edm or chameleon (default off)")
	f.StringVar(&w.redundancy, "wear-redundancy", "", "initial redundancy of edm and chameleon: ec (default) or rep")
	f.DurationVar(&w.epoch, "wear-epoch", time.Minute, "wear balancer epoch")
	f.DurationVar(&w.moves, "wear-move-interval", 10*time.Second, "how often the mover carries out the balancer's moves")
}

func (w *wearFlags) config() coord.WearConfig {
	return coord.WearConfig{Policy: w.policy, Redundancy: w.redundancy, Epoch: w.epoch}
}

// runMover carries out the wear balancer's moves every interval until ctx
// ends (the coordinator process runs it next to the scrubber).
func (w *wearFlags) runMover(ctx context.Context, cli *client.Client, logf func(string, ...any)) {
	if w.policy == "" || w.moves <= 0 {
		return
	}
	t := time.NewTicker(w.moves)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := cli.RunWearMoves(ctx, 100, nil); err != nil && ctx.Err() == nil {
				logf("wear mover: %v", err)
			}
		}
	}
}

func ctlWear(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "wear",
		Short: "Show the wear balancer: erase counts per node, their standard deviation, the state mix, the moves",
		Long: `wear shows the coordinator's wear balancer (Chameleon, internal/wear): the
policy, the epoch, each node's cumulative block erases (from its heartbeats),
erases in the last epoch and utilization, the standard deviation of the live
nodes' erase counts, how many objects and bytes are in each state (REP, EC,
late-REP, late-EC, REP-EWO, EC-EWO), the moves made, failed and pending, and
the latest moves with their outcome. Each node on emulated flash is also asked
for its erases per die (channel-major: die 0 is channel 0's first die); a node
that does not answer shows "-".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(func(ctx context.Context, c *client.Client) error {
				st, err := c.WearStatus(ctx)
				if err != nil {
					return err
				}
				// Per-die counts come from the nodes themselves; the
				// balancer's figures stand without them.
				dies := map[uint64][]int64{}
				if st.Policy != "" {
					if reports, err := c.NodeReports(ctx, false, 5*time.Second); err == nil {
						for _, r := range reports {
							if r.Stats != nil && len(r.Stats.Devices) > 0 {
								dies[r.Info.Id] = r.Stats.Devices[0].DieEraseCounts
							}
						}
					}
				}
				return printWear(cmd.OutOrStdout(), st, dies, time.Now())
			})
		},
	}
}

// printWear writes `ctl wear`'s report: the balancer's status st, the
// nodes' erases per die (by node ID; absent: "-"), move ages as of now.
func printWear(out io.Writer, st *coordpb.WearStatusResponse, dies map[uint64][]int64, now time.Time) error {
	if st.Policy == "" {
		fmt.Fprintln(out, "wear balancer: off (start the coordinator with --wear-policy)")
		return nil
	}
	var ran []string
	for name, on := range map[string]bool{"ARPT": st.Arpt, "HCDS": st.Hcds, "EDM": st.Edm} {
		if on {
			ran = append(ran, name)
		}
	}
	if len(ran) == 0 {
		ran = []string{"nothing"}
	}
	cv := 0.0
	if st.EraseMean > 0 {
		cv = st.EraseSigma / st.EraseMean
	}
	fmt.Fprintf(out, "wear balancer: policy %s (initial %s), epoch %d every %s; last epoch ran %s\n",
		st.Policy, st.InitialRedundancy, st.Epoch, time.Duration(st.EpochMillis)*time.Millisecond, strings.Join(sortedStrings(ran), ", "))
	fmt.Fprintf(out, "erase counts: mean %.1f, sigma %.1f (sigma/mean %.3f) over the live nodes\n", st.EraseMean, st.EraseSigma, cv)
	rows := [][]string{{"NODE", "STATE", "ERASES", "LAST EPOCH", "UTILIZATION", "ERASES PER DIE"}}
	for _, n := range st.Nodes {
		state := "down"
		if n.Live {
			state = "up"
		}
		perDie := "-"
		if d := dies[n.Id]; len(d) > 0 {
			parts := make([]string, len(d))
			for i, e := range d {
				parts[i] = fmt.Sprint(e)
			}
			perDie = strings.Join(parts, " ")
		}
		rows = append(rows, []string{fmt.Sprint(n.Id), state, fmt.Sprint(n.Erases), fmt.Sprintf("%.0f", n.EraseRate), fmt.Sprintf("%.1f%%", 100*n.Utilization), perDie})
	}
	if err := writeTable(out, rows); err != nil {
		return err
	}
	rows = [][]string{{"STATE", "OBJECTS", "BYTES"}}
	for _, s := range st.States {
		rows = append(rows, []string{s.State, fmt.Sprint(s.Objects), base.Bytes(s.Bytes).String()})
	}
	if err := writeTable(out, rows); err != nil {
		return err
	}
	fmt.Fprintf(out, "moves: %d done (%s), %d superseded, %d failed, %d pending; %d mapping rows\n",
		st.MovesDone, base.Bytes(st.BytesMoved), st.MovesSuperseded, st.MovesFailed, st.MovesPending, st.MappingRows)
	for _, c := range st.MovesFailedByReason {
		fmt.Fprintf(out, "  failed: %d %s\n", c.Moves, c.Reason)
	}
	if len(st.RecentMoves) == 0 {
		return nil
	}
	fmt.Fprintln(out, "recent moves (oldest first):")
	rows = [][]string{{"ID", "WHEN", "KEY", "SLOT", "FROM", "TO", "BYTES", "REASON", "OUTCOME"}}
	for _, m := range st.RecentMoves {
		outcome := m.Outcome
		if m.Why != "" {
			outcome += " (" + m.Why + ")"
		}
		if m.Error != "" {
			outcome += ": " + m.Error
		}
		from, to := "-", "-"
		if m.From != 0 {
			from, to = fmt.Sprint(m.From), fmt.Sprint(m.To)
		}
		rows = append(rows, []string{fmt.Sprint(m.Id), age(now.Sub(time.UnixMilli(m.UnixMs))) + " ago", m.Key, fmt.Sprint(m.Slot),
			from, to, base.Bytes(m.Bytes).String(), m.Reason, outcome})
	}
	return writeTable(out, rows)
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
