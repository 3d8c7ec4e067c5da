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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

const (
	testAccessKey = "AKTEST"
	testSecretKey = "secret-for-tests"
)

// startGateway runs a dev cluster (KV included, objects up to 8 MiB) and
// a gateway over it.
func startGateway(t *testing.T) (url string, c *client.Client) {
	t.Helper()
	return startGatewayWith(t, 8<<20)
}

func startGatewayWith(t testing.TB, maxObjectBytes base.Bytes) (url string, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(), UnsafeNoFsync: true, KV: &kv.Options{}, MaxObjectBytes: maxObjectBytes})
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
	// Ready when the KV store takes a write: its shards' first elections
	// may outlast a proposal's deadline on a loaded machine.
	for {
		_, err := kvc.Put(ctx, []byte("test/ready"), []byte("1"))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the KV store never took a write: %v", err)
		}
		t.Logf("waiting for the KV store: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
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

// presign turns r into a presigned request (SigV4 query authentication),
// valid expires seconds from at.
func presign(r *http.Request, secret string, at time.Time, expires int) {
	amzDate := at.UTC().Format(amzDateLayout)
	date := amzDate[:8]
	q := r.URL.Query()
	q.Set("X-Amz-Algorithm", sigAlgorithm)
	q.Set("X-Amz-Credential", testAccessKey+"/"+date+"/us-east-1/s3/aws4_request")
	q.Set("X-Amz-Date", amzDate)
	q.Set("X-Amz-Expires", strconv.Itoa(expires))
	q.Set("X-Amz-SignedHeaders", "host")
	r.URL.RawQuery = q.Encode()
	canonical := strings.Join([]string{r.Method, canonicalURI(r.URL), canonicalQuery(q),
		canonicalHeaders(r, []string{"host"}), "host", unsignedPayload}, "\n")
	q.Set("X-Amz-Signature", signature(secret, date, "us-east-1", "s3", amzDate, canonical))
	r.URL.RawQuery = q.Encode()
}

type call struct {
	method, path string
	body         []byte
	header       map[string]string
	// sign is how the request is signed: "" (correctly), "none", "secret"
	// (wrong secret), "key" (unknown access key), "stale" (an hour old),
	// "body" (the signed hash is not the body's), "presigned" (a
	// presigned URL), "presigned-expired", "presigned-secret".
	sign string
}

// doRetry is do, sent again (a few times) while the gateway answers 503
// ServiceUnavailable, as S3 clients do: on a loaded machine a KV write of
// the cluster can take longer than its proposal deadline.
func doRetry(t testing.TB, url string, c call) (int, http.Header, []byte) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		code, h, body := do(t, url, c)
		if code != http.StatusServiceUnavailable || attempt == 4 {
			return code, h, body
		}
		t.Logf("%s %s: 503, again: %s", c.method, c.path, body)
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
}

func do(t testing.TB, url string, c call) (int, http.Header, []byte) {
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
	case "presigned":
		presign(r, testSecretKey, time.Now(), 60)
	case "presigned-expired":
		presign(r, testSecretKey, time.Now().Add(-2*time.Minute), 60)
	case "presigned-secret":
		presign(r, "not-the-secret", time.Now(), 60)
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
	if code, _, body := doRetry(t, url, call{method: "PUT", path: "/bkt"}); code != 200 {
		t.Fatalf("create bucket: %d %s", code, body)
	}
	if code, h, body := doRetry(t, url, call{method: "PUT", path: "/bkt/obj", body: data}); code != 200 || h.Get("ETag") == "" {
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
		{"complete an unknown upload", call{method: "POST", path: "/bkt/obj?uploadId=0123456789abcdef0123456789abcdef",
			body: []byte("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>")}, 404, "NoSuchUpload"},
		{"part of an unknown upload", call{method: "PUT", path: "/bkt/obj?partNumber=1&uploadId=nope", body: []byte("x")}, 404, "NoSuchUpload"},
		{"malformed delete document", call{method: "POST", path: "/bkt?delete", body: []byte("<Delete><Object><Key>obj")}, 400, "MalformedXML"},
		{"copy of a missing key", call{method: "PUT", path: "/bkt/copy", header: map[string]string{"X-Amz-Copy-Source": "/bkt/nokey"}}, 404, "NoSuchKey"},
		{"copy onto itself", call{method: "PUT", path: "/bkt/obj", header: map[string]string{"X-Amz-Copy-Source": "/bkt/obj"}}, 400, "InvalidRequest"},
		{"copy from a missing bucket", call{method: "PUT", path: "/bkt/copy", header: map[string]string{"X-Amz-Copy-Source": "nobucket/obj"}}, 404, "NoSuchBucket"},
		{"user metadata too large", call{method: "PUT", path: "/bkt/obj", body: []byte("x"), header: map[string]string{"X-Amz-Meta-Big": strings.Repeat("m", 2100)}}, 400, "MetadataTooLarge"},
		{"unknown storage class", call{method: "PUT", path: "/bkt/obj", body: []byte("x"), header: map[string]string{"X-Amz-Storage-Class": "GLACIER"}}, 400, "InvalidStorageClass"},
		{"presigned, expired", call{method: "GET", path: "/bkt/obj", sign: "presigned-expired"}, 403, "AccessDenied"},
		{"presigned, wrong secret", call{method: "GET", path: "/bkt/obj", sign: "presigned-secret"}, 403, "SignatureDoesNotMatch"},
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

// uploadID starts a multipart upload of /bkt/KEY.
func uploadID(t *testing.T, url, key string) string {
	t.Helper()
	status, _, body := do(t, url, call{method: "POST", path: "/bkt/" + key + "?uploads"})
	var res initiateXML
	if status != 200 || xml.Unmarshal(body, &res) != nil || !validUploadID(res.UploadID) {
		t.Fatalf("create multipart upload: %d %s", status, body)
	}
	return res.UploadID
}

// TestMultipartRefusals: a multipart upload's bad input (an oversized or
// undersized part, a malformed or wrong completion) gets S3's error and
// changes nothing; an abort leaves no part behind; a presigned URL reads.
func TestMultipartRefusals(t *testing.T) {
	url, c := startGateway(t)
	if code, _, body := do(t, url, call{method: "PUT", path: "/bkt"}); code != 200 {
		t.Fatalf("create bucket: %d %s", code, body)
	}
	id := uploadID(t, url, "mp")
	part := func(n int, data []byte) string {
		status, h, body := do(t, url, call{method: "PUT", path: "/bkt/mp?partNumber=" + strconv.Itoa(n) + "&uploadId=" + id, body: data})
		if status != 200 {
			t.Fatalf("upload part %d: %d %s", n, status, body)
		}
		return h.Get("ETag")
	}
	e1, e2 := part(1, []byte("small part")), part(2, []byte("last"))
	completion := func(parts ...string) []byte {
		doc := "<CompleteMultipartUpload>"
		for i := 0; i < len(parts); i += 2 {
			doc += "<Part><PartNumber>" + parts[i] + "</PartNumber><ETag>" + parts[i+1] + "</ETag></Part>"
		}
		return []byte(doc + "</CompleteMultipartUpload>")
	}
	for _, tc := range []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"part over the cluster's object limit", call{method: "PUT", path: "/bkt/mp?partNumber=3&uploadId=" + id, body: make([]byte, 8<<20+1)}, 400, "EntityTooLarge"},
		{"part number 0", call{method: "PUT", path: "/bkt/mp?partNumber=0&uploadId=" + id, body: []byte("x")}, 400, "InvalidArgument"},
		{"part number 10001", call{method: "PUT", path: "/bkt/mp?partNumber=10001&uploadId=" + id, body: []byte("x")}, 400, "InvalidArgument"},
		{"part body not the signed one", call{method: "PUT", path: "/bkt/mp?partNumber=3&uploadId=" + id, body: []byte("x"), sign: "body"}, 400, "XAmzContentSHA256Mismatch"},
		{"malformed completion", call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: []byte("<CompleteMultipartUpload><Part>")}, 400, "MalformedXML"},
		{"empty completion", call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: completion()}, 400, "MalformedXML"},
		{"part too small", call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: completion("1", e1, "2", e2)}, 400, "EntityTooSmall"},
		{"parts out of order", call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: completion("2", e2, "1", e1)}, 400, "InvalidPartOrder"},
		{"wrong ETag", call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: completion("1", e2)}, 400, "InvalidPart"},
		{"upload of another key", call{method: "POST", path: "/bkt/other?uploadId=" + id, body: completion("2", e2)}, 404, "NoSuchUpload"},
	} {
		status, _, body := do(t, url, tc.c)
		if status != tc.status || errorCode(t, body) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	ctx := context.Background()
	if recs, err := c.List(ctx, ""); err != nil || len(recs) != 2 {
		t.Fatalf("after the refusals the cluster holds %v (%v), want the two parts only", recs, err)
	}
	// The last part alone completes (no size minimum for it).
	status, _, body := do(t, url, call{method: "POST", path: "/bkt/mp?uploadId=" + id, body: completion("2", e2)})
	if status != 200 {
		t.Fatalf("complete: %d %s", status, body)
	}
	if status, _, body = do(t, url, call{method: "GET", path: "/bkt/mp", sign: "presigned"}); status != 200 || string(body) != "last" {
		t.Fatalf("presigned get of the multipart object: %d %q", status, body)
	}
	// An abort removes the upload's parts; the completed object's part
	// and manifest stay.
	id2 := uploadID(t, url, "gone")
	if status, _, body := do(t, url, call{method: "PUT", path: "/bkt/gone?partNumber=1&uploadId=" + id2, body: []byte("x")}); status != 200 {
		t.Fatalf("upload part: %d %s", status, body)
	}
	if status, _, body := do(t, url, call{method: "DELETE", path: "/bkt/gone?uploadId=" + id2}); status != 204 {
		t.Fatalf("abort: %d %s", status, body)
	}
	recs, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	if len(keys) != 2 || keys[0] != manifestKey("bkt", "mp") || !strings.HasPrefix(keys[1], partPrefix+id+"/00002-") {
		t.Fatalf("after completing one upload and aborting another the cluster holds %v", keys)
	}
	// Deleting the object takes its part with it.
	if status, _, body := do(t, url, call{method: "DELETE", path: "/bkt/mp"}); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if recs, err := c.List(ctx, ""); err != nil || len(recs) != 0 {
		t.Fatalf("after the delete the cluster holds %v (%v)", recs, err)
	}
}
