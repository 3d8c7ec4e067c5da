// Package kvclient is the Go client of flashmend's replicated KV store.
//
// # What it owns
//
//   - Routing: a key goes to the shard of the kvapi.Layout that holds it, a
//     strong request to the believed leader first (learned from NOT_LEADER
//     hints), an eventual read to a replica chosen by a seeded generator.
//   - Retries: a read that meets corruption, an unavailable replica or a
//     non-leader is re-sent to another replica (DIRECT 4.1: the application
//     sees correct data while the damaged replica repairs itself), at most
//     Options.MaxAttempts times per request with Options.RetryBackoff
//     between rounds.
//   - The API: Get, Scan and ScanEach (paged by rows and bytes), Batch with
//     conditions, Put, Delete, CompareAndSet, and Txn (optimistic
//     transactions, re-run when aborted, at most Options.TxnRetries times).
//
// # Invariants
//
//   - A write is re-sent only on errors that prove it was not proposed (a
//     dial that failed, NOT_LEADER, REPLICA_UNAVAILABLE): a failure after
//     the request may have reached the log is returned, never retried, so
//     a write is applied at most once.
//
// # Failure model
//
// Nodes may be down or partitioned; a request fails with the last error
// once its attempts run out or its context ends.
package kvclient
