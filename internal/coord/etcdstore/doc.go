// Package etcdstore runs the coordinator's embedded etcd
// (go.etcd.io/etcd/server/v3/embed) so that its store is never the single
// point of loss: it checks a store before etcd opens it, sets a damaged one
// aside, and replaces a damaged member of a replicated store from the
// others.
//
// # What it owns
//
//   - The ports (Dir/etcd/ports.json, reused while free) and the launch of a
//     member with a bounded wait for it to serve; a close bounded by
//     etcdCloseTimeout (an etcd that never became ready can block in Close).
//   - Check: the store is read before etcd starts, without bbolt (which
//     panics on damage): the backend's pages walked from the meta pages,
//     the WAL read to its end and compared with the applied index (etcd
//     would wait forever on a WAL behind its backend). Damage is a
//     corruption error naming the file.
//   - A single-member store (Members 1) found damaged, or one etcd fails to
//     start on, is moved aside (renamed, never deleted) and a new one
//     started; SetAside tells the coordinator to rebuild its index from the
//     nodes. Options.KeepDamaged makes it an error instead.
//   - A replicated store (Members 3 or 5, members.go): every member's store
//     is checked; the members with a store start together; a damaged or
//     lost member, or one whose peer port moved, is removed from the
//     membership, added again and started empty to catch up from the
//     others; with no quorum left every member is set aside and a new
//     store bootstrapped.
//
// # Failure model
//
// The members share the coordinator's process and, unless their
// directories are placed apart, its disk: they survive the damage or loss
// of one member's files, not the loss of the process or the machine.
package etcdstore
