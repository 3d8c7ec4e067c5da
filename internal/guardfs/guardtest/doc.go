// Package guardtest has test helpers for storage layers under Pebble:
// damage to stored files (zeroed or junk 4 KiB blocks, bit flips,
// truncation, deletion), directory walks and clones of any vfs.FS; FS, a
// vfs.FS that injects read errors, write errors, sync errors and lost
// writes into the files a rule selects; and a Pebble store to damage
// (BuildStore) with the check every reopen must pass (ReadBack: each key
// right or a corruption error, never wrong, never silently missing).
package guardtest
