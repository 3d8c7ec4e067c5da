package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
)

// Tests of what users touch run the built binary: exit codes, signals,
// output, files left behind. TestMain builds it once, on first use.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// flashmendBinary returns the path of a freshly built flashmend binary.
func flashmendBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "flashmend-bin-")
		if binErr != nil {
			return
		}
		// The go command that runs this test (go test sets GOROOT's bin
		// first in PATH only sometimes; GOROOT is always in the env).
		goCmd := "go"
		if root := os.Getenv("GOROOT"); root != "" {
			goCmd = filepath.Join(root, "bin", "go")
		}
		binPath = filepath.Join(binDir, "flashmend")
		out, err := exec.Command(goCmd, "build", "-o", binPath, "github.com/flashmend/flashmend/cmd/flashmend").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// lockedBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is a flashmend process a test started.
type proc struct {
	cmd         *exec.Cmd
	out, errOut lockedBuffer
	done        chan struct{}
	code        int
}

// binEnv is the environment of the processes a test starts: without any
// FLASHMEND_ variable (FLASHMEND_ENDPOINT, a config file, TLS files), so
// that ctl's own endpoint discovery runs and only what a test sets counts.
func binEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHMEND_") {
			env = append(env, kv)
		}
	}
	return env
}

// startBinary starts the binary in working directory wd.
func startBinary(t *testing.T, wd string, args ...string) *proc {
	t.Helper()
	return startBinaryEnv(t, wd, nil, args...)
}

// startBinaryEnv starts the binary in wd with env added to binEnv's.
func startBinaryEnv(t *testing.T, wd string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(flashmendBinary(t), args...)
	p.cmd.Dir = wd
	p.cmd.Env = append(binEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			p.code = exit.ExitCode() // -1 when killed by a signal
		default:
			p.code = -2
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit code, failing the test when the process is still
// running after a generous deadline.
func (p *proc) wait(t *testing.T, what string) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s: still running after 3 minutes\nstdout:\n%s\nstderr:\n%s", what, p.out.String(), p.errOut.String())
	}
	return 0
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// runBinary runs the binary to completion in wd.
func runBinary(t *testing.T, wd string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startBinary(t, wd, args...)
	code = p.wait(t, strings.Join(args, " "))
	return p.out.String(), p.errOut.String(), code
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDevBinary starts `flashmend dev` on wd/.flashmend/dev (where ctl
// finds it by itself) and waits until it serves.
func startDevBinary(t *testing.T, wd string, extra ...string) (*proc, string) {
	t.Helper()
	dir := filepath.Join(wd, devDir)
	args := append([]string{"dev", "--dir", dir, "--nodes", "3", "--device-size", "64MiB", "--no-scrub"}, extra...)
	p := startBinary(t, wd, args...)
	var ep string
	waitFor(t, "the dev cluster's endpoint", func() bool {
		select {
		case <-p.done:
			t.Fatalf("dev exited %d:\n%s%s", p.code, p.out.String(), p.errOut.String())
		default:
		}
		if !strings.Contains(p.out.String(), "endpoint ") {
			return false
		}
		var err error
		ep, err = readEndpoint(dir)
		return err == nil
	})
	return p, ep
}

// TestDevLifecycleThroughBinary covers issue 17 items 2 to 5 as a user meets
// them: one flashmend per data directory, a clean Ctrl-C exits 0 and removes
// the endpoint file, the endpoint survives restarts, ctl finds the dev
// cluster without FLASHMEND_ENDPOINT, and an unreachable endpoint is one
// line that says what to check.
func TestDevLifecycleThroughBinary(t *testing.T) {
	wd := t.TempDir()
	dir := filepath.Join(wd, devDir)
	first, ep := startDevBinary(t, wd)

	// Item 2: a second flashmend on the same directory fails at once.
	_, errOut, code := runBinary(t, wd, "dev", "--dir", dir, "--nodes", "3", "--device-size", "64MiB")
	want := fmt.Sprintf("another flashmend is running on %s (pid %d)", dir, first.cmd.Process.Pid)
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("second dev: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}

	// The same for a coordinator or node pointed at the dev cluster's.
	for _, args := range [][]string{
		{"coordinator", "--dir", filepath.Join(dir, "coordinator")},
		{"node", "--dir", filepath.Join(dir, "node-2"), "--coordinator", ep},
	} {
		_, errOut, code := runBinary(t, wd, args...)
		want := fmt.Sprintf("another flashmend is running on %s (pid %d)", args[2], first.cmd.Process.Pid)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("%q: exit %d, stderr %q; want exit 1 and %q", args, code, errOut, want)
		}
	}

	// Item 4: ctl finds .flashmend/dev/endpoint by itself, also from a
	// subdirectory.
	sub := filepath.Join(wd, "some", "where")
	os.MkdirAll(sub, 0o755)
	out, errOut, code := runBinary(t, sub, "ctl", "nodes")
	if code != 0 || strings.Count(out, " up ") != 3 {
		t.Fatalf("ctl nodes without an endpoint: exit %d\n%s%s", code, out, errOut)
	}

	// Item 3: SIGINT is a clean shutdown: exit 0, endpoint file gone.
	first.signal(t, os.Interrupt)
	if code := first.wait(t, "dev after SIGINT"); code != 0 {
		t.Fatalf("dev after SIGINT: exit %d\n%s", code, first.errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, endpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("endpoint file after shutdown: %v", err)
	}

	// Item 5: one line, fast (the reason is "connection refused", not a
	// deadline), saying what to check.
	_, errOut, code = runBinary(t, wd, "ctl", "nodes")
	if code == 0 || !strings.Contains(errOut, "no flashmend runs on "+devDir) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("ctl nodes after shutdown: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runBinary(t, wd, "ctl", "--endpoint", ep, "--timeout", "1h", "stat", "k")
	if code != 1 || !strings.Contains(errOut, "cannot reach a flashmend coordinator at "+ep+": connection refused") ||
		strings.Contains(errOut, "rpc error") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("ctl against a stopped cluster: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runBinary(t, wd, "ctl", "--endpoint", "no-such-host.invalid:7000", "--timeout", "1h", "nodes")
	if code != 1 || !strings.Contains(errOut, "cannot reach a flashmend coordinator at no-such-host.invalid:7000") ||
		strings.Contains(errOut, "rpc error") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("ctl against an unresolvable host: exit %d, stderr %q", code, errOut)
	}

	// Item 4: the same endpoint after a restart (unless another program
	// took the port meanwhile, which the coordinator must then say).
	second, ep2 := startDevBinary(t, wd)
	if ep2 != ep && !strings.Contains(second.errOut.String(), "is not available") {
		t.Fatalf("endpoint %s after restart, was %s, and no word about it:\n%s", ep2, ep, second.errOut.String())
	}

	// A crash leaves the endpoint file behind: ctl says it is stale, and
	// the next start takes over (the kernel dropped the crashed lock).
	second.cmd.Process.Kill()
	second.wait(t, "dev after SIGKILL")
	_, errOut, code = runBinary(t, wd, "ctl", "nodes")
	if code != 1 || !strings.Contains(errOut, "left by a flashmend that is no longer running") {
		t.Fatalf("ctl with a stale endpoint file: exit %d, stderr %q", code, errOut)
	}
	third, _ := startDevBinary(t, wd)
	third.signal(t, syscall.SIGTERM)
	if code := third.wait(t, "dev after SIGTERM"); code != 0 {
		t.Fatalf("dev after SIGTERM: exit %d\n%s", code, third.errOut.String())
	}
}

// TestDevStartupHonoursSignalsAndTimeout blocks start-up where the issue
// found it stuck, on the embedded etcd's bbolt file lock (held here by the
// test), and checks that --start-timeout and SIGINT both end it.
func TestDevStartupHonoursSignalsAndTimeout(t *testing.T) {
	wd := t.TempDir()
	dir := filepath.Join(wd, devDir)
	p, _ := startDevBinary(t, wd)
	p.signal(t, os.Interrupt)
	if code := p.wait(t, "dev"); code != 0 {
		t.Fatalf("dev: exit %d", code)
	}
	db := filepath.Join(dir, "coordinator", "etcd", "data", "member", "snap", "db")
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	args := []string{"dev", "--dir", dir, "--nodes", "3", "--device-size", "64MiB", "--no-scrub"}

	_, errOut, code := runBinary(t, wd, append(args, "--start-timeout", "2s")...)
	if code != 1 || !strings.Contains(errOut, "start-up did not finish within --start-timeout 2s") {
		t.Fatalf("blocked start with --start-timeout 2s: exit %d, stderr %q", code, errOut)
	}

	blocked := startBinary(t, wd, args...)
	// The lock file names the new process once it holds the directory,
	// which is after its signal handler is installed.
	waitFor(t, "the directory lock", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "flashmend.lock"))
		return err == nil && strings.TrimSpace(string(b)) == fmt.Sprint(blocked.cmd.Process.Pid)
	})
	blocked.signal(t, os.Interrupt)
	if code := blocked.wait(t, "blocked dev after SIGINT"); code != 1 || !strings.Contains(blocked.errOut.String(), "start-up stopped: interrupted") {
		t.Fatalf("blocked start after SIGINT: exit %d, stderr %q", code, blocked.errOut.String())
	}
}

// TestCtlThroughBinary covers issue 17 items 8 to 11 and 13 as a user meets
// them: bad keys and missing flags are usage errors (exit 2), unknown
// subcommands fail, mutating commands say what they did, versions count per
// key, and tables have headers and stay aligned.
func TestCtlThroughBinary(t *testing.T) {
	wd := t.TempDir()
	dev, _ := startDevBinary(t, wd)
	defer func() {
		dev.signal(t, os.Interrupt)
		if code := dev.wait(t, "dev"); code != 0 {
			t.Errorf("dev exit %d", code)
		}
	}()
	ctl := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		out, errOut, code := runBinary(t, wd, append([]string{"ctl"}, args...)...)
		if code != wantCode {
			t.Fatalf("ctl %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, out, errOut)
		}
		return out, errOut
	}
	obj := filepath.Join(wd, "obj")
	if err := os.WriteFile(obj, bytes.Repeat([]byte("flashmend "), 20000), 0o644); err != nil {
		t.Fatal(err)
	}

	// Item 11: versions count per key.
	for i, want := range []string{"hello version 1 200000B rep", "hello version 2 200000B rep"} {
		if out, _ := ctl(0, "put", "hello", obj); !strings.HasPrefix(out, want) {
			t.Fatalf("put %d: %q, want prefix %q", i, out, want)
		}
	}
	if out, _ := ctl(0, "stat", "hello"); !strings.HasPrefix(out, "hello version 2 ") {
		t.Fatalf("stat: %q", out)
	}

	// Item 9: required flags are required; mutating commands say what
	// they did.
	if _, errOut := ctl(2, "corrupt", "hello", "--replica", "0"); !strings.Contains(errOut, `required flag(s) "offset" not set`) {
		t.Fatalf("corrupt without --offset: %q", errOut)
	}
	if _, errOut := ctl(2, "fail-die", "--node", "1"); !strings.Contains(errOut, `required flag(s) "die" not set`) {
		t.Fatalf("fail-die without --die: %q", errOut)
	}
	if _, errOut := ctl(2, "inject", "uber", "1e-7"); !strings.Contains(errOut, `required flag(s) "node" not set`) {
		t.Fatalf("inject uber without --node: %q", errOut)
	}
	out, _ := ctl(0, "corrupt", "hello", "--replica", "1", "--offset", "70000", "--bits", "3")
	if !regexp.MustCompile(`^flipped 3 bits of hello version 2 replica 1 at byte 70000: node \d, chunk 1, byte 4464 of the chunk\n$`).MatchString(out) {
		t.Fatalf("corrupt: %q", out)
	}
	if out, _ := ctl(0, "inject", "uber", "--node", "2", "1e-7"); out != "node 2: flips each bit it reads with probability 1e-07 on the way out (transient)\n" {
		t.Fatalf("inject uber: %q", out)
	}
	if out, _ := ctl(0, "inject", "uber", "--node", "2", "0"); out != "node 2: no longer injects bit flips\n" {
		t.Fatalf("inject uber 0: %q", out)
	}
	if out, _ := ctl(0, "fail-die", "--node", "3", "--die", "1"); out != "node 3: die 1 of its emulated flash device failed\n" {
		t.Fatalf("fail-die: %q", out)
	}
	if _, errOut := ctl(2, "fail-die", "--node", "3", "--die", "1"); !strings.Contains(errOut, "already failed") {
		t.Fatalf("failing a failed die again: %s", errOut)
	}
	if _, errOut := ctl(2, "fail-die", "--node", "99", "--die", "1"); errOut == "" {
		t.Fatal("fail-die on a node that does not exist said nothing")
	}
	if out, _ := ctl(0, "rm", "hello"); out != "deleted hello version 2 (its chunks are collected in the background)\n" {
		t.Fatalf("rm: %q", out)
	}
	if out, _ := ctl(0, "put", "hello", obj); !strings.HasPrefix(out, "hello version 1 ") {
		t.Fatalf("put after rm: %q", out)
	}

	// Item 8: a key that is not UTF-8 is refused before the wire, like
	// other invalid keys.
	for _, args := range [][]string{{"put", "bad\xff", obj}, {"stat", "bad\xff"}, {"rm", "\xfe"}, {"ls", "\xff"}, {"put", "", obj}} {
		_, errOut := ctl(2, args...)
		if strings.Contains(errOut, "rpc error") || strings.Contains(errOut, "Internal") {
			t.Fatalf("%q: %q", args, errOut)
		}
	}

	// Item 13: ls has a header, and a wide key does not shift the columns.
	ctl(0, "put", "日本語のキー", obj)
	if _, errOut := ctl(1, "put", "x", obj, "--redundancy", "ec"); strings.Contains(errOut, "rpc error") {
		t.Fatalf("put ec on 3 nodes: %q", errOut)
	}
	out, _ = ctl(0, "ls")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY ") {
		t.Fatalf("ls:\n%s", out)
	}
	col := func(line, field string) int { return cellWidth(line[:strings.Index(line, field)]) }
	if col(lines[0], "SIZE") != col(lines[1], "200000") || col(lines[0], "SIZE") != col(lines[2], "200000") {
		t.Fatalf("ls columns out of line:\n%s", out)
	}

	// Item 10: unknown subcommands fail with "unknown command".
	for _, args := range [][]string{{"ctl", "bogus"}, {"ctl", "inject", "bogus"}, {"flash", "bogus"}, {"kv", "bogus"},
		{"ctl", "kv", "bogus"}, {"pebble", "bogus"}, {"model", "bogus"}, {"experiments", "bogus"}, {"bogus"}} {
		_, errOut, code := runBinary(t, wd, args...)
		if code != 2 || !strings.Contains(errOut, `unknown command "bogus"`) {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	if out, _, code := runBinary(t, wd, "ctl"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Fatalf("bare ctl: exit %d\n%s", code, out)
	}

	// Item 13: usage errors show the usage line; ctl kv has its own help;
	// papers are named.
	if _, errOut, code := runBinary(t, wd, "kv", "scan", "a", "b", "c"); code != 2 || !strings.Contains(errOut, "usage: flashmend kv scan [START [END]]") {
		t.Fatalf("kv scan: exit %d, %q", code, errOut)
	}
	if out, _, _ := runBinary(t, wd, "ctl", "kv", "--help"); strings.Contains(out, "serve a local cluster") || strings.Contains(out, "demo") {
		t.Fatalf("ctl kv help:\n%s", out)
	}
	if out, _, _ := runBinary(t, wd, "model", "direct"); !strings.Contains(out, "DIRECT (SoCC'19 and tech report) Table 1") || strings.Contains(out, "paper 0") {
		t.Fatalf("model direct:\n%s", out)
	}
}

// TestNodesAndRepairsThroughBinary covers issue 17 items 6, 7 and 15: ctl
// nodes shows each node's own figures now (or says how old they are) and
// its data directory, named by the same ID everywhere; ctl repairs shows
// durable counts and recent repairs, also after a restart.
func TestNodesAndRepairsThroughBinary(t *testing.T) {
	wd := t.TempDir()
	dir := filepath.Join(wd, devDir)
	dev, _ := startDevBinary(t, wd)
	ctl := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBinary(t, wd, append([]string{"ctl"}, args...)...)
		if code != 0 {
			t.Fatalf("ctl %q: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	// rows parses a table into maps from header to cell.
	rows := func(table string) []map[string]string {
		lines := strings.Split(strings.TrimSpace(table), "\n")
		header := regexp.MustCompile(`\S+( \S+)*( \(\S+\))?`).FindAllStringIndex(lines[0], -1)
		var out []map[string]string
		for _, l := range lines[1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			m := map[string]string{}
			for i, h := range header {
				end := len(l)
				if i+1 < len(header) {
					end = min(header[i+1][0], len(l))
				}
				m[lines[0][h[0]:h[1]]] = strings.TrimSpace(l[min(h[0], len(l)):end])
			}
			out = append(out, m)
		}
		return out
	}
	before := rows(ctl("nodes"))
	obj := filepath.Join(wd, "obj")
	os.WriteFile(obj, bytes.Repeat([]byte("0123456789"), 100000), 0o644) // 1 MB
	put := ctl("put", "hello", obj)
	holder := regexp.MustCompile(`on nodes \[(\d)`).FindStringSubmatch(put)[1]
	ctl("corrupt", "hello", "--replica", "0", "--offset", "1000", "--bits", "3")
	if out := ctl("get", "hello"); len(out) != 1000000 {
		t.Fatalf("get: %d bytes", len(out))
	}

	// Items 6 and 15: fresh figures, one identity, the directory.
	after := rows(ctl("nodes"))
	if len(after) != 3 {
		t.Fatalf("nodes: %v", after)
	}
	for i, n := range after {
		if n["AS OF"] != "now" || n["DIR"] != filepath.Join(dir, "node-"+n["NODE"]) || n["STATE"] != "up" {
			t.Fatalf("node row %v", n)
		}
		if n["USED"] == before[i]["USED"] {
			t.Fatalf("node %s still shows %s used after a 1 MB put on every node", n["NODE"], n["USED"])
		}
		if want := map[bool]string{true: "1", false: "0"}[n["NODE"] == holder]; n["PERSISTENT"] != want || n["REPAIRED"] != want {
			t.Fatalf("node %s repairs %v (replica 0 on node %s)", n["NODE"], n, holder)
		}
	}

	// Item 7: the repair history, before and after a restart.
	check := func(when string) {
		t.Helper()
		out := ctl("repairs")
		tables := strings.SplitN(out, "\nrecent repairs", 2)
		if len(tables) != 2 {
			t.Fatalf("%s: repairs:\n%s", when, out)
		}
		for _, n := range rows(tables[0]) {
			want := map[bool]string{true: "1", false: "0"}[n["NODE"] == holder]
			if n["PERSISTENT"] != want || n["REPAIRED"] != want || n["DIR"] != filepath.Join(dir, "node-"+n["NODE"]) {
				t.Fatalf("%s: repairs row %v (replica 0 on node %s)\n%s", when, n, holder, out)
			}
		}
		events := rows(tables[1][strings.Index(tables[1], "\n")+1:])
		if len(events) != 2 || events[0]["KIND"] != "persistent" || events[1]["KIND"] != "repaired" {
			t.Fatalf("%s: events %v\n%s", when, events, out)
		}
		for _, e := range events {
			if e["NODE"] != holder || e["KEY"] != "hello" || e["VERSION"] != "1" || e["CHUNK"] != "0" || e["SHARD"] != "0" {
				t.Fatalf("%s: event %v", when, e)
			}
		}
	}
	check("before restart")
	dev.signal(t, os.Interrupt)
	if code := dev.wait(t, "dev"); code != 0 {
		t.Fatalf("dev exit %d", code)
	}
	dev, _ = startDevBinary(t, wd)
	check("after restart")
	dev.signal(t, os.Interrupt)
	dev.wait(t, "dev")
}

// TestNodeRowAge shows the age of heartbeat figures when a node did not
// answer, and no figures for a node that never reported.
func TestNodeRowAge(t *testing.T) {
	now := time.Unix(1000, 0)
	r := client.NodeReport{Info: &coordpb.NodeInfo{Id: 4, Addr: "a:1", Live: true, UsedBytes: 2048, CapacityBytes: 4096,
		HeartbeatUnixMs: now.Add(-3200 * time.Millisecond).UnixMilli(), Dir: "/d/node-4"}}
	if got := strings.Join(nodeRow(r, now), "|"); got != "4|up|a:1|2KiB|4KiB|0|0|0|-|heartbeat 3.2s ago|/d/node-4" {
		t.Fatalf("row %q", got)
	}
	r = client.NodeReport{Info: &coordpb.NodeInfo{Id: 5, Addr: "a:2"}}
	if got := strings.Join(nodeRow(r, now), "|"); got != "5|down|a:2|-|-|-|-|-|-|-|-" {
		t.Fatalf("row %q", got)
	}
}
