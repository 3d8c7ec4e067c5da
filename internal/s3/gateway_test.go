package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

const (
	testAccessKey = "AKTEST"
	testSecretKey = "secret-for-tests"
)

// startGateway runs a dev cluster (KV included) and a gateway over it.
func startGateway(t *testing.T) (url string, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(), UnsafeNoFsync: true, KV: &kv.Options{}, MaxObjectBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	c, err = client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	kvc, err := c.KVClient(ctx, kvclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvc.Close() })
	gw, err := New(c, kvc, Options{AccessKey: testAccessKey, SecretKey: testSecretKey, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL, c
}

// sign signs r with SigV4 (header form) as a client would; payload is the
// body (nil: UNSIGNED-PAYLOAD).
func sign(r *http.Request, accessKey, secret string, payload []byte, at time.Time) {
	hash := unsignedPayload
	if payload != nil {
		sum := sha256.Sum256(payload)
		hash = hex.EncodeToString(sum[:])
	}
	amzDate := at.UTC().Format(amzDateLayout)
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", hash)
	signed := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	date := amzDate[:8]
	canonical := strings.Join([]string{r.Method, canonicalURI(r.URL), canonicalQuery(r.URL.Query()),
		canonicalHeaders(r, signed), strings.Join(signed, ";"), hash}, "\n")
	scope := date + "/us-east-1/s3/aws4_request"
	toSign := strings.Join([]string{sigAlgorithm, amzDate, scope, hexSHA256([]byte(canonical))}, "\n")
	key := hmacSHA256([]byte("AWS4"+secret), date)
	key = hmacSHA256(key, "us-east-1")
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	r.Header.Set("Authorization", sigAlgorithm+" Credential="+accessKey+"/"+scope+", SignedHeaders="+strings.Join(signed, ";")+
		", Signature="+hex.EncodeToString(hmacSHA256(key, toSign)))
}

type call struct {
	method, path string
	body         []byte
	header       map[string]string
	// sign is how the request is signed: "" (correctly), "none", "secret"
	// (wrong secret), "key" (unknown access key), "stale" (an hour old),
	// "body" (the signed hash is not the body's).
	sign string
}

func do(t *testing.T, url string, c call) (int, http.Header, []byte) {
	t.Helper()
	r, err := http.NewRequest(c.method, url+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		r.Header.Set(k, v)
	}
	payload := c.body
	if payload == nil {
		payload = []byte{}
	}
	switch c.sign {
	case "":
		sign(r, testAccessKey, testSecretKey, payload, time.Now())
	case "secret":
		sign(r, testAccessKey, "not-the-secret", payload, time.Now())
	case "key":
		sign(r, "NOBODY", testSecretKey, payload, time.Now())
	case "stale":
		sign(r, testAccessKey, testSecretKey, payload, time.Now().Add(-time.Hour))
	case "body":
		sign(r, testAccessKey, testSecretKey, append([]byte("x"), payload...), time.Now())
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// errorCode is the Code of an S3 XML error document.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e errorDocument
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an S3 error document: %v: %q", err, body)
	}
	return e.Code
}

// TestGatewayErrors: every refusal is S3's error, with S3's code and
// status, and changes nothing.
func TestGatewayErrors(t *testing.T) {
	url, c := startGateway(t)
	data := bytes.Repeat([]byte("s3 "), 50000)
	if code, _, body := do(t, url, call{method: "PUT", path: "/bkt"}); code != 200 {
		t.Fatalf("create bucket: %d %s", code, body)
	}
	if code, h, body := do(t, url, call{method: "PUT", path: "/bkt/obj", body: data}); code != 200 || h.Get("ETag") == "" {
		t.Fatalf("put: %d %s", code, body)
	}
	for _, tc := range []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"unsigned", call{method: "GET", path: "/bkt/obj", sign: "none"}, 403, "AccessDenied"},
		{"wrong secret", call{method: "GET", path: "/bkt/obj", sign: "secret"}, 403, "SignatureDoesNotMatch"},
		{"unknown key", call{method: "GET", path: "/bkt/obj", sign: "key"}, 403, "InvalidAccessKeyId"},
		{"stale", call{method: "GET", path: "/bkt/obj", sign: "stale"}, 403, "RequestTimeTooSkewed"},
		{"body not the signed one", call{method: "PUT", path: "/bkt/obj", body: []byte("tampered"), sign: "body"}, 400, "XAmzContentSHA256Mismatch"},
		{"bad Content-MD5", call{method: "PUT", path: "/bkt/obj", body: []byte("other"), header: map[string]string{"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="}}, 400, "BadDigest"},
		{"missing bucket", call{method: "GET", path: "/nobucket/obj"}, 404, "NoSuchBucket"},
		{"put to missing bucket", call{method: "PUT", path: "/nobucket/obj", body: []byte("x")}, 404, "NoSuchBucket"},
		{"missing key", call{method: "GET", path: "/bkt/nokey"}, 404, "NoSuchKey"},
		{"bad range", call{method: "GET", path: "/bkt/obj", header: map[string]string{"Range": "bytes=999999999-"}}, 416, "InvalidRange"},
		{"bucket name", call{method: "PUT", path: "/Bad_Name"}, 400, "InvalidBucketName"},
		{"bucket exists", call{method: "PUT", path: "/bkt"}, 409, "BucketAlreadyOwnedByYou"},
		{"bucket not empty", call{method: "DELETE", path: "/bkt"}, 409, "BucketNotEmpty"},
		{"too large", call{method: "PUT", path: "/bkt/big", body: make([]byte, 8<<20+1)}, 400, "EntityTooLarge"},
		{"multipart", call{method: "POST", path: "/bkt/obj?uploads"}, 501, "NotImplemented"},
		{"copy", call{method: "PUT", path: "/bkt/copy", header: map[string]string{"X-Amz-Copy-Source": "/bkt/obj"}}, 501, "NotImplemented"},
		{"bad max-keys", call{method: "GET", path: "/bkt?list-type=2&max-keys=-1"}, 400, "InvalidArgument"},
	} {
		status, _, body := do(t, url, tc.c)
		if status != tc.status || errorCode(t, body) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	// Nothing changed: the object holds its bytes, no other key exists.
	status, _, body := do(t, url, call{method: "GET", path: "/bkt/obj"})
	if status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("get after the refusals: %d, %d bytes", status, len(body))
	}
	recs, err := c.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].KeyVersion != 1 {
		t.Fatalf("the cluster holds %v after refused requests, want s3/bkt/obj version 1 only", recs)
	}
	// A HEAD error has no body; a range is served as S3 serves it.
	if status, _, body := do(t, url, call{method: "HEAD", path: "/bkt/nokey"}); status != 404 || len(body) != 0 {
		t.Fatalf("head of a missing key: %d %q", status, body)
	}
	status, h, body := do(t, url, call{method: "GET", path: "/bkt/obj", header: map[string]string{"Range": "bytes=-10"}})
	if status != 206 || !bytes.Equal(body, data[len(data)-10:]) || h.Get("Content-Range") != "bytes 149990-149999/150000" {
		t.Fatalf("suffix range: %d %q %q", status, body, h.Get("Content-Range"))
	}
}

// TestBoto3 drives the gateway with boto3, unchanged
// (testdata/boto3_check.py), from the virtualenv `make pytools` installs
// under bin/ from PyPI (pinned). It skips only when there is no Python.
func TestBoto3(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the boto3 test needs it")
	}
	python, err := filepath.Abs(filepath.Join("..", "..", "bin", "pyvenv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no boto3 virtualenv at %s: run 'make pytools' (make test does)", python)
	}
	url, _ := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "boto3_check.py"))
	cmd.Env = append(os.Environ(), "FLASHMEND_S3="+url, "FLASHMEND_S3_ACCESS_KEY="+testAccessKey, "FLASHMEND_S3_SECRET_KEY="+testSecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
