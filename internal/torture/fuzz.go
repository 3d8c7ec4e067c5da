package torture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FuzzTarget is one Go native fuzz target: its package (relative to the
// module root) and function name.
type FuzzTarget struct {
	Pkg, Name string
	// What names the decoder it exercises.
	What string
}

// FuzzTargets are every fuzz target of the tree (TestFuzzTargetsListed
// keeps the list complete).
var FuzzTargets = []FuzzTarget{
	{"./internal/objstore/sumsrec", "FuzzDecodeSums", "chunk sums records"},
	{"./internal/objstore", "FuzzMetaFiles", "three-copy metadata files (identity, local index entries)"},
	{"./internal/objstore/filestore", "FuzzPackLoad", "plain-file pack files (a blob's chunk data and sums files)"},
	{"./internal/raftlog", "FuzzDecodeRecord", "raft log records"},
	{"./internal/raftlog", "FuzzParseCopies", "raft log fragments across two copies"},
	{"./internal/guardfs", "FuzzMergeFrames", "guardfs frames across copies"},
	{"./internal/guardfs", "FuzzDecodeSidecar", "guardfs sstable sidecars"},
	{"./internal/sdf/onflash", "FuzzOOB", "SDF data page OOB"},
	{"./internal/sdf/onflash", "FuzzP2L", "SDF P2L pages"},
	{"./internal/sdf/onflash", "FuzzMetaPage", "SDF metadata journal pages and unit votes"},
	{"./internal/sdf/onflash", "FuzzRecords", "SDF journal records"},
	{"./internal/sdf", "FuzzJournalReplay", "SDF journal replay and zone table rebuild"},
	{"./internal/node", "FuzzWriteChunkRequest", "WriteChunk requests off the wire"},
	{"./internal/node", "FuzzIdentityFile", "node identity file"},
	{"./internal/wire", "FuzzStatusClasses", "error classes across gRPC"},
	{"./internal/s3", "FuzzParseRange", "S3 Range header"},
	{"./internal/s3", "FuzzParseAuthorization", "S3 SigV4 Authorization header"},
	{"./internal/s3", "FuzzSigV4", "S3 SigV4 signature check"},
	{"./internal/s3", "FuzzParseCopySource", "S3 x-amz-copy-source"},
	{"./internal/s3", "FuzzParsePartNumber", "S3 part numbers"},
	{"./internal/s3", "FuzzXMLBodies", "S3 CompleteMultipartUpload and DeleteObjects bodies"},
	{"./internal/wire", "FuzzUnmarshalChunks", "streamed chunk reads (hand-coded ReadChunksResponse against protobuf's decoding)"},
	{"./internal/wire", "FuzzUnmarshalChunkWrite", "streamed chunk writes (WriteChunkRequest received into a pooled buffer against protobuf's decoding)"},
}

// FuzzResult is what fuzzing one target found.
type FuzzResult struct {
	Target FuzzTarget
	Time   time.Duration // fuzzing time asked for
	Wall   time.Duration // including the instrumented build
	Execs  int64
	New    int64 // new corpus entries found (in the Go build cache)
	Failed bool
	// Failure is the failing input's path and the failure, if any.
	Failure string
}

var (
	execsRe   = regexp.MustCompile(`execs: (\d+)`)
	newRe     = regexp.MustCompile(`new interesting: (\d+)`)
	failingRe = regexp.MustCompile(`Failing input written to (\S+)`)
)

// Fuzz runs `go test -fuzz` on each target for d, one at a time (parallel
// workers each), in the module root dir.
//
// Each target fuzzes with its own cache of interesting inputs, a temporary
// directory removed when the target is done, instead of the Go build
// cache's shared fuzz directory: another process fuzzing the same target
// (another session's run, `go clean -fuzzcache`) can remove files of the
// shared directory while this run reads them, and the run then failed
// with no failing input (torture all, seed 20261125: FuzzMetaPage: "open
// .../go-build/fuzz/.../FuzzMetaPage/799008b8b472f869: no such file or
// directory"). The private cache starts as a copy of what the shared one
// holds (files that vanish meanwhile are skipped), so a target does not
// start cold, and the inputs the run found are added to the shared one
// when it ends (copyCorpus).
// A failing input is still written to the package's testdata/fuzz.
func Fuzz(ctx context.Context, dir string, targets []FuzzTarget, d time.Duration, parallel int, logf func(string, ...any)) []FuzzResult {
	var out []FuzzResult
	for _, t := range targets {
		shared, err := sharedFuzzCache(ctx, dir, t)
		if err != nil {
			logf("fuzz %s %s: the Go build cache's fuzz directory: %v (starting from an empty cache)", t.Pkg, t.Name, err)
		}
		r := fuzzOne(ctx, dir, t, d, parallel, shared)
		logf("fuzz %s %s: %d execs, %d new, failed=%v %s", t.Pkg, t.Name, r.Execs, r.New, r.Failed, r.Failure)
		out = append(out, r)
	}
	return out
}

// sharedFuzzCache is where `go test -fuzz` keeps target t's interesting
// inputs: the build cache's fuzz directory, by import path and target.
func sharedFuzzCache(ctx context.Context, dir string, t FuzzTarget) (string, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	cache, err := run("env", "GOCACHE")
	if err != nil {
		return "", err
	}
	if cache == "" || cache == "off" {
		return "", fmt.Errorf("GOCACHE is %q", cache)
	}
	pkg, err := run("list", "-f", "{{.ImportPath}}", t.Pkg)
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "fuzz", pkg, t.Name), nil
}

// fuzzOne fuzzes t with a private cache seeded from shared ("" for none)
// and adds what it found to shared.
func fuzzOne(ctx context.Context, dir string, t FuzzTarget, d time.Duration, parallel int, shared string) FuzzResult {
	start := time.Now()
	var buf bytes.Buffer
	cache, err := os.MkdirTemp("", "flashmend-fuzzcache-")
	if err == nil {
		own := filepath.Join(cache, t.Name)
		if shared != "" {
			_, _ = copyCorpus(shared, own)
		}
		cmd := fuzzCommand(ctx, dir, t, d, parallel, cache)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err = cmd.Run()
		if shared != "" {
			_, _ = copyCorpus(own, shared)
		}
		if rerr := os.RemoveAll(cache); rerr != nil && err == nil {
			err = fmt.Errorf("removing the fuzz cache %s: %w", cache, rerr)
		}
	}
	r := parseFuzzOutput(buf.String())
	r.Target, r.Time, r.Wall = t, d, time.Since(start)
	if err != nil && !r.Failed {
		r.Failed, r.Failure = true, lastLines(buf.String()+"\n"+err.Error(), 5)
	}
	return r
}

// copyCorpus copies the corpus files of from that to lacks into to (made
// if need be), best effort: a file that vanishes or cannot be read is
// skipped. Each is written in place, as the Go fuzzer writes its cache,
// not under a temporary name renamed after: a reader of to may meet a
// partial file, which the fuzzer skips as malformed, but never a file
// that vanishes between its listing and its reading (the fault that
// stopped FuzzMetaPage). It returns how many it copied.
func copyCorpus(from, to string) (int, error) {
	entries, err := os.ReadDir(from)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(to, e.Name()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			continue // already there (or not writable)
		}
		_, werr := f.Write(b)
		if cerr := f.Close(); werr == nil && cerr == nil {
			n++
		}
	}
	return n, nil
}

// fuzzCommand is the `go test -fuzz` command of target t, its interesting
// inputs kept in cache (the test binary's -test.fuzzcachedir, given after
// -args so that it overrides the one `go test` sets to the shared cache).
func fuzzCommand(ctx context.Context, dir string, t FuzzTarget, d time.Duration, parallel int, cache string) *exec.Cmd {
	// NB: -fuzzminimizetime bounds the minimization of each new corpus
	// entry (60 s by default), which can otherwise take the whole fuzzing
	// time of a target with large inputs.
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+t.Name+"$", "-fuzztime", d.String(),
		"-fuzzminimizetime", "2s", "-parallel", strconv.Itoa(parallel), t.Pkg,
		"-args", "-test.fuzzcachedir="+cache)
	cmd.Dir = dir
	return cmd
}

func parseFuzzOutput(s string) FuzzResult {
	var r FuzzResult
	if m := execsRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		r.Execs, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
	}
	if m := newRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		r.New, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
	}
	if m := failingRe.FindStringSubmatch(s); m != nil {
		r.Failed = true
		r.Failure = m[1] + ": " + firstFailure(s)
	}
	return r
}

func firstFailure(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "_test.go:") || strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return fmt.Sprint(strings.Join(ls, " | "))
}
