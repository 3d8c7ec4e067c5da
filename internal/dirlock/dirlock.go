package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file in a data directory.
const FileName = "flashmend.lock"

// ErrHeld marks the failure to lock a directory another process holds.
var ErrHeld = errors.New("data directory in use")

// HeldError says which process holds a directory. It wraps ErrHeld.
type HeldError struct {
	Dir string
	// PID is the holder's process ID as written in the lock file; 0 when
	// the file did not say (the holder is between locking and writing it).
	PID int
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("another flashmend is running on %s", e.Dir)
	}
	return fmt.Sprintf("another flashmend is running on %s (pid %d)", e.Dir, e.PID)
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Lock is a held directory lock.
type Lock struct {
	dir string
	f   *os.File
}

// Acquire creates dir if needed and locks it for this process, or fails at
// once with a *HeldError when another open Lock holds it.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	// The file's content is only the holder's pid (a hint for the
	// operator); a torn write leaves an unparsable pid, reported as 0.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: write %s: %w", path, err)
	}
	return &Lock{dir: dir, f: f}, nil
}

// Dir is the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Close unlocks the directory. The file stays (see the package comment).
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}

// Holder reports the pid recorded in dir's lock file and whether a process
// still holds the lock. It never takes the lock itself.
func Holder(dir string) (pid int, held bool) {
	path := filepath.Join(dir, FileName)
	pid = readPID(path)
	if pid <= 0 {
		return 0, false
	}
	if pid == os.Getpid() {
		return pid, true
	}
	// NB: signal 0 checks that the process exists; a recycled pid can make
	// a stale file look held, which only softens a hint.
	p, err := os.FindProcess(pid)
	if err != nil {
		return pid, false
	}
	return pid, p.Signal(syscall.Signal(0)) == nil
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
