// Package sweep holds the fault sweep of internal/guardfs: Pebble stores
// built through guardfs (in memory and on the OS file system) are damaged
// one file and one fault at a time, and in seeded random combinations,
// and reopened; every key must read back right or fail as corruption. It
// has no code of its own. Its tests run without the race detector (the
// Makefile's NORACE_PKGS: hundreds of Pebble reopens take too long under
// it); guardfs's own tests, concurrent ones included, are raced.
package sweep
