package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// patternReader yields n bytes cycling through a seeded random block, so
// that a multi-GiB body costs no memory to produce.
type patternReader struct {
	block []byte
	off   int64
	n     int64
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := copy(b[:min(int64(len(b)), p.n-p.off)], p.block[p.off%int64(len(p.block)):])
	p.off += int64(k)
	return k, nil
}

// heapPeak samples the Go heap in use every 20 ms until stop is called,
// and returns the largest sample.
func heapPeak() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// BenchmarkMultipartUploadMemory uploads one object of
// FLASHMEND_S3_BENCH_BYTES (default 1 GiB; "5GiB" for the package doc's
// claim) through the gateway as a multipart upload of 16 MiB parts, one
// part at a time, the body generated as it is sent, and reports the
// process's peak Go heap in use (the gateway, the client and the in-process
// cluster's nodes together: an upper bound on the gateway's share) and the
// throughput. The bound to compare with is independent of the object's
// size: run it at 1 GiB and at 5 GiB and the peak stays put.
//
//	go test -run '^$' -bench MultipartUploadMemory -benchtime 1x ./internal/s3
func BenchmarkMultipartUploadMemory(b *testing.B) {
	size := int64(base.GiB)
	if s := os.Getenv("FLASHMEND_S3_BENCH_BYTES"); s != "" {
		v, err := base.ParseBytes(s)
		if err != nil {
			b.Fatal(err)
		}
		size = int64(v)
	}
	const partBytes = 16 << 20
	url, _ := startGatewayWith(b, 64<<20)
	if code, _, body := do(b, url, call{method: "PUT", path: "/bench"}); code != 200 {
		b.Fatalf("create bucket: %d %s", code, body)
	}
	block := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(block)
	runtime.GC()
	var base0 runtime.MemStats
	runtime.ReadMemStats(&base0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := "obj" + strconv.Itoa(i)
		status, _, body := do(b, url, call{method: "POST", path: "/bench/" + key + "?uploads", header: map[string]string{"X-Amz-Storage-Class": "STANDARD_IA"}})
		var res initiateXML
		if status != 200 || xml.Unmarshal(body, &res) != nil {
			b.Fatalf("create upload: %d %s", status, body)
		}
		stop := heapPeak()
		start := time.Now()
		doc := "<CompleteMultipartUpload>"
		for n, off := 1, int64(0); off < size; n, off = n+1, off+partBytes {
			pn := min(partBytes, size-off)
			// A part that fails (a node lost its lease on a loaded
			// machine, say) is sent again, as S3 clients do.
			var etag string
			for attempt := 1; ; attempt++ {
				r, err := http.NewRequest("PUT", fmt.Sprintf("%s/bench/%s?partNumber=%d&uploadId=%s", url, key, n, res.UploadID),
					&patternReader{block: block, off: off, n: off + pn})
				if err != nil {
					b.Fatal(err)
				}
				r.ContentLength = pn
				sign(r, testAccessKey, testSecretKey, nil, time.Now())
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					b.Fatal(err)
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					etag = resp.Header.Get("ETag")
					break
				}
				if resp.StatusCode < 500 || attempt == 3 {
					b.Fatalf("part %d: %d %s", n, resp.StatusCode, msg)
				}
				b.Logf("part %d, attempt %d: %d %s", n, attempt, resp.StatusCode, msg)
			}
			doc += fmt.Sprintf("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", n, etag)
		}
		doc += "</CompleteMultipartUpload>"
		if status, _, body := do(b, url, call{method: "POST", path: "/bench/" + key + "?uploadId=" + res.UploadID, body: []byte(doc)}); status != 200 {
			b.Fatalf("complete: %d %s", status, body)
		}
		elapsed := time.Since(start)
		peak := stop()
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(base0.HeapInuse)/(1<<20), "idle-heap-MiB")
		b.ReportMetric(float64(size)/(1<<20)/elapsed.Seconds(), "MiB/s")
		b.ReportMetric(float64(size)/(1<<20), "object-MiB")
	}
}

// BenchmarkS3VersusClient puts and gets the same 8 MiB objects through the
// S3 gateway (signed HTTP, single-part) and through the cluster client the
// gateway itself uses (what 'ctl put/get' does), on one in-process 6-node
// cluster, and reports MiB/s for each: the gateway's cost over the client.
//
//	go test -run '^$' -bench S3VersusClient -benchtime 8x ./internal/s3
func BenchmarkS3VersusClient(b *testing.B) {
	const size = 8 << 20
	url, c := startGatewayWith(b, 64<<20)
	if code, _, body := do(b, url, call{method: "PUT", path: "/bench"}); code != 200 {
		b.Fatalf("create bucket: %d %s", code, body)
	}
	data := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(data)
	ctx := context.Background()
	// Every object the gets read exists whatever b.N the puts ran with.
	for i := 0; i < 4; i++ {
		if code, _, body := do(b, url, call{method: "PUT", path: "/bench/obj" + strconv.Itoa(i), body: data}); code != 200 {
			b.Fatalf("put: %d %s", code, body)
		}
		if _, err := c.Put(ctx, "direct/obj"+strconv.Itoa(i), data, objectpb.Redundancy_REP); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("put/s3", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			if code, _, body := do(b, url, call{method: "PUT", path: "/bench/obj" + strconv.Itoa(i%4), body: data}); code != 200 {
				b.Fatalf("put: %d %s", code, body)
			}
		}
	})
	b.Run("put/client", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			if _, err := c.Put(ctx, "direct/obj"+strconv.Itoa(i%4), data, objectpb.Redundancy_REP); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/s3", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			if code, _, body := do(b, url, call{method: "GET", path: "/bench/obj" + strconv.Itoa(i%4)}); code != 200 || len(body) != size {
				b.Fatalf("get: %d, %d bytes", code, len(body))
			}
		}
	})
	b.Run("get/client", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			if _, _, err := c.GetTo(ctx, "direct/obj"+strconv.Itoa(i%4), client.ModeDefault, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
}
