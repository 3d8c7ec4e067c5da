// Package wear is Chameleon's wear balancer (paper 004, Zhao et al.,
// IPDPS'18, sections III-IV) and the baselines it is measured against, as a
// pure policy: no clock, no I/O, no randomness. Inputs are the flash
// monitor's per-server statistics, object writes and the end of each epoch;
// outputs are write plans, mapping-table changes and moves. The coordinator
// runs it on real heartbeats and the fleet simulator (internal/sim) runs the
// same code at datacenter scale.
//
// # What it owns
//
//   - The flash monitor's state per server (ServerStats: erase count,
//     utilization, capacity, GC victim utilization mu; the erase rate per
//     epoch it derives) and each object's write heat: popularity with
//     exponential decay (eq. 1, model.DecayPopularity, in writes) and the
//     same decay over bytes written, which eq. 2 (model.EraseEstimate) turns
//     into the erases a part will cause on a server.
//   - The mapping table (Entry, Table): object -> state (REP, EC, late-REP,
//     late-EC, REP-EWO, EC-EWO), source and destination layouts, and the
//     epoch of the last change; an epoch log of every change, compacted to
//     one row per object, default rows dropped (Figure 3); a checksummed
//     binary encoding of a row.
//   - ARPT (Algorithm 1): hot objects (popularity >= l_hot, l_hot set each
//     epoch at the HotFraction rank) are upgrade candidates (late-REP),
//     cold ones downgrade candidates (late-EC); the conversion happens on
//     the object's next write (PlanWrite). While the estimated wear
//     variance exceeds sigma_ARPT, the hottest candidates go to the three
//     least worn servers (when that lowers the upper tail of the estimated
//     erase counts) and the coldest to the six most worn; the other cold
//     candidates convert onto their default placement, the other hot ones
//     stay EC. A late state whose object changed sides before a write is
//     cancelled.
//   - HCDS (Algorithm 2) with EWO: the hottest part on the most worn server
//     and the coldest part on the least worn swap servers through the EWO
//     states: the next write of each lands on its new server (write
//     offloading), and an EWO object left unwritten for MigrateAfterEpochs
//     is migrated (a Move), the paper's fallback for cold data.
//   - The baselines as modes (Mode): rep, ec (RS 4+2), rep+ec (age-based
//     encoding after ColdAfterEpochs, like HDFS-RAID), edm (migrate the
//     hottest parts from the most to the least worn server now, ignoring
//     redundancy) and chameleon.
//   - Bounds: the thresholds sigma_ARPT and sigma_HCDS (in erases, or as
//     ratios of the mean), a remap budget and a byte budget per
//     epoch, and MaxUtilization (no part is placed on a fuller server).
//
// # Invariants
//
//   - Every row is complete (Entry.Check): a state, a destination of the
//     state's target redundancy on Width() distinct servers, and a source of
//     the state's source redundancy exactly when the state is intermediate.
//   - No decision lowers redundancy: the readable layout (the source of an
//     intermediate state, else the destination) holds the latest version on
//     every part until a write to the destination commits (Commit) or a
//     move to it is confirmed (MoveDone); only then may the caller release
//     the parts the new layout does not keep. TestNeverUnderRedundant
//     checks this over random runs.
//   - Deterministic: the same inputs give the same decisions (objects are
//     kept in a slice, every ranking breaks ties by object ID).
//
// # Failure model
//
// The balancer holds no durable state: the caller persists rows (Changed,
// the epoch log) and restores them with Restore after a restart;
// popularities restart at zero. A move that fails (MoveFailed) leaves the
// object on its source and may be issued again; a move that finishes after
// the object changed (a write, a removal) is refused with ErrStaleMove and
// the caller drops what it copied (Superseded tells such a move from a
// failure before it is reported). Servers that are not up are never
// targets; a write planned onto a server that went down is re-planned on
// the next server of the object's ring walk (PlanWriteAvoiding takes the
// caller's current view of liveness, which replaces the last epoch's). A
// part moved by something else (re-protection of a dead server) is
// reported with Relocate: the object's pending decision is dropped.
//
// # Differences from the paper
//
//   - The thresholds sigma_ARPT and sigma_HCDS are the paper's, in erase
//     counts (Options.SigmaARPT, SigmaHCDS), but by default they are
//     coefficients of variation (SigmaARPTRatio 0.03, SigmaHCDSRatio 0.05).
//     NB: the paper gives no values, and a count fitted to one workload,
//     device size and run length fires at once or never on another, and
//     tightens as erase counts grow over a run; a fraction of the mean
//     serves every workload and fleet size (testdata/thresholds.txt shows
//     the erase form). The order is Figure 8's (ARPT starts at hour 3,
//     HCDS at hour 5 as the imbalance grows, so sigma_ARPT < sigma_HCDS),
//     the proportion its 3 to 5 (see Options.SigmaARPTRatio). EDM takes
//     sigma_HCDS, the threshold of the algorithm it shares (it has one).
//   - ARPT upgrades (EC to REP) only in step 2, onto the three least worn
//     servers, and only when that lowers the estimated mean plus one
//     standard deviation of the erase counts (estimate.lowersUpperTail);
//     upgrade candidates step 2 does not place stay EC (section III-B1:
//     conversions are "delayed as long as the wear variance remains
//     tolerable"; the paper does not say where a candidate its loop does
//     not reach goes). A REP write programs more pages than EC's, so a
//     test on sigma alone would take any upgrade onto the least worn
//     servers, whatever it costs. Downgrade candidates step 2 does not
//     place convert onto their default placement (EC lowers the erase
//     overhead).
//   - The variance estimate projects HorizonEpochs of each object's current
//     write rate through eq. 2 and moves a part's share off its old server
//     as well as onto its new one (the algorithms only add). W_t of eq. 2
//     is each part's page writes: a parity shard is programmed once per
//     stripe row a write touches (a one-page update costs it a page, as a
//     REP copy), and a conversion or an offload also charges the whole
//     part it will write on its new server.
//   - ARPT's step 2 maps a downgrade candidate to the most worn servers
//     only when that lowers the estimated variance more than its default
//     placement would; otherwise step 1 converts it onto its default
//     placement. A converted object is not converted back before
//     MinResidenceEpochs (a conversion rewrites the whole object; eq. 1's
//     noise alone would flip objects written about once an epoch).
//   - HCDS makes a swap only when it narrows the gap between the two
//     servers counting what the swap costs (estimate.narrows): the most
//     worn server's estimate must fall, and the two must end closer than
//     they were, each part charged its future writes and its rewrite on
//     its new server. A hot part that would overshoot is passed over for
//     a cooler one; the cold part goes to the most worn server only when
//     the hot part takes more off it than the cold part's rewrite puts on
//     it, else the hot part is offloaded alone (testdata/hcds-cost.txt).
//     NB: the paper swaps the two parts whatever they cost. Before
//     2026-11-26 the cold half was always taken: with eq. 2 over one
//     epoch (the paper's form) most hot parts take less off the most worn
//     server per epoch than a part's rewrite costs it, and on web-1 HCDS
//     made 128 swaps every epoch, most of which put more on the most worn
//     server than they took off (without ARPT sigma 326 against EDM's
//     12.1 in chameleon-wear's paper form; 12.1 since). A
//     most worn server with no part to give is set aside for the epoch and
//     the loop goes on with the next one (Algorithm 2 loops on the
//     variance, not on one server; testdata/hcds-next.txt). EDM does the
//     same, and moves a part when its gain is below the gap (its copy's
//     cost on the destination is not weighed: the baseline as before).
//   - EDM's migrations are recorded as EWO states while their copy runs.
//   - EDM is the paper's [19]/[30] (Ou et al., IPDPS'14), of which the paper
//     says only that it "moves data from the flash servers with higher
//     erasure count to the ones with lower erasure count for balancing the
//     wear speeds", ignoring redundancy, at the cost of the migration's
//     writes and the garbage collection they cause (section I), run over
//     one redundancy scheme (section IV-B2). Which data it moves and how
//     much per round are not said; ours moves the hottest part of the most
//     worn server (the fewest bytes copied per erase taken off it), with
//     the same estimate, trigger and budgets as HCDS, so the two differ in
//     copying now against offloading the next write (EWO). Each copy costs
//     its pages on the destination in the simulator (sim.TestEDMMoveCosts).
//     NB: the paper's EDM cost about 20% more erases than EC; ours about
//     nothing, because it copies few, hot parts (chameleon-endurance says
//     how much an EDM must copy to cost 20%).
package wear
