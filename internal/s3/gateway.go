package s3

import (
	"context"
	"crypto/rand"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// Redundancy of new objects that do not choose theirs (default REP):
	// a request chooses with x-amz-storage-class, STANDARD for REP (three
	// replicas) or STANDARD_IA for EC (Reed-Solomon 4+2, for colder data).
	Redundancy objectpb.Redundancy
	// MinPartBytes is the smallest a multipart upload's part may be, its
	// last part excepted (default S3's 5 MiB).
	MinPartBytes int64
	// Clock checks request times (default the system clock).
	Clock base.Clock
	// Rand makes upload IDs (default crypto/rand: IDs must not repeat
	// across gateways and restarts).
	Rand io.Reader
	// Logf receives operational messages (nil: discarded).
	Logf func(format string, args ...any)
}

// Gateway serves the S3 API over a flashmend cluster: objects in the object
// store under "s3/BUCKET/KEY" (single part) or "s3m/BUCKET/KEY" (a
// multipart object's manifest, its parts under "s3mp/UPLOADID/"), buckets,
// object metadata and uploads in progress in the KV store (see the package
// doc).
type Gateway struct {
	c    *client.Client
	kv   *retryKV
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
	if opts.MinPartBytes <= 0 {
		opts.MinPartBytes = 5 << 20
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Gateway{c: c, kv: &retryKV{c: kv, logf: opts.Logf}, opts: opts}, nil
}

const (
	objectPrefix   = "s3/"
	manifestPrefix = "s3m/"
	partPrefix     = "s3mp/"
	bucketPrefix   = "s3/bucket/"
	metaPrefix     = "s3/meta/"
	uploadPrefix   = "s3/upload/"
	partRowPrefix  = "s3/part/"
	maxKeyBytes    = 1024
	xmlns          = "http://s3.amazonaws.com/doc/2006-03-01/"
)

func objectKey(bucket, key string) string   { return objectPrefix + bucket + "/" + key }
func manifestKey(bucket, key string) string { return manifestPrefix + bucket + "/" + key }
func metaKey(bucket, key string) []byte     { return []byte(metaPrefix + bucket + "/" + key) }
func bucketKey(bucket string) []byte        { return []byte(bucketPrefix + bucket) }
func uploadKey(upload string) []byte        { return []byte(uploadPrefix + upload) }
func partRowKey(upload string, n int) []byte {
	return []byte(fmt.Sprintf("%s%s/%05d", partRowPrefix, upload, n))
}

// ServeHTTP authenticates the request and dispatches it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := fmt.Sprintf("%016X", g.reqs.Add(1))
	pl, e := g.authenticate(r)
	if e != nil {
		writeError(w, r, e, id)
		return
	}
	if e := g.route(w, r, pl); e != nil {
		writeError(w, r, e, id)
	}
}

// authenticate checks r's signature (header or presigned URL) and returns
// what its body must be.
func (g *Gateway) authenticate(r *http.Request) (payload, *Error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if r.URL.Query().Get("X-Amz-Signature") != "" {
			return verifyPresigned(r, g.opts.AccessKey, g.opts.SecretKey, g.opts.Clock.Now())
		}
		return payload{}, errorf(ErrAccessDenied, "anonymous requests are not allowed: sign with AWS Signature Version 4")
	}
	a, e := parseAuthorization(h)
	if e != nil {
		return payload{}, e
	}
	if a.accessKey != g.opts.AccessKey {
		return payload{}, errorf(ErrInvalidAccessKeyID, "the access key %q is not known", a.accessKey)
	}
	return verify(r, a, g.opts.SecretKey, g.opts.Clock.Now())
}

// operationQuery is r's query without the presigned URL's X-Amz-*
// parameters, and without response-* overrides (GetObject applies them).
func operationQuery(r *http.Request) url.Values {
	q := r.URL.Query()
	for k := range q {
		if strings.HasPrefix(k, "X-Amz-") || strings.HasPrefix(k, "response-") {
			delete(q, k)
		}
	}
	return q
}

// route maps path-style requests (/BUCKET/KEY) to operations.
func (g *Gateway) route(w http.ResponseWriter, r *http.Request, pl payload) *Error {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, hasKey := strings.Cut(path, "/")
	ctx := r.Context()
	q := operationQuery(r)
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
		return g.routeBucket(ctx, w, r, bucket, q, pl)
	}
	if e := checkBucketName(bucket); e != nil {
		return e
	}
	if len(key) > maxKeyBytes || !utf8.ValidString(key) {
		return errorf(ErrKeyTooLong, "object keys are at most %d bytes of UTF-8", maxKeyBytes)
	}
	_, uploads := q["uploads"]
	upload := q.Get("uploadId")
	switch {
	case r.Method == http.MethodPost && uploads && len(q) == 1:
		return g.createUpload(ctx, w, r, bucket, key)
	case r.Method == http.MethodPut && upload != "" && q.Has("partNumber") && len(q) == 2:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return errorf(ErrNotImplemented, "UploadPartCopy is not supported")
		}
		return g.uploadPart(ctx, w, r, bucket, key, upload, q.Get("partNumber"), pl)
	case r.Method == http.MethodPost && upload != "" && len(q) == 1:
		return g.completeUpload(ctx, w, r, bucket, key, upload, pl)
	case r.Method == http.MethodDelete && upload != "" && len(q) == 1:
		return g.abortUpload(ctx, w, bucket, key, upload)
	case r.Method == http.MethodGet && upload != "":
		return g.listParts(ctx, w, bucket, key, upload, q)
	case len(q) > 0:
		return errorf(ErrNotImplemented, "object subresource or parameter %q is not supported", q.Encode())
	}
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return g.copyObject(ctx, w, r, bucket, key)
		}
		return g.putObject(ctx, w, r, bucket, key, pl)
	case http.MethodGet, http.MethodHead:
		return g.getObject(ctx, w, r, bucket, key)
	case http.MethodDelete:
		return g.deleteObject(ctx, w, bucket, key)
	}
	return errorf(ErrMethodNotAllowed, "%s on an object", r.Method)
}

func (g *Gateway) routeBucket(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket string, q url.Values, pl payload) *Error {
	switch r.Method {
	case http.MethodPut:
		if len(q) > 0 {
			return errorf(ErrNotImplemented, "bucket subresource %q is not supported", q.Encode())
		}
		return g.createBucket(ctx, w, bucket)
	case http.MethodHead:
		return g.headBucket(ctx, w, bucket)
	case http.MethodDelete:
		return g.deleteBucket(ctx, w, bucket)
	case http.MethodPost:
		if _, ok := q["delete"]; ok && len(q) == 1 {
			return g.deleteObjects(ctx, w, r, bucket, pl)
		}
		return errorf(ErrNotImplemented, "POST on a bucket with %q is not supported", q.Encode())
	case http.MethodGet:
		if _, ok := q["location"]; ok && len(q) == 1 {
			return g.bucketLocation(ctx, w, bucket)
		}
		if q.Get("list-type") != "2" {
			if len(q) == 0 {
				return errorf(ErrNotImplemented, "ListObjects (v1) is not supported: use ListObjectsV2 (list-type=2)")
			}
			return errorf(ErrNotImplemented, "bucket subresource %q is not supported", q.Encode())
		}
		return g.listObjects(ctx, w, bucket, q)
	}
	return errorf(ErrMethodNotAllowed, "%s on a bucket", r.Method)
}

type locationXML struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
}

// bucketLocation answers GetBucketLocation: every bucket is in the
// cluster's one region, which S3 spells as an empty constraint
// (us-east-1).
func (g *Gateway) bucketLocation(ctx context.Context, w http.ResponseWriter, bucket string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	return writeXML(w, locationXML{Xmlns: xmlns})
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
	case base.IsNoSpace(err):
		// First: a node's full device can come wrapped with an invalid
		// argument from its storage layer; it is the cluster's state, not
		// the request's.
		return errorf(ErrServiceUnavailable, "%s: the cluster is out of space", what)
	case base.IsInvalidArgument(err):
		return errorf(ErrInvalidArgument, "%s: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || status.Code(err) == codes.Unavailable:
		// The cluster did not answer in time (a write's outcome unknown,
		// no replica reachable): S3's "try again", which clients retry.
		return errorf(ErrServiceUnavailable, "%s: the cluster did not answer in time, try again: %v", what, err)
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
	for _, prefix := range []string{objectKey(bucket, ""), manifestKey(bucket, "")} {
		recs, err := g.c.List(ctx, prefix)
		if err != nil {
			return g.internal("list bucket "+bucket, err)
		}
		if len(recs) > 0 {
			return errorf(ErrBucketNotEmpty, "bucket %q holds objects", bucket)
		}
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
