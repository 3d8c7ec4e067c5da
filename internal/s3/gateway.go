package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// Options configures a Gateway.
type Options struct {
	// AccessKey and SecretKey are the one credential requests must be
	// signed with.
	AccessKey, SecretKey string
	// Redundancy of new objects (default REP).
	Redundancy objectpb.Redundancy
	// Clock checks request times (default the system clock).
	Clock base.Clock
	// Logf receives operational messages (nil: discarded).
	Logf func(format string, args ...any)
}

// Gateway serves the S3 API over a flashmend cluster: objects in the object
// store under "s3/BUCKET/KEY", buckets and object metadata (ETag, content
// type) in the KV store under "s3/bucket/" and "s3/meta/".
type Gateway struct {
	c    *client.Client
	kv   *kvclient.Client
	opts Options
	reqs atomic.Uint64
}

// New returns a gateway over c and its cluster's KV store kv.
func New(c *client.Client, kv *kvclient.Client, opts Options) (*Gateway, error) {
	if opts.AccessKey == "" || opts.SecretKey == "" {
		return nil, base.InvalidArgumentf("s3: an access key and a secret key are required")
	}
	if opts.Redundancy == objectpb.Redundancy_REDUNDANCY_UNSPECIFIED {
		opts.Redundancy = objectpb.Redundancy_REP
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Gateway{c: c, kv: kv, opts: opts}, nil
}

const (
	objectPrefix = "s3/"
	bucketPrefix = "s3/bucket/"
	metaPrefix   = "s3/meta/"
	maxKeyBytes  = 1024
	xmlns        = "http://s3.amazonaws.com/doc/2006-03-01/"
)

func objectKey(bucket, key string) string { return objectPrefix + bucket + "/" + key }
func metaKey(bucket, key string) []byte   { return []byte(metaPrefix + bucket + "/" + key) }
func bucketKey(bucket string) []byte      { return []byte(bucketPrefix + bucket) }

// objectMeta is what S3 needs of an object that the object store does not
// keep, stored in the KV store; Version binds it to one object version
// (an overwrite whose metadata write failed shows no stale ETag).
type objectMeta struct {
	Version     uint64 `json:"version"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type,omitempty"`
}

// ServeHTTP authenticates the request and dispatches it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := fmt.Sprintf("%016X", g.reqs.Add(1))
	if e := g.authenticate(r); e != nil {
		writeError(w, r, e, id)
		return
	}
	if e := g.route(w, r); e != nil {
		writeError(w, r, e, id)
	}
}

func (g *Gateway) authenticate(r *http.Request) *Error {
	h := r.Header.Get("Authorization")
	if h == "" {
		if r.URL.Query().Get("X-Amz-Signature") != "" {
			return errorf(ErrNotImplemented, "presigned URLs are not supported yet")
		}
		return errorf(ErrAccessDenied, "anonymous requests are not allowed: sign with AWS Signature Version 4")
	}
	a, e := parseAuthorization(h)
	if e != nil {
		return e
	}
	if a.accessKey != g.opts.AccessKey {
		return errorf(ErrInvalidAccessKeyID, "the access key %q is not known", a.accessKey)
	}
	return verify(r, a, g.opts.SecretKey, g.opts.Clock.Now())
}

// route maps path-style requests (/BUCKET/KEY) to operations.
func (g *Gateway) route(w http.ResponseWriter, r *http.Request) *Error {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, hasKey := strings.Cut(path, "/")
	ctx := r.Context()
	q := r.URL.Query()
	switch {
	case bucket == "":
		if r.Method != http.MethodGet {
			return errorf(ErrMethodNotAllowed, "%s on the service", r.Method)
		}
		return g.listBuckets(ctx, w)
	case !hasKey || key == "":
		if e := checkBucketName(bucket); e != nil {
			return e
		}
		switch r.Method {
		case http.MethodPut:
			return g.createBucket(ctx, w, bucket)
		case http.MethodHead:
			return g.headBucket(ctx, w, bucket)
		case http.MethodDelete:
			return g.deleteBucket(ctx, w, bucket)
		case http.MethodGet:
			if q.Get("list-type") != "2" {
				if len(q) == 0 {
					return errorf(ErrNotImplemented, "ListObjects (v1) is not supported: use ListObjectsV2 (list-type=2)")
				}
				return errorf(ErrNotImplemented, "bucket subresource %q is not supported", r.URL.RawQuery)
			}
			return g.listObjects(ctx, w, bucket, q)
		}
		return errorf(ErrMethodNotAllowed, "%s on a bucket", r.Method)
	}
	if e := checkBucketName(bucket); e != nil {
		return e
	}
	if len(key) > maxKeyBytes || !utf8.ValidString(key) {
		return errorf(ErrKeyTooLong, "object keys are at most %d bytes of UTF-8", maxKeyBytes)
	}
	if len(q) > 0 {
		return errorf(ErrNotImplemented, "object subresource or parameter %q is not supported", r.URL.RawQuery)
	}
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return errorf(ErrNotImplemented, "CopyObject is not supported yet")
		}
		return g.putObject(ctx, w, r, bucket, key)
	case http.MethodGet, http.MethodHead:
		return g.getObject(ctx, w, r, bucket, key)
	case http.MethodDelete:
		return g.deleteObject(ctx, w, bucket, key)
	}
	return errorf(ErrMethodNotAllowed, "%s on an object", r.Method)
}

// checkBucketName applies S3's bucket naming rules: 3 to 63 lower-case
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit.
func checkBucketName(b string) *Error {
	ok := len(b) >= 3 && len(b) <= 63
	for i := 0; ok && i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		ok = alnum || (c == '.' || c == '-') && i > 0 && i < len(b)-1
	}
	if !ok {
		return errorf(ErrInvalidBucketName, "bucket name %q: 3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit", b)
	}
	return nil
}

// internal maps a cluster error to an S3 error.
func (g *Gateway) internal(what string, err error) *Error {
	g.opts.Logf("s3: %s: %v", what, err)
	switch {
	case base.IsInvalidArgument(err):
		return errorf(ErrInvalidArgument, "%s: %v", what, err)
	case base.IsNoSpace(err):
		return errorf(ErrServiceUnavailable, "%s: the cluster is out of space", what)
	}
	return errorf(ErrInternal, "%s: %v", what, err)
}

func (g *Gateway) bucketExists(ctx context.Context, bucket string) (time.Time, *Error) {
	v, found, err := g.kv.Get(ctx, bucketKey(bucket))
	if err != nil {
		return time.Time{}, g.internal("bucket "+bucket, err)
	}
	if !found {
		return time.Time{}, errorf(ErrNoSuchBucket, "bucket %q does not exist", bucket)
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return time.Time{}, g.internal("bucket "+bucket, fmt.Errorf("creation time %q: %w", v, err))
	}
	return time.UnixMilli(ms), nil
}

func (g *Gateway) createBucket(ctx context.Context, w http.ResponseWriter, bucket string) *Error {
	now := strconv.FormatInt(g.opts.Clock.Now().UnixMilli(), 10)
	created, err := g.kv.CompareAndSet(ctx, bucketKey(bucket), nil, []byte(now))
	if err != nil {
		return g.internal("create bucket "+bucket, err)
	}
	if !created {
		return errorf(ErrBucketAlreadyOwnedByYou, "bucket %q exists", bucket)
	}
	w.Header().Set("Location", "/"+bucket)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) headBucket(ctx context.Context, w http.ResponseWriter, bucket string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) deleteBucket(ctx context.Context, w http.ResponseWriter, bucket string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	recs, err := g.c.List(ctx, objectKey(bucket, ""))
	if err != nil {
		return g.internal("list bucket "+bucket, err)
	}
	if len(recs) > 0 {
		return errorf(ErrBucketNotEmpty, "bucket %q holds %d objects", bucket, len(recs))
	}
	if _, err := g.kv.Delete(ctx, bucketKey(bucket)); err != nil {
		return g.internal("delete bucket "+bucket, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type bucketXML struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

type listBucketsXML struct {
	XMLName xml.Name    `xml:"ListAllMyBucketsResult"`
	Xmlns   string      `xml:"xmlns,attr"`
	Owner   ownerXML    `xml:"Owner"`
	Buckets []bucketXML `xml:"Buckets>Bucket"`
}

type ownerXML struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

func (g *Gateway) listBuckets(ctx context.Context, w http.ResponseWriter) *Error {
	rows, err := g.kv.Scan(ctx, []byte(bucketPrefix), prefixEnd([]byte(bucketPrefix)), 0)
	if err != nil {
		return g.internal("list buckets", err)
	}
	out := listBucketsXML{Xmlns: xmlns, Owner: ownerXML{ID: g.opts.AccessKey, DisplayName: g.opts.AccessKey}}
	for _, r := range rows {
		ms, _ := strconv.ParseInt(string(r.Value), 10, 64)
		out.Buckets = append(out.Buckets, bucketXML{Name: strings.TrimPrefix(string(r.Key), bucketPrefix), CreationDate: s3Time(time.UnixMilli(ms))})
	}
	return writeXML(w, out)
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// bodyCheck hashes a PUT body as it streams into the cluster and, at its
// end, fails the read (so the write is never committed) when the body is
// not the one the signature or Content-MD5 promised.
type bodyCheck struct {
	r         io.Reader
	sha       hash.Hash // nil: unsigned payload
	wantSHA   string
	md5       hash.Hash
	wantMD5   []byte // nil: no Content-MD5
	n, size   int64
	mismatch  *Error
	finalized bool
}

func (b *bodyCheck) Read(p []byte) (int, error) {
	if b.n >= b.size {
		return 0, b.finish()
	}
	if int64(len(p)) > b.size-b.n {
		p = p[:b.size-b.n]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	b.md5.Write(p[:n])
	if b.sha != nil {
		b.sha.Write(p[:n])
	}
	if errors.Is(err, io.EOF) && b.n < b.size {
		return n, io.ErrUnexpectedEOF
	}
	if b.n >= b.size {
		// NB: the last bytes are withheld when the body does not verify:
		// a reader that asked for exactly the size (io.ReadFull) ignores
		// an error that comes with all the bytes it wanted.
		if e := b.finish(); e != io.EOF {
			return 0, e
		}
	}
	return n, err
}

func (b *bodyCheck) finish() error {
	if !b.finalized {
		b.finalized = true
		if b.sha != nil && hex.EncodeToString(b.sha.Sum(nil)) != b.wantSHA {
			b.mismatch = errorf(ErrXAmzContentSHA256Mismatch, "the body's SHA-256 is not x-amz-content-sha256")
		} else if b.wantMD5 != nil && string(b.md5.Sum(nil)) != string(b.wantMD5) {
			b.mismatch = errorf(ErrBadDigest, "the body's MD5 is not Content-MD5")
		}
	}
	if b.mismatch != nil {
		return b.mismatch
	}
	return io.EOF
}

func (g *Gateway) putObject(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	if r.ContentLength < 0 {
		return errorf(ErrMissingContentLength, "PutObject needs a Content-Length")
	}
	if max := g.c.ClusterInfo().MaxObjectBytes; r.ContentLength > max {
		return errorf(ErrEntityTooLarge, "%d bytes exceed the cluster's object limit of %d", r.ContentLength, max)
	}
	body := &bodyCheck{r: r.Body, md5: md5.New(), size: r.ContentLength}
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != unsignedPayload {
		body.sha, body.wantSHA = sha256.New(), h
	}
	if m := r.Header.Get("Content-Md5"); m != "" {
		sum, err := base64.StdEncoding.DecodeString(m)
		if err != nil || len(sum) != md5.Size {
			return errorf(ErrInvalidArgument, "Content-MD5 %q is not a base64 MD5", m)
		}
		body.wantMD5 = sum
	}
	rec, err := g.c.PutReader(ctx, objectKey(bucket, key), body, r.ContentLength, g.opts.Redundancy)
	if body.mismatch != nil {
		return body.mismatch
	}
	if err != nil {
		return g.internal("put "+bucket+"/"+key, err)
	}
	etag := hex.EncodeToString(body.md5.Sum(nil))
	meta, err := json.Marshal(objectMeta{Version: rec.Version, ETag: etag, ContentType: r.Header.Get("Content-Type")})
	if err != nil {
		return g.internal("put "+bucket+"/"+key, err)
	}
	if _, err := g.kv.Put(ctx, metaKey(bucket, key), meta); err != nil {
		// The object is stored; without its metadata it is served with a
		// version ETag (etagOf) until it is written again.
		g.opts.Logf("s3: metadata of %s/%s: %v", bucket, key, err)
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	w.WriteHeader(http.StatusOK)
	return nil
}

// meta returns the object's stored metadata if it is rec's.
func (g *Gateway) meta(ctx context.Context, bucket, key string, rec *objectpb.ObjectRecord) objectMeta {
	v, found, err := g.kv.Get(ctx, metaKey(bucket, key))
	var m objectMeta
	if err != nil || !found || json.Unmarshal(v, &m) != nil || m.Version != rec.Version {
		// No MD5 recorded for this version: an ETag that still changes
		// with every version.
		return objectMeta{Version: rec.Version, ETag: fmt.Sprintf("v%d", rec.Version)}
	}
	return m
}

// byteRange is an inclusive range of an object's bytes.
type byteRange struct{ start, end int64 }

// parseRange reads a Range header against size: ok false means no range
// (absent or not of the bytes=... form S3 honours: the whole object is
// sent); an unsatisfiable range is InvalidRange.
func parseRange(h string, size int64) (byteRange, bool, *Error) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return byteRange{}, false, nil
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return byteRange{}, false, nil
	}
	var br byteRange
	switch {
	case first == "":
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return byteRange{}, false, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, errorf(ErrInvalidRange, "range %q of a %d-byte object", h, size)
		}
		br = byteRange{max(size-n, 0), size - 1}
	default:
		s, err := strconv.ParseInt(first, 10, 64)
		if err != nil || s < 0 {
			return byteRange{}, false, nil
		}
		e := size - 1
		if last != "" {
			if e, err = strconv.ParseInt(last, 10, 64); err != nil || e < s {
				return byteRange{}, false, nil
			}
		}
		if s >= size {
			return byteRange{}, false, errorf(ErrInvalidRange, "range %q of a %d-byte object", h, size)
		}
		br = byteRange{s, min(e, size-1)}
	}
	return br, true, nil
}

// errRangeDone stops a ranged read once its last byte went out.
var errRangeDone = errors.New("s3: range sent")

// rangeWriter passes on the bytes of [skip, skip+n) of what is written to
// it, and answers the header on the first byte.
type rangeWriter struct {
	w          http.ResponseWriter
	status     int
	skip, n    int64
	sent       int64
	headerSent bool
}

func (rw *rangeWriter) Write(p []byte) (int, error) {
	total := len(p)
	if rw.skip > 0 {
		d := min(rw.skip, int64(len(p)))
		rw.skip -= d
		p = p[d:]
	}
	if int64(len(p)) > rw.n-rw.sent {
		p = p[:rw.n-rw.sent]
	}
	if len(p) > 0 {
		if !rw.headerSent {
			rw.headerSent = true
			rw.w.WriteHeader(rw.status)
		}
		m, err := rw.w.Write(p)
		rw.sent += int64(m)
		if err != nil {
			return 0, err
		}
	}
	if rw.sent == rw.n {
		return total, errRangeDone
	}
	return total, nil
}

func (g *Gateway) getObject(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	rec, err := g.c.Stat(ctx, objectKey(bucket, key))
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(ErrNoSuchKey, "no key %q in bucket %q", key, bucket)
	}
	if err != nil {
		return g.internal("stat "+bucket+"/"+key, err)
	}
	m := g.meta(ctx, bucket, key, rec)
	br, ranged, e := parseRange(r.Header.Get("Range"), rec.SizeBytes)
	if e != nil {
		return e
	}
	h := w.Header()
	h.Set("ETag", `"`+m.ETag+`"`)
	h.Set("Last-Modified", time.UnixMilli(rec.CreatedUnixMs).UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	if m.ContentType != "" {
		h.Set("Content-Type", m.ContentType)
	} else {
		h.Set("Content-Type", "binary/octet-stream")
	}
	status := http.StatusOK
	if !ranged {
		br = byteRange{0, rec.SizeBytes - 1}
	} else {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", br.start, br.end, rec.SizeBytes))
	}
	n := br.end - br.start + 1
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead || n == 0 {
		w.WriteHeader(status)
		return nil
	}
	rw := &rangeWriter{w: w, status: status, skip: br.start, n: n}
	_, err = g.c.ReadVersionTo(ctx, rec, client.ModeDefault, rw)
	if err == nil || errors.Is(err, errRangeDone) {
		if rw.sent == n {
			return nil
		}
		err = fmt.Errorf("read %d of %d bytes", rw.sent, n)
	}
	if !rw.headerSent {
		h.Del("Content-Length")
		h.Del("Content-Range")
		h.Del("ETag")
		if errors.Is(err, fs.ErrNotExist) {
			return errorf(ErrNoSuchKey, "key %q was deleted while it was read", key)
		}
		return g.internal("get "+bucket+"/"+key, err)
	}
	// Bytes went out: cut the connection so that the client sees a short
	// body, never a complete-looking wrong one.
	g.opts.Logf("s3: get %s/%s failed after %d bytes: %v", bucket, key, rw.sent, err)
	panic(http.ErrAbortHandler)
}

func (g *Gateway) deleteObject(ctx context.Context, w http.ResponseWriter, bucket, key string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	if err := g.c.Delete(ctx, objectKey(bucket, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return g.internal("delete "+bucket+"/"+key, err)
	}
	if _, err := g.kv.Delete(ctx, metaKey(bucket, key)); err != nil {
		g.opts.Logf("s3: metadata of %s/%s: %v", bucket, key, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
