// Package dashboard is flashmend's live web dashboard: one page, its
// assets embedded in the binary (no build step, nothing fetched at run
// time), served by the process that runs the cluster (`flashmend dev`, or
// `flashmend coordinator` with --dashboard) next to its /metrics.
//
// # What it owns
//
//   - The page (assets/: HTML, CSS and plain JavaScript) and its JSON feed,
//     /api/state: the cluster map (per node: capacity, used bytes, raft
//     leaderships, and a heatmap of erase counts per flash die), totals of
//     read errors, repairs by kind, bytes moved by repair, die failures and
//     requests served, the repair latency histogram, and the object state
//     mix (REP and EC objects).
//   - Nothing is counted twice: the feed is computed, at each request, from
//     the process's Prometheus registry (internal/metrics), so the page, a
//     scrape of /metrics and 'ctl repairs' show the same counters. In
//     `flashmend dev` the nodes run in the process and the registry holds
//     their figures; the coordinator of a multi-host deployment gathers
//     each live node's from the node itself at each request
//     (metrics.Federation, over the nodes' Metrics RPC and their TLS). Rates
//     over time (errors and repairs per second) are derived in the page
//     from successive polls; the server keeps no history.
//
// # Failure model
//
//   - A gather that fails in part (a node that does not answer its stats)
//     is served with what was gathered and the error in the feed's
//     "errors" field, shown on the page; the page keeps polling.
//   - The object mix is optional (Options.ObjectMix); when it fails or is
//     absent the page says so instead of showing zeros.
package dashboard
