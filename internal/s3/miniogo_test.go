package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// sha256Hasher is the hasher minio-go's streaming signer takes.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// minioClient is a minio-go client of the gateway at endpoint (path-style,
// the one region, plain HTTP: so its uploads are streaming-signed,
// aws-chunked).
func minioClient(t *testing.T, endpoint, secret string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(testAccessKey, secret, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func minioCode(err error) string { return minio.ToErrorResponse(err).Code }

// TestMinioGo drives the gateway with minio-go, unchanged: buckets, a
// streaming-signed put with user metadata, a multipart put, whole and
// ranged gets, listing, copy, presigned get, bulk delete, and its errors.
func TestMinioGo(t *testing.T) {
	endpoint, c := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mc := minioClient(t, endpoint, testSecretKey)
	if err := mc.MakeBucket(ctx, "mgo", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := mc.BucketExists(ctx, "mgo"); err != nil || !ok {
		t.Fatalf("BucketExists: %v %v", ok, err)
	}
	rng := rand.New(rand.NewSource(7))
	small := make([]byte, 200_000)
	rng.Read(small)
	info, err := mc.PutObject(ctx, "mgo", "dir/small.bin", bytes.NewReader(small), int64(len(small)),
		minio.PutObjectOptions{ContentType: "application/x-test", UserMetadata: map[string]string{"origin": "minio-go"}})
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(small)
	if info.ETag != hex.EncodeToString(sum[:]) {
		t.Fatalf("PutObject ETag %q, want the MD5 %x", info.ETag, sum)
	}
	st, err := mc.StatObject(ctx, "mgo", "dir/small.bin", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(small)) || st.ContentType != "application/x-test" || st.UserMetadata["Origin"] != "minio-go" {
		t.Fatalf("StatObject: size %d, type %q, metadata %v", st.Size, st.ContentType, st.UserMetadata)
	}
	// Multipart: 11 MiB in 5 MiB parts (the object is above the test
	// cluster's 8 MiB single-object limit).
	big := make([]byte, 11<<20+3)
	rng.Read(big)
	if _, err := mc.PutObject(ctx, "mgo", "big.bin", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	read := func(key string, opts minio.GetObjectOptions) []byte {
		t.Helper()
		obj, err := mc.GetObject(ctx, "mgo", key, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		b, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return b
	}
	if got := read("big.bin", minio.GetObjectOptions{}); !bytes.Equal(got, big) {
		t.Fatalf("multipart object read back: %d bytes, differ", len(got))
	}
	var ranged minio.GetObjectOptions
	if err := ranged.SetRange(5<<20-10, 10<<20+10); err != nil {
		t.Fatal(err)
	}
	if got := read("big.bin", ranged); !bytes.Equal(got, big[5<<20-10:10<<20+11]) {
		t.Fatalf("range across parts: %d bytes, differ", len(got))
	}
	if _, err := mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: "mgo", Object: "copy.bin"},
		minio.CopySrcOptions{Bucket: "mgo", Object: "dir/small.bin"}); err != nil {
		t.Fatal(err)
	}
	if got := read("copy.bin", minio.GetObjectOptions{}); !bytes.Equal(got, small) {
		t.Fatal("copy differs")
	}
	var keys []string
	for o := range mc.ListObjects(ctx, "mgo", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, " ") != "big.bin copy.bin dir/small.bin" {
		t.Fatalf("ListObjects: %v", keys)
	}
	u, err := mc.PresignedGetObject(ctx, "mgo", "dir/small.bin", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, small) {
		t.Fatalf("presigned get: %d, %d bytes", resp.StatusCode, len(body))
	}
	if _, err := mc.StatObject(ctx, "mgo", "nope", minio.StatObjectOptions{}); minioCode(err) != "NoSuchKey" {
		t.Fatalf("StatObject of a missing key: %v", err)
	}
	if _, err := minioClient(t, endpoint, "wrong").ListBuckets(ctx); minioCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("a wrong secret: %v", err)
	}
	objs := make(chan minio.ObjectInfo, 3)
	for _, k := range []string{"big.bin", "copy.bin", "dir/small.bin"} {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	for e := range mc.RemoveObjects(ctx, "mgo", objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("RemoveObjects: %v", e.Err)
	}
	if err := mc.RemoveBucket(ctx, "mgo"); err != nil {
		t.Fatal(err)
	}
	if recs, err := c.List(ctx, ""); err != nil || len(recs) != 0 {
		t.Fatalf("after deleting everything the cluster holds %v (%v)", recs, err)
	}
}

// TestStreamingSignature: an aws-chunked body (signed with minio-go's own
// streaming signer) is stored when every chunk verifies; a changed byte, a
// dropped chunk or a short body is refused and stores nothing.
func TestStreamingSignature(t *testing.T) {
	endpoint, c := startGateway(t)
	if code, _, body := do(t, endpoint, call{method: "PUT", path: "/bkt"}); code != 200 {
		t.Fatalf("create bucket: %d %s", code, body)
	}
	data := make([]byte, 200_000) // four 64 KiB chunks
	rand.New(rand.NewSource(3)).Read(data)
	// signed returns the wire form of a streaming-signed PUT of data.
	signed := func(key string) (*http.Request, []byte) {
		r, err := http.NewRequest("PUT", endpoint+"/bkt/"+key, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		r = signer.StreamingSignV4(r, testAccessKey, testSecretKey, "", "us-east-1", int64(len(data)), time.Now().UTC(), sha256Hasher{sha256.New()})
		wire, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return r, wire
	}
	send := func(r *http.Request, wire []byte) (int, string) {
		t.Helper()
		r.Body = io.NopCloser(bytes.NewReader(wire))
		r.ContentLength = int64(len(wire))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			return 200, ""
		}
		return resp.StatusCode, errorCode(t, b)
	}
	r, wire := signed("flipped")
	flipped := bytes.Clone(wire)
	flipped[len(flipped)/2] ^= 1
	if status, code := send(r, flipped); status != 403 || code != "SignatureDoesNotMatch" {
		t.Errorf("a flipped byte: %d %s", status, code)
	}
	r, wire = signed("dropped")
	// Drop the second chunk: its header starts after the first chunk's
	// data and CRLF.
	first := bytes.Index(wire, []byte("\r\n")) + 2 + 64<<10 + 2
	second := first + bytes.Index(wire[first:], []byte("\r\n")) + 2 + 64<<10 + 2
	if status, code := send(r, append(bytes.Clone(wire[:first]), wire[second:]...)); status == 200 {
		t.Errorf("a dropped chunk was accepted (%s)", code)
	}
	r, wire = signed("short")
	if status, code := send(r, wire[:len(wire)-100]); status == 200 {
		t.Errorf("a short body was accepted (%s)", code)
	}
	if recs, err := c.List(context.Background(), ""); err != nil || len(recs) != 0 {
		t.Fatalf("refused uploads stored %v (%v)", recs, err)
	}
	r, wire = signed("good")
	if status, code := send(r, wire); status != 200 {
		t.Fatalf("a good streaming-signed put: %d %s", status, code)
	}
	if status, _, body := do(t, endpoint, call{method: "GET", path: "/bkt/good"}); status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("read back: %d, %d bytes", status, len(body))
	}
}
