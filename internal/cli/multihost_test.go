package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/flashmend/flashmend/internal/dashboard"
)

// freePortOn returns a port free on host now (the caller binds it and
// tries again if another process took it meanwhile).
func freePortOn(t *testing.T, host string) string {
	t.Helper()
	lis, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return port
}

// startExternalEtcd runs a single-member etcd on host, in this test's
// process: the "external etcd cluster" a multi-host deployment points its
// coordinator at with --etcd. It returns its client URL.
func startExternalEtcd(t *testing.T, host string) string {
	t.Helper()
	return startExternalEtcdTLS(t, host, nil)
}

// startExternalEtcdTLS is startExternalEtcd serving its clients over TLS
// with tlsInfo (nil: plaintext).
func startExternalEtcdTLS(t *testing.T, host string, tlsInfo *transport.TLSInfo) string {
	t.Helper()
	scheme := "http"
	if tlsInfo != nil {
		scheme = "https"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		cfg := embed.NewConfig()
		cfg.Dir = filepath.Join(t.TempDir(), "etcd")
		if tlsInfo != nil {
			cfg.ClientTLSInfo = *tlsInfo
		}
		cu := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, freePortOn(t, host))}
		pu := url.URL{Scheme: "http", Host: net.JoinHostPort(host, freePortOn(t, host))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.UnsafeNoFsync = true
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err // a port taken meanwhile: new ports
			continue
		}
		t.Cleanup(e.Close)
		select {
		case <-e.Server.ReadyNotify():
			return cu.String()
		case <-time.After(time.Minute):
			t.Fatal("the external etcd did not become ready within a minute")
		}
	}
	t.Fatalf("external etcd: %v", lastErr)
	return ""
}

// TestMultiHostProcesses deploys flashmend as on several machines, each
// part a separate process on its own loopback address: an external etcd
// (127.0.0.10), the coordinator pointed at it (127.0.0.2), six nodes
// (127.0.0.3 to .8) and an S3 gateway (127.0.0.11). It places the KV
// store, writes and reads REP and EC objects with ctl and through S3
// (minio-go), then kills a node outright and reads everything again.
func TestMultiHostProcesses(t *testing.T) {
	if lis, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("this machine does not route 127.0.0.2 to loopback: %v", err)
	} else {
		lis.Close()
	}
	wd := t.TempDir()
	etcdURL := startExternalEtcd(t, "127.0.0.10")
	coordDir := filepath.Join(wd, "coordinator")
	coordinator := startBinary(t, wd, "coordinator", "--dir", coordDir, "--listen", "127.0.0.2:0", "--etcd", etcdURL,
		"--metrics", "127.0.0.2:0", "--dashboard", "127.0.0.2:0", "--no-scrub")
	var ep string
	waitFor(t, "the coordinator's endpoint", func() bool {
		select {
		case <-coordinator.done:
			t.Fatalf("coordinator exited %d:\n%s%s", coordinator.code, coordinator.out.String(), coordinator.errOut.String())
		default:
		}
		var err error
		ep, err = readEndpoint(coordDir)
		return err == nil
	})
	if !strings.HasPrefix(ep, "127.0.0.2:") {
		t.Fatalf("coordinator endpoint %q, want 127.0.0.2:PORT", ep)
	}
	// The nodes keep plain files on this machine's disk, which is shared:
	// with the default repair reserve (5% of the disk kept free) they
	// refused every write whenever other work had filled the disk past 95%
	// (15 of 20 runs under make stress). The reserve is tested where its
	// device size is the test's own (objstore, client/devcluster).
	var nodes []*proc
	for i := 3; i <= 8; i++ {
		host := fmt.Sprintf("127.0.0.%d", i)
		nodes = append(nodes, startBinary(t, wd, "node", "--dir", filepath.Join(wd, "node-"+host), "--coordinator", ep,
			"--listen", host+":0", "--metrics", host+":0", "--sync=false", "--repair-reserve", "0"))
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBinary(t, wd, append([]string{"ctl", "--endpoint", ep}, args...)...)
		if code != 0 {
			t.Fatalf("ctl %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	var nodesOut string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		ok := true
		for _, n := range nodes {
			ok = ok && strings.Contains(n.out.String(), "serving on")
		}
		out, _, code := runBinary(t, wd, "ctl", "--endpoint", ep, "nodes")
		nodesOut = out
		for i := 3; i <= 8; i++ {
			ok = ok && regexp.MustCompile(fmt.Sprintf(`127\.0\.0\.%d:\d+`, i)).MatchString(out)
		}
		if ok && code == 0 {
			break
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, n := range nodes {
				logs.WriteString(n.out.String() + n.errOut.String())
			}
			t.Fatalf("six nodes never served, each on its own address; ctl nodes:\n%s\nnodes:\n%s", nodesOut, logs.String())
		}
	}
	if out, errOut, code := runBinary(t, wd, "kv", "init", "--endpoint", ep); code != 0 {
		t.Fatalf("kv init: %d\n%s%s", code, out, errOut)
	}
	gateway := startBinary(t, wd, "s3", "--endpoint", ep, "--listen", "127.0.0.11:0", "--metrics", "off",
		"--access-key", "AKMULTI", "--secret-key", "multi-host-secret")
	var s3URL string
	waitFor(t, "the S3 gateway's line", func() bool {
		select {
		case <-gateway.done:
			t.Fatalf("s3 exited %d:\n%s%s", gateway.code, gateway.out.String(), gateway.errOut.String())
		default:
		}
		m := regexp.MustCompile(`(?m)^S3: http://(127\.0\.0\.11:\d+) access key: AKMULTI secret key: multi-host-secret$`).FindStringSubmatch(gateway.out.String())
		if m != nil {
			s3URL = m[1]
		}
		return m != nil
	})

	rng := rand.New(rand.NewSource(5))
	data := make([]byte, 700_000)
	rng.Read(data)
	file := filepath.Join(wd, "obj")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl("put", "rep", file)
	ctl("put", "ec", file, "--redundancy", "ec")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mc, err := minio.New(s3URL, &minio.Options{Creds: credentials.NewStaticV4("AKMULTI", "multi-host-secret", ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "multi", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, "multi", "obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, key := range []string{"rep", "ec"} {
			if got := ctl("get", key, "-"); got != string(data) {
				t.Fatalf("%s: ctl get %s: %d bytes, differ", when, key, len(got))
			}
		}
		obj, err := mc.GetObject(ctx, "multi", "obj", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: S3 GET: %d bytes (%v)", when, len(got), err)
		}
	}
	check("all nodes up")

	// The coordinator's dashboard shows every node's figures, gathered
	// from the nodes' processes.
	m := regexp.MustCompile(`(?m)^dashboard: (http://127\.0\.0\.2:\d+/)$`).FindStringSubmatch(coordinator.out.String())
	if m == nil {
		t.Fatalf("the coordinator printed no dashboard line:\n%s", coordinator.out.String())
	}
	var st dashboard.State
	waitFor(t, "the dashboard to show six nodes", func() bool {
		st = dashboardState(t, m[1])
		return len(st.Nodes) == 6 && len(st.Errors) == 0
	})
	if st.Totals.Requests == 0 || st.Objects["EC"] != 1 || st.Objects["REP"] < 2 {
		t.Fatalf("dashboard: %d requests, objects %v; want requests counted, 1 EC and at least 2 REP objects", int64(st.Totals.Requests), st.Objects)
	}

	// A machine dies: its node is killed outright.
	if err := nodes[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-nodes[0].done
	check("node 127.0.0.3 killed")
	waitFor(t, "the dashboard to show five nodes", func() bool {
		st = dashboardState(t, m[1])
		return len(st.Nodes) == 5 && len(st.Errors) == 0
	})
}
