package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/node"
)

// nodeCollector reads each node's statistics, durable repair history and
// KV replicas at scrape time.
type nodeCollector struct {
	nodes func() []*node.Node

	capacity, used, eraseMax, dieErases  *prometheus.Desc
	chunksRead, bytesRead, bytesWritten  *prometheus.Desc
	chunksWritten, readErrors, flips     *prometheus.Desc
	repairs, repairFailures, repairBytes *prometheus.Desc
	dieFailures, rejectedWrites, refused *prometheus.Desc
	kvErrors, kvLeader, kvApplied        *prometheus.Desc
	failedDies, degraded                 *prometheus.Desc
}

var _ prometheus.Collector = (*nodeCollector)(nil)

func newNodeCollector(nodes func() []*node.Node) *nodeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"node"}, labels...), nil)
	}
	return &nodeCollector{
		nodes:         nodes,
		capacity:      d("flashmend_device_capacity_bytes", "Capacity of the node's device."),
		used:          d("flashmend_device_used_bytes", "Bytes in use on the node's device."),
		eraseMax:      d("flashmend_device_block_erases_max", "Erase cycles of the node's most worn flash block (emulated flash only)."),
		dieErases:     d("flashmend_die_erases_total", "Block erases summed per flash die, dies numbered channel-major (emulated flash only): the device's wear.", "die"),
		chunksRead:    d("flashmend_chunk_reads_total", "Chunk reads the node served (durable: the repair history's count)."),
		chunksWritten: d("flashmend_chunk_writes_total", "Chunks the node wrote this run."),
		bytesRead:     d("flashmend_chunk_read_bytes_total", "Chunk bytes the node read this run."),
		bytesWritten:  d("flashmend_chunk_written_bytes_total", "Chunk bytes the node wrote this run."),
		readErrors: d("flashmend_read_errors_total",
			"Chunk reads that failed verification (durable), by class: transient (a raw error: the re-read verified) or persistent (uncorrectable on the device: served from redundancy and repaired).", "class"),
		flips:          d("flashmend_injected_bit_flips_total", "Bit flips the node's fault injector put on reads this run (ctl uber)."),
		repairs:        d("flashmend_repairs_total", "Repairs the node stored or rebuilt, by kind (chunk, chunk_missing, metadata, die, kv_patch, kv_block_merge, kv_rebuild); the node's counts are durable.", "kind"),
		repairFailures: d("flashmend_repair_failures_total", "Repair writes the node could not store (device full, write error; durable)."),
		repairBytes:    d("flashmend_repair_bytes_total", "Bytes moved to this node by KV repairs (kv_patch: patches received; kv_rebuild: replica state transferred).", "kind"),
		dieFailures:    d("flashmend_die_failures_total", "Flash dies the node's device declared failed (durable)."),
		rejectedWrites: d("flashmend_rejected_writes_total", "Chunk writes refused because their data did not verify (durable)."),
		refused:        d("flashmend_refused_full_writes_total", "New chunk writes refused to keep the repair reserve free (durable)."),
		kvErrors: d("flashmend_kv_corruptions_total",
			"Corruption a KV replica detected, by class: detected (every report) or transient (the block verified on a re-read: not repaired).", "shard", "class"),
		kvLeader:   d("flashmend_kv_raft_leader", "1 when this replica is its shard's raft leader.", "shard"),
		kvApplied:  d("flashmend_kv_raft_applied_index", "The raft log index this replica has applied.", "shard"),
		failedDies: d("flashmend_device_failed_dies", "Flash dies of the node's device that failed (emulated flash only)."),
		degraded:   d("flashmend_device_degraded", "1 when the node's device is degraded: its die failures left no spare, or a channel lost every die (ctl nodes says why)."),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.capacity, c.used, c.eraseMax, c.dieErases, c.chunksRead, c.bytesRead, c.bytesWritten,
		c.chunksWritten, c.readErrors, c.flips, c.repairs, c.repairFailures, c.repairBytes, c.dieFailures, c.rejectedWrites,
		c.refused, c.kvErrors, c.kvLeader, c.kvApplied, c.failedDies, c.degraded} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.nodes() {
		c.collectNode(ch, n)
	}
}

func (c *nodeCollector) collectNode(ch chan<- prometheus.Metric, n *node.Node) {
	id := nodeLabel(n.ID())
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{id}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{id}, labels...)...)
	}
	st := n.Stats()
	gauge(c.capacity, float64(st.CapacityBytes))
	gauge(c.used, float64(st.UsedBytes))
	var flips, written, bytesRead, bytesWritten int64
	for _, dev := range st.Devices {
		flips += dev.InjectedFlips
		written += dev.ChunksWritten
		bytesRead += dev.BytesRead
		bytesWritten += dev.BytesWritten
		if dev.WearBlocks > 0 {
			gauge(c.eraseMax, float64(dev.EraseCountMax))
			gauge(c.failedDies, float64(dev.FailedDies))
			gauge(c.degraded, boolValue(dev.Degraded))
		}
		for die, e := range dev.DieEraseCounts {
			counter(c.dieErases, float64(e), strconv.Itoa(die))
		}
	}
	counter(c.flips, float64(flips))
	counter(c.chunksWritten, float64(written))
	counter(c.bytesRead, float64(bytesRead))
	counter(c.bytesWritten, float64(bytesWritten))

	counts := n.RepairCounts()
	counter(c.chunksRead, float64(counts[node.CountChunksRead]))
	counter(c.readErrors, float64(counts[node.KindTransient]), "transient")
	counter(c.readErrors, float64(counts[node.KindPersistent]), "persistent")
	counter(c.repairFailures, float64(counts[node.KindRepairFailed]))
	counter(c.dieFailures, float64(counts[node.KindDieFailed]))
	counter(c.rejectedWrites, float64(counts[node.KindRejectedWrite]))
	counter(c.refused, float64(counts[node.CountRefusedFull]))

	var patches, merged, rebuilds, patchBytes, rebuildBytes uint64
	if kn := n.KV(); kn != nil {
		for _, r := range kn.Replicas() {
			shard := strconv.FormatUint(uint64(r.Shard().ID), 10)
			rs := r.Stats()
			patches += rs.PatchesApplied
			merged += rs.BlocksMerged
			rebuilds += rs.Rebuilds
			patchBytes += rs.PatchBytesReceived
			rebuildBytes += rs.RebuildBytes
			counter(c.kvErrors, float64(rs.CorruptionsDetected), shard, "detected")
			counter(c.kvErrors, float64(rs.TransientErrors), shard, "transient")
			gauge(c.kvLeader, boolValue(r.IsLeader()), shard)
			gauge(c.kvApplied, float64(r.AppliedIndex()), shard)
		}
	}
	for _, k := range []struct {
		kind string
		v    float64
	}{
		{kindChunk, float64(counts[node.KindRepaired])},
		{kindChunkMissing, float64(counts[node.KindMissingRepaired])},
		{kindMetadata, float64(counts[node.KindMetaRepaired])},
		{kindDie, float64(counts[node.KindDieRepaired])},
		{kindKVPatch, float64(patches)},
		{kindKVBlockMerge, float64(merged)},
		{kindKVRebuild, float64(rebuilds)},
	} {
		counter(c.repairs, k.v, k.kind)
	}
	counter(c.repairBytes, float64(patchBytes), kindKVPatch)
	counter(c.repairBytes, float64(rebuildBytes), kindKVRebuild)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// scrubCollector reads the scrubber's counters at scrape time.
type scrubCollector struct {
	scrubber func() *client.Scrubber

	passes, objects, chunks, verified, queued, repaired, failed, pending, errs, reprotected, passObjects, passDone *prometheus.Desc
}

var _ prometheus.Collector = (*scrubCollector)(nil)

func newScrubCollector(scrubber func() *client.Scrubber) *scrubCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &scrubCollector{
		scrubber:    scrubber,
		passes:      d("flashmend_scrub_passes_total", "Scrub passes completed (every object verified once)."),
		objects:     d("flashmend_scrub_objects_total", "Objects the scrubber verified (or re-protected)."),
		chunks:      d("flashmend_scrub_chunks_total", "Chunks (REP) or rows (EC) the scrubber verified."),
		verified:    d("flashmend_scrub_verified_bytes_total", "Bytes the scrubber read and verified."),
		queued:      d("flashmend_scrub_repairs_queued_total", "Repairs the scrubber queued."),
		repaired:    d("flashmend_scrub_repairs_total", "Repairs the scrubber's queue wrote."),
		failed:      d("flashmend_scrub_repair_failures_total", "Repairs the scrubber's queue could not write (tried again next pass)."),
		pending:     d("flashmend_scrub_repairs_pending", "Failed repairs waiting to be tried again."),
		errs:        d("flashmend_scrub_errors_total", "Objects the scrubber could not verify."),
		reprotected: d("flashmend_scrub_reprotected_total", "Replicas or shards of dead nodes the scrubber re-created on other nodes."),
		passObjects: d("flashmend_scrub_pass_objects", "Objects in the current scrub pass."),
		passDone:    d("flashmend_scrub_pass_objects_done", "Objects of the current scrub pass verified so far (progress: this over flashmend_scrub_pass_objects)."),
	}
}

func (c *scrubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.passes, c.objects, c.chunks, c.verified, c.queued, c.repaired, c.failed, c.pending, c.errs, c.reprotected, c.passObjects, c.passDone} {
		ch <- d
	}
}

func (c *scrubCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.scrubber()
	if s == nil {
		return
	}
	st := s.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v int64
	}{
		{c.passes, prometheus.CounterValue, st.Passes},
		{c.objects, prometheus.CounterValue, st.Objects},
		{c.chunks, prometheus.CounterValue, st.Chunks},
		{c.verified, prometheus.CounterValue, st.BytesVerified},
		{c.queued, prometheus.CounterValue, st.RepairsQueued},
		{c.repaired, prometheus.CounterValue, st.Repaired},
		{c.failed, prometheus.CounterValue, st.RepairFailed},
		{c.pending, prometheus.GaugeValue, st.RepairsPending},
		{c.errs, prometheus.CounterValue, st.Errors},
		{c.reprotected, prometheus.CounterValue, st.Reprotected},
		{c.passObjects, prometheus.GaugeValue, st.PassObjects},
		{c.passDone, prometheus.GaugeValue, st.PassObjectsDone},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, float64(m.v))
	}
}
