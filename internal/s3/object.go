package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// objectMeta is what S3 needs of an object that the object store does not
// keep, stored in the KV store under "s3/meta/BUCKET/KEY"; Version binds it
// to one object-store version (of "s3/BUCKET/KEY", or of the manifest
// "s3m/BUCKET/KEY"): an overwrite whose metadata write failed shows no
// stale ETag or headers.
type objectMeta struct {
	Version     uint64 `json:"version"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type,omitempty"`
	// Headers are the stored response headers (Content-Type and the other
	// standard ones, x-amz-meta-*), lower-case names.
	Headers map[string]string `json:"headers,omitempty"`
	// Size is the S3 object's size (a multipart object's, not its
	// manifest's).
	Size int64 `json:"size,omitempty"`
}

// Stored headers: the standard ones S3 keeps with an object, and user
// metadata (x-amz-meta-*), at most maxUserMetaBytes of names and values.
var storedHeaders = []string{"content-type", "content-encoding", "content-disposition", "content-language", "cache-control", "expires"}

const (
	userMetaPrefix   = "x-amz-meta-"
	maxUserMetaBytes = 2 << 10 // S3's limit
)

// requestHeaders returns the headers of r an object keeps.
func requestHeaders(r *http.Request) (map[string]string, *Error) {
	out := map[string]string{}
	for _, h := range storedHeaders {
		v := r.Header.Get(h)
		if h == "content-encoding" {
			// aws-chunked is the request's transfer form, not the object's.
			var kept []string
			for _, enc := range strings.Split(v, ",") {
				if enc = strings.TrimSpace(enc); enc != "" && enc != "aws-chunked" {
					kept = append(kept, enc)
				}
			}
			v = strings.Join(kept, ",")
		}
		if v != "" {
			out[h] = v
		}
	}
	userBytes := 0
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, userMetaPrefix) {
			continue
		}
		v := strings.Join(vs, ",")
		userBytes += len(lk) - len(userMetaPrefix) + len(v)
		out[lk] = v
	}
	if userBytes > maxUserMetaBytes {
		return nil, errorf(ErrMetadataTooLarge, "user metadata of %d bytes exceeds %d", userBytes, maxUserMetaBytes)
	}
	return out, nil
}

// redundancy is the request's choice of REP or EC (x-amz-storage-class),
// or the gateway's default.
func (g *Gateway) redundancy(r *http.Request) (objectpb.Redundancy, *Error) {
	switch sc := r.Header.Get("X-Amz-Storage-Class"); sc {
	case "":
		return g.opts.Redundancy, nil
	case "STANDARD":
		return objectpb.Redundancy_REP, nil
	case "STANDARD_IA":
		return objectpb.Redundancy_EC, nil
	default:
		return 0, &Error{Code: "InvalidStorageClass", Status: http.StatusBadRequest,
			Message: fmt.Sprintf("storage class %q: want STANDARD (3 replicas) or STANDARD_IA (erasure coded 4+2)", sc)}
	}
}

func storageClass(red objectpb.Redundancy) string {
	if red == objectpb.Redundancy_EC {
		return "STANDARD_IA"
	}
	return "STANDARD"
}

// bodyCheck hashes a PUT body as it streams into the cluster and, at its
// end, fails the read (so the write is never committed) when the body is
// not the one the signature or Content-MD5 promised.
type bodyCheck struct {
	r         io.Reader
	sha       hash.Hash // nil: unsigned payload
	wantSHA   string
	md5       hash.Hash
	wantMD5   []byte         // nil: no Content-MD5
	chunked   *chunkedReader // a streaming-signed body: r decodes it
	n, size   int64
	mismatch  *Error
	finalized bool
}

// newBodyCheck checks r's body against pl and its Content-MD5 header.
func newBodyCheck(r *http.Request, pl payload) (*bodyCheck, *Error) {
	if r.ContentLength < 0 {
		return nil, errorf(ErrMissingContentLength, "the request needs a Content-Length")
	}
	body := &bodyCheck{r: r.Body, md5: md5.New(), size: r.ContentLength}
	if pl.sha != "" {
		body.sha, body.wantSHA = sha256.New(), pl.sha
	}
	if pl.chunked != nil {
		n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || n < 0 {
			return nil, errorf(ErrMissingContentLength, "an aws-chunked body needs x-amz-decoded-content-length")
		}
		body.chunked = newChunkedReader(r.Body, pl.chunked)
		body.r, body.size = body.chunked, n
	}
	if m := r.Header.Get("Content-Md5"); m != "" {
		sum, err := base64.StdEncoding.DecodeString(m)
		if err != nil || len(sum) != md5.Size {
			return nil, errorf(ErrInvalidDigest, "Content-MD5 %q is not a base64 MD5", m)
		}
		body.wantMD5 = sum
	}
	return body, nil
}

// bodySize is the size of r's object data (an aws-chunked body's decoded
// size), -1 if unknown.
func bodySize(r *http.Request) int64 {
	if strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return r.ContentLength
}

func (b *bodyCheck) Read(p []byte) (int, error) {
	if b.n >= b.size {
		return 0, b.finish()
	}
	if int64(len(p)) > b.size-b.n {
		p = p[:b.size-b.n]
	}
	n, err := b.r.Read(p)
	var e *Error
	if errors.As(err, &e) { // the aws-chunked body's signature or format
		b.mismatch, b.finalized = e, true
		return 0, e
	}
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
		if b.chunked != nil {
			// The decoded size is reached: the body must end here, with
			// its signed final chunk.
			if n, err := b.chunked.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				var e *Error
				if !errors.As(err, &e) {
					e = errorf(ErrInvalidRequest, "the aws-chunked body is longer than x-amz-decoded-content-length")
				}
				b.mismatch = e
				return e
			}
		}
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

// readBody reads a small request body (an XML document) of at most limit
// bytes, checked like any body.
func readBody(r *http.Request, pl payload, limit int64) ([]byte, *Error) {
	if bodySize(r) > limit {
		return nil, errorf(ErrMalformedXML, "a request document of %d bytes exceeds %d", bodySize(r), limit)
	}
	if bodySize(r) < 0 {
		return nil, errorf(ErrMissingContentLength, "the request needs a Content-Length")
	}
	body, e := newBodyCheck(r, pl)
	if e != nil {
		return nil, e
	}
	b, err := io.ReadAll(body)
	if body.mismatch != nil {
		return nil, body.mismatch
	}
	if err != nil {
		return nil, errorf(ErrIncompleteBody, "reading the request body: %v", err)
	}
	return b, nil
}

func (g *Gateway) putObject(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string, pl payload) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	headers, e := requestHeaders(r)
	if e != nil {
		return e
	}
	red, e := g.redundancy(r)
	if e != nil {
		return e
	}
	size := bodySize(r)
	if size < 0 {
		return errorf(ErrMissingContentLength, "PutObject needs a Content-Length")
	}
	if max := g.c.ClusterInfo().MaxObjectBytes; size > max {
		return errorf(ErrEntityTooLarge, "%d bytes exceed the cluster's single-part object limit of %d (use a multipart upload)", size, max)
	}
	body, e := newBodyCheck(r, pl)
	if e != nil {
		return e
	}
	rec, err := g.c.PutReader(ctx, objectKey(bucket, key), body, body.size, red)
	if body.mismatch != nil {
		return body.mismatch
	}
	if err != nil {
		return g.internal("put "+bucket+"/"+key, err)
	}
	etag := hex.EncodeToString(body.md5.Sum(nil))
	g.putMeta(ctx, bucket, key, objectMeta{Version: rec.Version, ETag: etag, Headers: headers, Size: rec.SizeBytes})
	g.dropOlderManifest(ctx, bucket, key, rec.Version)
	w.Header().Set("ETag", `"`+etag+`"`)
	w.WriteHeader(http.StatusOK)
	return nil
}

// putMeta stores an object version's metadata. A failure is logged: the
// object is stored, and is served without its metadata (a version ETag,
// see lookup) until it is written again.
func (g *Gateway) putMeta(ctx context.Context, bucket, key string, m objectMeta) {
	b, err := json.Marshal(m)
	if err == nil {
		_, err = g.kv.Put(ctx, metaKey(bucket, key), b)
	}
	if err != nil {
		g.opts.Logf("s3: metadata of %s/%s: %v", bucket, key, err)
	}
}

// object is an S3 object as lookup resolved it.
type object struct {
	// rec is the version served: of "s3/BUCKET/KEY", or of the manifest
	// "s3m/BUCKET/KEY" when manifest is set.
	rec      *objectpb.ObjectRecord
	manifest *manifest
	size     int64
	etag     string
	headers  map[string]string
}

func (o *object) modified() time.Time { return time.UnixMilli(o.rec.CreatedUnixMs) }

// stat is the client's Stat, nil for a missing key.
func (g *Gateway) stat(ctx context.Context, key string) (*objectpb.ObjectRecord, error) {
	rec, err := g.c.Stat(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return rec, err
}

// lookup resolves BUCKET/KEY: a single-part object, a multipart object's
// manifest, or (after a crash between an overwrite of one kind by the
// other and the removal of the older) both, of which the version begun
// last is the object.
func (g *Gateway) lookup(ctx context.Context, bucket, key string) (*object, *Error) {
	single, err := g.stat(ctx, objectKey(bucket, key))
	if err != nil {
		return nil, g.internal("stat "+bucket+"/"+key, err)
	}
	multi, err := g.stat(ctx, manifestKey(bucket, key))
	if err != nil {
		return nil, g.internal("stat "+bucket+"/"+key, err)
	}
	if single == nil && multi == nil {
		return nil, errorf(ErrNoSuchKey, "no key %q in bucket %q", key, bucket)
	}
	if multi != nil && (single == nil || multi.Version > single.Version) {
		m, err := g.readManifest(ctx, multi)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrNoSuchKey, "key %q was deleted while it was read", key)
		}
		if err != nil {
			return nil, g.internal("manifest of "+bucket+"/"+key, err)
		}
		return &object{rec: multi, manifest: m, size: m.Size, etag: m.ETag, headers: m.Headers}, nil
	}
	m := g.meta(ctx, bucket, key, single)
	return &object{rec: single, size: single.SizeBytes, etag: m.ETag, headers: m.Headers}, nil
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
	if m.Headers == nil && m.ContentType != "" { // rows of the first slice
		m.Headers = map[string]string{"content-type": m.ContentType}
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

// response is where an object's bytes go: a GET's answer, whose status
// and headers go out with the first byte (begin), or a copy's pipe.
type response struct {
	w          io.Writer
	begin      func() // nil: nothing to send first
	headerSent bool
	sent       int64
}

func (rs *response) write(p []byte) error {
	if !rs.headerSent {
		rs.headerSent = true
		if rs.begin != nil {
			rs.begin()
		}
	}
	m, err := rs.w.Write(p)
	rs.sent += int64(m)
	return err
}

// rangeWriter passes on to the response the bytes of [skip, skip+n) of
// what is written to it (one stored version's bytes).
type rangeWriter struct {
	rs      *response
	skip, n int64
	sent    int64
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
		if err := rw.rs.write(p); err != nil {
			return 0, err
		}
		rw.sent += int64(len(p))
	}
	if rw.sent == rw.n {
		return total, errRangeDone
	}
	return total, nil
}

// readRange sends br of stored version rec (bytes from its start) to rs.
func (g *Gateway) readRange(ctx context.Context, rec *objectpb.ObjectRecord, br byteRange, rs *response) error {
	n := br.end - br.start + 1
	rw := &rangeWriter{rs: rs, skip: br.start, n: n}
	_, err := g.c.ReadVersionTo(ctx, rec, client.ModeDefault, rw)
	if err == nil || errors.Is(err, errRangeDone) {
		if rw.sent == n {
			return nil
		}
		return fmt.Errorf("read %d of %d bytes", rw.sent, n)
	}
	return err
}

// send streams br of o to rs: one version, or the parts br spans.
func (g *Gateway) send(ctx context.Context, o *object, br byteRange, rs *response) error {
	if o.manifest == nil {
		return g.readRange(ctx, o.rec, br, rs)
	}
	parts := o.manifest.Parts
	// The first part that ends after br.start.
	i := sort.Search(len(parts), func(i int) bool { return parts[i].Offset+parts[i].Size > br.start })
	for ; i < len(parts) && parts[i].Offset <= br.end; i++ {
		p := parts[i]
		rec, err := g.partVersion(ctx, p)
		if err != nil {
			return err
		}
		pr := byteRange{max(br.start-p.Offset, 0), min(br.end-p.Offset, p.Size-1)}
		if err := g.readRange(ctx, rec, pr, rs); err != nil {
			return fmt.Errorf("part %d: %w", p.Number, err)
		}
	}
	return nil
}

func (g *Gateway) getObject(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	o, e := g.lookup(ctx, bucket, key)
	if e != nil {
		return e
	}
	br, ranged, e := parseRange(r.Header.Get("Range"), o.size)
	if e != nil {
		return e
	}
	h := w.Header()
	setObjectHeaders(h, o)
	// Presigned GETs may override response headers (response-content-type
	// and friends), as S3 allows.
	for k, vs := range r.URL.Query() {
		if name, ok := strings.CutPrefix(k, "response-"); ok && len(vs) > 0 {
			switch name {
			case "content-type", "content-language", "expires", "cache-control", "content-disposition", "content-encoding":
				h.Set(name, vs[0])
			}
		}
	}
	status := http.StatusOK
	if !ranged {
		br = byteRange{0, o.size - 1}
	} else {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", br.start, br.end, o.size))
	}
	n := br.end - br.start + 1
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead || n == 0 {
		w.WriteHeader(status)
		return nil
	}
	rs := &response{w: w, begin: func() { w.WriteHeader(status) }}
	err := g.send(ctx, o, br, rs)
	if err == nil {
		return nil
	}
	if !rs.headerSent {
		for _, k := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified"} {
			h.Del(k)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return errorf(ErrNoSuchKey, "key %q was deleted while it was read", key)
		}
		return g.internal("get "+bucket+"/"+key, err)
	}
	// Bytes went out: cut the connection so that the client sees a short
	// body, never a complete-looking wrong one.
	g.opts.Logf("s3: get %s/%s failed after %d bytes: %v", bucket, key, rs.sent, err)
	panic(http.ErrAbortHandler)
}

// setObjectHeaders sets the headers GET and HEAD answer for o.
func setObjectHeaders(h http.Header, o *object) {
	h.Set("ETag", `"`+o.etag+`"`)
	h.Set("Last-Modified", o.modified().UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "binary/octet-stream")
	for k, v := range o.headers {
		if strings.HasPrefix(k, userMetaPrefix) {
			// As S3 answers them: lower case, which clients hand on as
			// the metadata's names (h.Set would capitalize them).
			h[k] = []string{v}
			continue
		}
		h.Set(k, v)
	}
	if o.rec.Redundancy == objectpb.Redundancy_EC {
		h.Set("X-Amz-Storage-Class", storageClass(o.rec.Redundancy))
	}
	if o.manifest != nil {
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(len(o.manifest.Parts)))
	}
}

func (g *Gateway) deleteObject(ctx context.Context, w http.ResponseWriter, bucket, key string) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	if e := g.removeObject(ctx, bucket, key); e != nil {
		return e
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeObject deletes BUCKET/KEY of either kind (a missing key is no
// error, as in S3), a multipart object's parts with it.
func (g *Gateway) removeObject(ctx context.Context, bucket, key string) *Error {
	if err := g.c.Delete(ctx, objectKey(bucket, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return g.internal("delete "+bucket+"/"+key, err)
	}
	if err := g.dropManifest(ctx, bucket, key, 0); err != nil {
		return g.internal("delete "+bucket+"/"+key, err)
	}
	if _, err := g.kv.Delete(ctx, metaKey(bucket, key)); err != nil {
		g.opts.Logf("s3: metadata of %s/%s: %v", bucket, key, err)
	}
	return nil
}
