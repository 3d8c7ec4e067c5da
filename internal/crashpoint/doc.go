// Package crashpoint owns flashmend's named crash points: one-line hooks
// (crashpoint.Hit("raftlog-copy")) at every persistence step of the
// stores, where the reliability harness (`flashmend torture crashpoints`,
// internal/torture/nemesis) kills a node process and restarts it from what
// was on disk (issue 16, "Crash points").
//
// # What it owns
//
//   - The registry of points (Points): every name with a one-line
//     description of the persistence step it sits at, in report order. The
//     harness enumerates it; its report lists every point as reached or
//     not. A test checks that every Hit in the repository names a
//     registered point and every registered point is placed somewhere.
//   - Arming: a process is armed by the environment variable Env
//     (FLASHMEND_CRASHPOINT=<name>@<n>: crash at the n-th hit of the point;
//     <name> alone means @1), read once at start by ArmFromEnv (the
//     flashmend binary's cli.Main). A name not in the registry, an n that
//     is not a positive integer or anything else malformed is refused at
//     start with an error saying what was wrong; the process does not run.
//   - The crash: at the armed hit the process writes one line to standard
//     output and standard error ("crashpoint: <name>@<n> reached, crashing")
//     with direct write system calls, then sends itself SIGKILL. No defer,
//     no flush, no Close and no other goroutine's write runs after the
//     point: what is on disk is what the steps before it wrote (the kernel
//     keeps what was written to files; a process crash, not a power loss).
//
// # Invariants
//
//   - Compiled in always; a disarmed Hit costs one atomic load and a nil
//     compare. Hit never blocks, allocates or fails when disarmed.
//   - Only the armed point counts its hits; the crash happens at exactly
//     the n-th one (the counter is atomic, so among concurrent callers
//     exactly one is the n-th; the others may still be running when the
//     signal arrives, as on a real crash).
//   - Arm in tests replaces the crash with a callback (the process stays
//     alive) and Disarm restores the no-op.
//
// # Failure model
//
// If SIGKILL could not be delivered (it always can to oneself on Linux),
// the process exits with status 137 by os.Exit, which also runs no defers.
// A point that is never reached is not an error here: the harness reports
// it as not reached.
package crashpoint
