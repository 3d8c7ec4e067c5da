package nemesis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one flashmend process of the cluster under test.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	mu    sync.Mutex
	lines []string // its standard output, line by line
	err   error    // how it exited
}

// startProc starts argv with args, its standard output kept line by line
// (and, with its standard error, appended to logPath). The process dies
// with the harness (Pdeathsig), so nothing outlives a killed run.
func startProc(name string, argv []string, logPath string, args ...string) (*proc, error) {
	return startProcEnv(name, argv, logPath, nil, args...)
}

// startProcEnv is startProc with env (KEY=value) added to the process's
// environment, after the caller's FLASHMEND_* variables are dropped (the
// crash-point harness arms a node with one).
func startProcEnv(name string, argv []string, logPath string, env []string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== %s: %s %v\n", time.Now().Format(time.RFC3339Nano), name, args)
	cmd := exec.Command(argv[0], append(append([]string(nil), argv[1:]...), args...)...)
	cmd.Stderr = logf
	// The cluster runs what the harness says, not what a FLASHMEND_*
	// variable (a config file, TLS files, a flag) in the caller's
	// environment would make it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHMEND_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, logf))
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// await waits until a line of the process's output matches re and returns
// the line's submatches; it fails if the process exits first.
func (p *proc) await(ctx context.Context, re *regexp.Regexp, within time.Duration) ([]string, error) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if m := re.FindStringSubmatch(p.lines[seen]); m != nil {
				p.mu.Unlock()
				return m, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited (%v) before printing %q; see its log", p.name, p.exitErr(), re)
		case <-deadline.C:
			return nil, fmt.Errorf("%s did not print %q within %v; see its log", p.name, re, within)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// signal sends sig to the process (SIGKILL, SIGSTOP, SIGCONT, SIGTERM).
func (p *proc) signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// kill stops the process outright and waits for it to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process must be able to die
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop asks the process to stop cleanly (SIGTERM), then kills it after
// grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}
