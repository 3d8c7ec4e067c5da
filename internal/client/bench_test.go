package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
)

// BenchmarkGet reads a 4 MiB object through the client: REP and EC, clean
// and with transient flips injected on every node (UBER 1e-6 per bit read,
// about one flip per 128 KiB), in DIRECT and hdfs mode. Memory stores keep
// the disk out of the measurement.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	c := benchCluster(b, devcluster.Options{
		Dir: b.TempDir(), Nodes: 6, UnsafeNoFsync: true,
		NodeStore: func(string, int) (objstore.Store, error) { return objstore.NewMemStore(), nil },
	})
	data := make([]byte, 4<<20)
	rand.New(rand.NewSource(1)).Read(data)
	for _, red := range []objectpb.Redundancy{rep, ec} {
		if _, err := c.Put(ctx, red.String(), data, red); err != nil {
			b.Fatal(err)
		}
	}
	for _, uber := range []float64{0, 1e-6} {
		for id := uint64(1); id <= 6; id++ {
			if err := c.InjectUBER(ctx, id, uber, false); err != nil {
				b.Fatal(err)
			}
		}
		for _, tc := range []struct {
			red  objectpb.Redundancy
			mode string
		}{{rep, client.ModeDirect}, {rep, client.ModeHDFS}, {ec, client.ModeDirect}} {
			b.Run(fmt.Sprintf("%v/%s/uber=%g", tc.red, tc.mode, uber), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				failed := 0
				for i := 0; i < b.N; i++ {
					got, _, err := c.GetWithReport(ctx, tc.red.String(), tc.mode)
					if err != nil {
						failed++
						continue
					}
					if !bytes.Equal(got, data) {
						b.Fatal("wrong data")
					}
				}
				b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
				c.WaitBackground()
			})
		}
	}
}

// BenchmarkPut writes an 8 MiB object through the client to nodes on plain
// files (the page cache; no fsync), REP and EC, and reports the whole
// process's CPU seconds (client and nodes) per GB put: with -cpuprofile it
// shows where a PUT's time goes (docs/results/datapath.md).
func BenchmarkPut(b *testing.B) {
	benchPuts(b, devcluster.Options{Dir: b.TempDir(), Nodes: 6, UnsafeNoFsync: true})
}

// BenchmarkPutSync is BenchmarkPut on nodes that fsync their writes (a
// node's default, `flashmend node --sync`, and `flashmend dev`'s): a PUT is
// acknowledged only once every replica's or shard's chunks are durable.
func BenchmarkPutSync(b *testing.B) {
	benchPuts(b, devcluster.Options{Dir: b.TempDir(), Nodes: 6, SyncWrites: true, UnsafeNoFsync: true})
}

// benchPuts puts an 8 MiB object, REP and EC, on a cluster started with
// opts, reporting the whole process's CPU seconds per GB put.
func benchPuts(b *testing.B, opts devcluster.Options) {
	ctx := context.Background()
	c := benchCluster(b, opts)
	data := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(data)
	for _, red := range []objectpb.Redundancy{rep, ec} {
		b.Run(red.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			cpu0, io0 := processCPUSeconds(b), processIO(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Put(ctx, red.String(), data, red); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((processCPUSeconds(b)-cpu0)/(float64(b.N)*float64(len(data))/1e9), "cpu-s/GB")
			reportIO(b, io0)
		})
	}
}

// BenchmarkGetFiles reads an 8 MiB object through the client's streaming
// GET from nodes on plain files (the page cache; the datapath experiment's
// setting), REP and EC, and reports the whole process's CPU seconds (client
// and nodes: getrusage user+system) per GB read, the figure the data path's
// cost is stated in.
func BenchmarkGetFiles(b *testing.B) {
	ctx := context.Background()
	c := benchCluster(b, devcluster.Options{Dir: b.TempDir(), Nodes: 6, UnsafeNoFsync: true, RepairReserve: -1})
	data := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(data)
	for _, red := range []objectpb.Redundancy{rep, ec} {
		if _, err := c.Put(ctx, "files/"+red.String(), data, red); err != nil {
			b.Fatal(err)
		}
		b.Run(red.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var got bytes.Buffer
			cpu0, io0 := processCPUSeconds(b), processIO(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got.Reset()
				if _, _, err := c.GetTo(ctx, "files/"+red.String(), client.ModeDefault, &got); err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), data) {
					b.Fatal("wrong data")
				}
			}
			b.StopTimer()
			b.ReportMetric((processCPUSeconds(b)-cpu0)/(float64(b.N)*float64(len(data))/1e9), "cpu-s/GB")
			reportIO(b, io0)
		})
	}
}

// processCPUSeconds is the process's user+system CPU time so far.
func processCPUSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// processIO is the process's read and write system calls so far (syscr
// and syscw of /proc/self/io: read, pread, readv, ... and write, pwrite,
// writev, ..., files and sockets alike); nil where there is no such file.
func processIO(b *testing.B) map[string]float64 {
	text, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return nil
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(text), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("/proc/self/io: %q: %v", line, err)
		}
		m[k] = n
	}
	return m
}

// reportIO reports the read and write system calls per operation since
// io0 (processIO): the data path's calls per object, client and nodes.
func reportIO(b *testing.B, io0 map[string]float64) {
	io1 := processIO(b)
	if io0 == nil || io1 == nil {
		return
	}
	b.ReportMetric((io1["syscr"]-io0["syscr"])/float64(b.N), "reads/op")
	b.ReportMetric((io1["syscw"]-io0["syscw"])/float64(b.N), "writes/op")
}

// benchCluster starts an in-process cluster and a client of it, both closed
// when b ends.
func benchCluster(b *testing.B, opts devcluster.Options) *client.Client {
	b.Helper()
	ctx := context.Background()
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
