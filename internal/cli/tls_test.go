package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TestMultiHostTLS deploys a cluster as on several machines, with mutual
// TLS everywhere, configured the way docs/multi-host.md says: certificates
// from 'flashmend certs', one config file shared by every process (each
// takes its section) and per-process settings in FLASHMEND_NODE_*
// variables. An external etcd requiring client certificates (127.0.0.10),
// the coordinator (127.0.0.2), three nodes (127.0.0.3 to .5) and an HTTPS
// S3 gateway (127.0.0.11) are separate processes; the coordinator's
// dashboard shows the nodes' figures, gathered over TLS. ctl, minio-go,
// and (when python3 is installed) the AWS CLI and boto3 put and get
// objects over TLS; a client without the CA, one without a client
// certificate and one that trusts another CA are each refused with an
// error that says why.
func TestMultiHostTLS(t *testing.T) {
	if lis, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("this machine does not route 127.0.0.2 to loopback: %v", err)
	} else {
		lis.Close()
	}
	wd := t.TempDir()
	pki := filepath.Join(wd, "tls")
	if out, errOut, code := runBinary(t, wd, "certs", "--dir", pki, "etcd=127.0.0.10", "coordinator=127.0.0.2",
		"node-1=127.0.0.3", "node-2=127.0.0.4", "node-3=127.0.0.5", "s3=127.0.0.11,localhost", "client"); code != 0 {
		t.Fatalf("certs: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runBinary(t, wd, "certs", "--dir", filepath.Join(wd, "other-ca"), "stranger"); code != 0 {
		t.Fatalf("certs (other CA): exit %d\n%s%s", code, out, errOut)
	}
	file := func(name string) string { return filepath.Join(pki, name) }
	// The external etcd requires client certificates of the same CA: the
	// coordinator and the nodes connect to it with their own.
	etcdURL := startExternalEtcdTLS(t, "127.0.0.10", &transport.TLSInfo{CertFile: file("etcd.crt"), KeyFile: file("etcd.key"),
		TrustedCAFile: file("ca.crt"), ClientCertAuth: true})
	config := filepath.Join(wd, "flashmend.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`coordinator:
  dir: %[1]s/coordinator
  listen: 127.0.0.2:0
  etcd: [%[3]s]
  metrics: 127.0.0.2:0
  dashboard: 127.0.0.2:0
  no-scrub: true
  tls-cert: %[2]s/coordinator.crt
  tls-key: %[2]s/coordinator.key
  tls-ca: %[2]s/ca.crt
  tls-client-auth: true
node:
  sync: false
  repair-reserve: 0   # plain files on this machine's shared disk
  metrics: 127.0.0.1:0
  tls-ca: %[2]s/ca.crt
  tls-client-auth: true
s3:
  listen: 127.0.0.11:0
  metrics: "off"
  tls-cert: %[2]s/s3.crt
  tls-key: %[2]s/s3.key
  tls-ca: %[2]s/ca.crt
`, wd, pki, etcdURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	withConfig := []string{"FLASHMEND_CONFIG=" + config}
	coordinator := startBinaryEnv(t, wd, withConfig, "coordinator")
	var ep string
	waitFor(t, "the coordinator's endpoint", func() bool {
		select {
		case <-coordinator.done:
			t.Fatalf("coordinator exited %d:\n%s%s", coordinator.code, coordinator.out.String(), coordinator.errOut.String())
		default:
		}
		var err error
		ep, err = readEndpoint(filepath.Join(wd, "coordinator"))
		return err == nil && strings.Contains(coordinator.out.String(), "serving on")
	})
	if !strings.Contains(coordinator.out.String(), "over TLS, client certificates required") {
		t.Fatalf("the coordinator does not say it requires client certificates:\n%s", coordinator.out.String())
	}
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		host := fmt.Sprintf("127.0.0.%d", i+2)
		nodes = append(nodes, startBinaryEnv(t, wd, append(withConfig,
			"FLASHMEND_NODE_DIR="+filepath.Join(wd, fmt.Sprintf("node-%d", i)),
			"FLASHMEND_NODE_COORDINATOR="+ep,
			"FLASHMEND_NODE_LISTEN="+host+":0",
			"FLASHMEND_NODE_TLS_CERT="+file(fmt.Sprintf("node-%d.crt", i)),
			"FLASHMEND_NODE_TLS_KEY="+file(fmt.Sprintf("node-%d.key", i))), "node"))
	}
	clientTLS := []string{"--tls-ca", file("ca.crt"), "--tls-cert", file("client.crt"), "--tls-key", file("client.key")}
	logs := func() string {
		var b strings.Builder
		for _, p := range append([]*proc{coordinator}, nodes...) {
			b.WriteString(p.out.String() + p.errOut.String())
		}
		return b.String()
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBinary(t, wd, append(append([]string{"ctl", "--endpoint", ep}, clientTLS...), args...)...)
		if code != 0 {
			t.Fatalf("ctl %v: exit %d\n%s%s\nlogs:\n%s", args, code, out, errOut, logs())
		}
		return out
	}
	waitFor(t, "three nodes serving over TLS", func() bool {
		for _, n := range nodes {
			select {
			case <-n.done:
				t.Fatalf("a node exited %d:\n%s", n.code, logs())
			default:
			}
			if !strings.Contains(n.out.String(), "over TLS, client certificates required") {
				return false
			}
		}
		out, _, code := runBinary(t, wd, append(append([]string{"ctl", "--endpoint", ep}, clientTLS...), "nodes")...)
		return code == 0 && regexp.MustCompile(`127\.0\.0\.3:\d+`).MatchString(out) &&
			regexp.MustCompile(`127\.0\.0\.4:\d+`).MatchString(out) && regexp.MustCompile(`127\.0\.0\.5:\d+`).MatchString(out)
	})

	// The coordinator's dashboard gathers the nodes' metrics over mutual
	// TLS.
	dash := regexp.MustCompile(`(?m)^dashboard: (http://127\.0\.0\.2:\d+/)$`).FindStringSubmatch(coordinator.out.String())
	if dash == nil {
		t.Fatalf("the coordinator printed no dashboard line:\n%s", coordinator.out.String())
	}
	waitFor(t, "the dashboard to show three nodes", func() bool {
		st := dashboardState(t, dash[1])
		return len(st.Nodes) == 3 && len(st.Errors) == 0
	})

	// Refusals, each with its reason.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plaintext client", nil, "it may require TLS (pass --tls-ca)"},
		{"no client certificate", []string{"--tls-ca", file("ca.crt")}, "client certificate signed by its CA (mutual TLS): pass --tls-cert and --tls-key"},
		{"another CA", []string{"--tls-ca", filepath.Join(wd, "other-ca", "ca.crt")}, "not signed by a CA this client trusts"},
	} {
		args := append(append([]string{"ctl", "--endpoint", ep, "--timeout", "30s"}, tc.args...), "nodes")
		out, errOut, code := runBinary(t, wd, args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, stdout %q\nwant exit 1 and %q", tc.name, code, errOut, out, tc.want)
		}
	}

	rng := rand.New(rand.NewSource(7))
	data := make([]byte, 300_000)
	rng.Read(data)
	obj := filepath.Join(wd, "obj")
	if err := os.WriteFile(obj, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl("put", "tls/rep", obj)
	// The shared client variables instead of flags.
	out, errOut, code := runBinaryEnv(t, wd, []string{"FLASHMEND_TLS_CA=" + file("ca.crt"), "FLASHMEND_TLS_CERT=" + file("client.crt"),
		"FLASHMEND_TLS_KEY=" + file("client.key")}, "ctl", "--endpoint", ep, "get", "tls/rep", "-")
	if code != 0 || out != string(data) {
		t.Fatalf("ctl get with FLASHMEND_TLS_*: exit %d, %d bytes, %s", code, len(out), errOut)
	}

	if out, errOut, code := runBinary(t, wd, append([]string{"kv", "init", "--endpoint", ep}, clientTLS...)...); code != 0 {
		t.Fatalf("kv init: %d\n%s%s", code, out, errOut)
	}
	gateway := startBinaryEnv(t, wd, append(withConfig, "FLASHMEND_S3_ENDPOINT="+ep,
		"FLASHMEND_S3_ACCESS_KEY=AKTLS", "FLASHMEND_S3_SECRET_KEY=tls-secret"), "s3")
	var s3Addr string
	waitFor(t, "the S3 gateway's https line", func() bool {
		select {
		case <-gateway.done:
			t.Fatalf("s3 exited %d:\n%s%s", gateway.code, gateway.out.String(), gateway.errOut.String())
		default:
		}
		m := regexp.MustCompile(`(?m)^S3: https://(127\.0\.0\.11:\d+) access key: AKTLS secret key: tls-secret$`).FindStringSubmatch(gateway.out.String())
		if m != nil {
			s3Addr = m[1]
		}
		return m != nil
	})
	caPEM, err := os.ReadFile(file("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	mc, err := minio.New(s3Addr, &minio.Options{Creds: credentials.NewStaticV4("AKTLS", "tls-secret", ""), Secure: true,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
		Region:    "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := mc.MakeBucket(ctx, "secure", minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket over HTTPS: %v\n%s", err, gateway.errOut.String())
	}
	if _, err := mc.PutObject(ctx, "secure", "obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := mc.GetObject(ctx, "secure", "obj", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("S3 GET over HTTPS: %d bytes, %v", len(got), err)
	}
	// A client without the CA does not get through.
	if resp, err := http.Get("https://" + s3Addr + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("an HTTPS client without the CA was answered")
	} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("an HTTPS client without the CA: %v", err)
	}
	awsOverHTTPS(t, wd, s3Addr, file("ca.crt"), data)
}

// runBinaryEnv is runBinary with env added.
func runBinaryEnv(t *testing.T, wd string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startBinaryEnv(t, wd, env, args...)
	code = p.wait(t, strings.Join(args, " "))
	return p.out.String(), p.errOut.String(), code
}

// awsOverHTTPS copies data up and down over HTTPS with the AWS CLI
// (trusting the CA with --ca-bundle) and boto3 (verify=CA), both from
// `make pytools`; without the CA each refuses the gateway.
func awsOverHTTPS(t *testing.T, wd, s3Addr, caFile string, data []byte) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Logf("python3 is not installed: the AWS CLI part over HTTPS is skipped")
		return
	}
	aws, err := filepath.Abs(filepath.Join("..", "..", "bin", "pyvenv", "bin", "aws"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(aws); err != nil {
		t.Fatalf("no AWS CLI at %s: run 'make pytools' (make test does)", aws)
	}
	home := filepath.Join(wd, "aws-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "config")
	if err := os.WriteFile(cfg, []byte("[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n  signature_version = s3v4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, aws, append([]string{"--endpoint-url", "https://" + s3Addr}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
			"AWS_ACCESS_KEY_ID=AKTLS", "AWS_SECRET_ACCESS_KEY=tls-secret", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1")
		cmd.Dir = wd
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	up := filepath.Join(wd, "aws-up")
	if err := os.WriteFile(up, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("--ca-bundle", caFile, "s3", "cp", up, "s3://secure/aws"); err != nil {
		t.Fatalf("aws s3 cp up over HTTPS: %v\n%s", err, out)
	}
	down := filepath.Join(wd, "aws-down")
	if out, err := run("--ca-bundle", caFile, "s3", "cp", "s3://secure/aws", down); err != nil {
		t.Fatalf("aws s3 cp down over HTTPS: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(down); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("aws s3 cp round trip over HTTPS: %d bytes, %v", len(got), err)
	}
	// Without the CA bundle the AWS CLI refuses the gateway's certificate.
	if out, err := run("s3", "ls", "s3://secure/"); err == nil || !strings.Contains(out, "CERTIFICATE_VERIFY_FAILED") {
		t.Fatalf("aws without --ca-bundle: %v\n%s", err, out)
	}

	// boto3, trusting the CA with verify=, and refusing without it.
	script := filepath.Join(wd, "boto3_https.py")
	if err := os.WriteFile(script, []byte(`import sys, boto3, botocore
from botocore.config import Config
url, ca, want = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
def client(verify):
    return boto3.client("s3", endpoint_url=url, verify=verify, aws_access_key_id="AKTLS",
        aws_secret_access_key="tls-secret", region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3 = client(ca)
s3.put_object(Bucket="secure", Key="boto3", Body=want)
got = s3.get_object(Bucket="secure", Key="boto3")["Body"].read()
assert got == want, "boto3 over HTTPS: %d bytes differ" % len(got)
try:
    client(True).list_objects_v2(Bucket="secure")
    sys.exit("boto3 without the CA was answered")
except botocore.exceptions.SSLError as e:
    print("refused without the CA:", e)
print("ok")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(filepath.Dir(aws), "python")
	cmd := exec.CommandContext(ctx, python, script, "https://"+s3Addr, caFile, up)
	cmd.Env = append(os.Environ(), "HOME="+home, "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "refused without the CA") {
		t.Fatalf("boto3 over HTTPS: %v\n%s", err, out)
	}
}

// TestDevTLS runs `flashmend dev` with a certificate: the cluster's gRPC,
// its own clients (scrubber, gateway, dashboard) and the S3 gateway use
// TLS; ctl needs the CA.
func TestDevTLS(t *testing.T) {
	wd := t.TempDir()
	pki := filepath.Join(wd, "tls")
	if out, errOut, code := runBinary(t, wd, "certs", "--dir", pki, "dev=127.0.0.1,localhost"); code != 0 {
		t.Fatalf("certs: exit %d\n%s%s", code, out, errOut)
	}
	file := func(name string) string { return filepath.Join(pki, name) }
	dev, ep := startDevBinary(t, wd, "--tls-cert", file("dev.crt"), "--tls-key", file("dev.key"), "--tls-ca", file("ca.crt"),
		"--repair-reserve", "0")
	waitFor(t, "the S3 gateway's https line", func() bool {
		return regexp.MustCompile(`(?m)^S3: https://127\.0\.0\.1:\d+ access key`).MatchString(dev.out.String())
	})
	if !strings.Contains(dev.out.String(), "try: flashmend ctl --endpoint "+ep+" --tls-ca "+file("ca.crt")+" nodes") {
		t.Fatalf("dev does not say how ctl connects:\n%s", dev.out.String())
	}
	data := bytes.Repeat([]byte("flashmend over TLS "), 20_000)
	obj := filepath.Join(wd, "obj")
	if err := os.WriteFile(obj, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runBinary(t, wd, "ctl", "--tls-ca", file("ca.crt"), "put", "k", obj); code != 0 {
		t.Fatalf("ctl put: exit %d\n%s%s\n%s", code, out, errOut, dev.errOut.String())
	}
	if out, errOut, code := runBinary(t, wd, "ctl", "--tls-ca", file("ca.crt"), "get", "k", "-"); code != 0 || out != string(data) {
		t.Fatalf("ctl get: exit %d, %d bytes\n%s", code, len(out), errOut)
	}
	if _, errOut, code := runBinary(t, wd, "ctl", "--timeout", "30s", "nodes"); code != 1 || !strings.Contains(errOut, "it may require TLS (pass --tls-ca)") {
		t.Fatalf("ctl without the CA: exit %d, %q", code, errOut)
	}
	dev.signal(t, os.Interrupt)
	if code := dev.wait(t, "dev"); code != 0 {
		t.Fatalf("dev exited %d:\n%s", code, dev.errOut.String())
	}
}
