package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// Multipart uploads. An upload in progress is the KV row
// "s3/upload/UPLOADID" (uploadState); each uploaded part is an object
// "s3mp/UPLOADID/NNNNN-RANDOM" (a fresh key per upload of a part, so that
// an object a completed manifest names is never overwritten) and the KV
// row "s3/part/UPLOADID/NNNNN" naming the part's current object, version,
// size and MD5. Completing writes the manifest object "s3m/BUCKET/KEY"
// listing the parts, in order, by object key and version; a GET streams
// them one after the other. No part is ever copied, so neither completing
// nor reading a 5 GiB object holds more of it than one part's read window.

const (
	maxParts = 10000
	// maxPartBytes is S3's part limit; the cluster's object limit may be
	// lower.
	maxPartBytes = 5 << 30
	// maxManifestBytes bounds a manifest (10,000 parts of about 150 bytes
	// of JSON each).
	maxManifestBytes = 4 << 20
	// maxCompleteBytes bounds a CompleteMultipartUpload document (10,000
	// parts of about 100 bytes).
	maxCompleteBytes = 2 << 20
	// completionClaimTTL is how long a completion's claim on an upload
	// holds off other completions and aborts; a claim older than this was
	// left by a gateway that failed mid-way.
	completionClaimTTL = 15 * time.Minute
)

// uploadState is an upload in progress.
type uploadState struct {
	Bucket      string            `json:"bucket"`
	Key         string            `json:"key"`
	InitiatedMs int64             `json:"initiated_ms"`
	Headers     map[string]string `json:"headers,omitempty"`
	Redundancy  int32             `json:"redundancy"`
	// CompletingMs, when set, is when a completion claimed the upload.
	CompletingMs int64 `json:"completing_ms,omitempty"`
}

// partRow is an uploaded part's current object.
type partRow struct {
	Key        string `json:"key"`
	Version    uint64 `json:"version"`
	Size       int64  `json:"size"`
	ETag       string `json:"etag"`
	ModifiedMs int64  `json:"modified_ms"`
}

// manifest is a completed multipart object: its parts in order.
type manifest struct {
	UploadID string            `json:"upload_id"`
	Size     int64             `json:"size"`
	ETag     string            `json:"etag"`
	Headers  map[string]string `json:"headers,omitempty"`
	Parts    []manifestPart    `json:"parts"`
}

type manifestPart struct {
	Number  int    `json:"number"`
	Key     string `json:"key"`
	Version uint64 `json:"version"`
	// Offset is the part's first byte in the object.
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	ETag   string `json:"etag"`
}

func (g *Gateway) readManifest(ctx context.Context, rec *objectpb.ObjectRecord) (*manifest, error) {
	if rec.SizeBytes > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s of %d bytes exceeds %d", rec.Key, rec.SizeBytes, maxManifestBytes)
	}
	b, _, err := g.c.ReadVersion(ctx, rec, "")
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", rec.Key, err)
	}
	return &m, nil
}

// partVersion is the stored version of part p, which must be the one the
// manifest names.
func (g *Gateway) partVersion(ctx context.Context, p manifestPart) (*objectpb.ObjectRecord, error) {
	rec, err := g.stat(ctx, p.Key)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Version != p.Version {
		// Only a delete or overwrite of the object removes its parts.
		return nil, fmt.Errorf("part %d (%s version %d) is gone: %w", p.Number, p.Key, p.Version, fs.ErrNotExist)
	}
	return rec, nil
}

// dropManifest deletes the manifest "s3m/BUCKET/KEY" and the parts of its
// upload; when below is not 0 it deletes only a manifest of a version
// below it (one that a newer single-part write replaced).
func (g *Gateway) dropManifest(ctx context.Context, bucket, key string, below uint64) error {
	mk := manifestKey(bucket, key)
	rec, err := g.stat(ctx, mk)
	if err != nil || rec == nil {
		return err
	}
	if below != 0 && rec.Version >= below {
		return nil
	}
	m, readErr := g.readManifest(ctx, rec)
	removed, err := g.c.DeleteKey(ctx, mk)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case readErr != nil:
		g.opts.Logf("s3: %s deleted; its parts are left behind (its manifest did not read: %v)", mk, readErr)
	case removed.Version != rec.Version:
		g.opts.Logf("s3: %s: a newer manifest (version %d) was deleted in a race; its parts are left behind", mk, removed.Version)
	default:
		g.dropPartObjects(ctx, m.UploadID, nil)
	}
	return nil
}

// dropOlderManifest removes a multipart object that the single-part
// version just written replaced (logged on failure: the older one is
// never served, see lookup).
func (g *Gateway) dropOlderManifest(ctx context.Context, bucket, key string, version uint64) {
	if err := g.dropManifest(ctx, bucket, key, version); err != nil {
		g.opts.Logf("s3: removing the replaced multipart %s/%s: %v", bucket, key, err)
	}
}

// dropPartObjects deletes an upload's part objects but those keep names;
// failures are logged (the parts are garbage, never served).
func (g *Gateway) dropPartObjects(ctx context.Context, upload string, keep map[string]bool) {
	recs, err := g.c.List(ctx, partPrefix+upload+"/")
	if err != nil {
		g.opts.Logf("s3: listing the parts of upload %s: %v", upload, err)
		return
	}
	for _, rec := range recs {
		if keep[rec.Key] {
			continue
		}
		if err := g.c.Delete(ctx, rec.Key); err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.opts.Logf("s3: deleting part %s: %v", rec.Key, err)
		}
	}
}

// dropPartRows deletes an upload's part rows (logged on failure).
func (g *Gateway) dropPartRows(ctx context.Context, upload string) {
	start := partRowKey(upload, 0)
	start = start[:len(start)-5]
	rows, err := g.kv.Scan(ctx, start, prefixEnd(start), 0)
	if err == nil {
		for _, r := range rows {
			if _, err = g.kv.Delete(ctx, r.Key); err != nil {
				break
			}
		}
	}
	if err != nil {
		g.opts.Logf("s3: deleting the part rows of upload %s: %v", upload, err)
	}
}

func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// getUpload reads upload id, which must be BUCKET/KEY's.
func (g *Gateway) getUpload(ctx context.Context, bucket, key, id string) (uploadState, []byte, *Error) {
	var u uploadState
	if !validUploadID(id) {
		return u, nil, errorf(ErrNoSuchUpload, "upload %q does not exist", id)
	}
	raw, found, err := g.kv.Get(ctx, uploadKey(id))
	if err != nil {
		return u, nil, g.internal("upload "+id, err)
	}
	if !found {
		if _, e := g.bucketExists(ctx, bucket); e != nil {
			return u, nil, e
		}
		return u, nil, errorf(ErrNoSuchUpload, "upload %q does not exist (completed or aborted?)", id)
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return u, nil, g.internal("upload "+id, err)
	}
	if u.Bucket != bucket || u.Key != key {
		return u, nil, errorf(ErrNoSuchUpload, "upload %q is not one of %s/%s", id, bucket, key)
	}
	return u, raw, nil
}

// claimed reports whether a live completion holds u.
func (g *Gateway) claimed(u uploadState) bool {
	return u.CompletingMs != 0 && g.opts.Clock.Now().Sub(time.UnixMilli(u.CompletingMs)) < completionClaimTTL
}

type initiateXML struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

func (g *Gateway) createUpload(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string) *Error {
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
	var idBytes [16]byte
	if _, err := io.ReadFull(g.opts.Rand, idBytes[:]); err != nil {
		return g.internal("upload id", err)
	}
	id := hex.EncodeToString(idBytes[:])
	u := uploadState{Bucket: bucket, Key: key, InitiatedMs: g.opts.Clock.Now().UnixMilli(), Headers: headers, Redundancy: int32(red)}
	b, err := json.Marshal(u)
	if err != nil {
		return g.internal("create upload", err)
	}
	created, err := g.kv.CompareAndSet(ctx, uploadKey(id), nil, b)
	if err != nil {
		return g.internal("create upload", err)
	}
	if !created {
		return g.internal("create upload", fmt.Errorf("upload id %s exists", id))
	}
	return writeXML(w, initiateXML{Xmlns: xmlns, Bucket: bucket, Key: key, UploadID: id})
}

func parsePartNumber(s string) (int, *Error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxParts {
		return 0, errorf(ErrInvalidArgument, "part number %q: want 1 to %d", s, maxParts)
	}
	return n, nil
}

func (g *Gateway) uploadPart(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key, id, number string, pl payload) *Error {
	n, e := parsePartNumber(number)
	if e != nil {
		return e
	}
	u, _, e := g.getUpload(ctx, bucket, key, id)
	if e != nil {
		return e
	}
	if g.claimed(u) {
		return errorf(ErrNoSuchUpload, "upload %q is being completed", id)
	}
	size := bodySize(r)
	if size < 0 {
		return errorf(ErrMissingContentLength, "UploadPart needs a Content-Length")
	}
	if limit := min(g.c.ClusterInfo().MaxObjectBytes, maxPartBytes); size > limit {
		return errorf(ErrEntityTooLarge, "a part of %d bytes exceeds the limit of %d", size, limit)
	}
	body, e := newBodyCheck(r, pl)
	if e != nil {
		return e
	}
	var suffix [8]byte
	if _, err := io.ReadFull(g.opts.Rand, suffix[:]); err != nil {
		return g.internal("part key", err)
	}
	pk := fmt.Sprintf("%s%s/%05d-%s", partPrefix, id, n, hex.EncodeToString(suffix[:]))
	rec, err := g.c.PutReader(ctx, pk, body, body.size, objectpb.Redundancy(u.Redundancy))
	if body.mismatch != nil {
		return body.mismatch
	}
	if err != nil {
		return g.internal(fmt.Sprintf("upload part %d of %s", n, id), err)
	}
	etag := hex.EncodeToString(body.md5.Sum(nil))
	row, err := json.Marshal(partRow{Key: pk, Version: rec.Version, Size: rec.SizeBytes, ETag: etag, ModifiedMs: rec.CreatedUnixMs})
	if err == nil {
		_, err = g.kv.Put(ctx, partRowKey(id, n), row)
	}
	if err != nil {
		// The part object is garbage, removed when the upload ends.
		return g.internal(fmt.Sprintf("upload part %d of %s", n, id), err)
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	w.WriteHeader(http.StatusOK)
	return nil
}

// partRows reads an upload's part rows by number.
func (g *Gateway) partRows(ctx context.Context, id string) (map[int]partRow, *Error) {
	start := partRowKey(id, 0)
	start = start[:len(start)-5]
	rows, err := g.kv.Scan(ctx, start, prefixEnd(start), 0)
	if err != nil {
		return nil, g.internal("parts of "+id, err)
	}
	out := map[int]partRow{}
	for _, kv := range rows {
		n, err := strconv.Atoi(string(kv.Key[len(start):]))
		var p partRow
		if err != nil || json.Unmarshal(kv.Value, &p) != nil {
			return nil, g.internal("parts of "+id, fmt.Errorf("malformed part row %q", kv.Key))
		}
		out[n] = p
	}
	return out, nil
}

type completeXML struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	} `xml:"Part"`
}

type completeResultXML struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

// planManifest checks the parts a completion names against the uploaded
// ones and returns the object's manifest.
func (g *Gateway) planManifest(ctx context.Context, id string, doc completeXML, rows map[int]partRow) (*manifest, *Error) {
	if len(doc.Parts) == 0 {
		return nil, errorf(ErrMalformedXML, "a completion names at least one part")
	}
	if len(doc.Parts) > maxParts {
		return nil, errorf(ErrMalformedXML, "a completion names at most %d parts", maxParts)
	}
	m := &manifest{UploadID: id}
	sums := md5.New()
	for i, p := range doc.Parts {
		if i > 0 && p.PartNumber <= doc.Parts[i-1].PartNumber {
			return nil, errorf(ErrInvalidPartOrder, "part %d follows part %d: parts must be in ascending order", p.PartNumber, doc.Parts[i-1].PartNumber)
		}
		if row, ok := rows[p.PartNumber]; !ok || strings.Trim(p.ETag, `"`) != row.ETag {
			return nil, errorf(ErrInvalidPart, "part %d with ETag %s was not uploaded", p.PartNumber, p.ETag)
		}
	}
	for i, p := range doc.Parts {
		row := rows[p.PartNumber]
		if i < len(doc.Parts)-1 && row.Size < g.opts.MinPartBytes {
			return nil, errorf(ErrEntityTooSmall, "part %d is %d bytes; every part but the last needs at least %d", p.PartNumber, row.Size, g.opts.MinPartBytes)
		}
		rec, err := g.stat(ctx, row.Key)
		if err != nil {
			return nil, g.internal("part "+row.Key, err)
		}
		if rec == nil || rec.Version != row.Version {
			return nil, errorf(ErrInvalidPart, "part %d was not stored (uploaded again?)", p.PartNumber)
		}
		sum, err := hex.DecodeString(row.ETag)
		if err != nil {
			return nil, g.internal("part "+row.Key, err)
		}
		sums.Write(sum)
		m.Parts = append(m.Parts, manifestPart{Number: p.PartNumber, Key: row.Key, Version: row.Version, Offset: m.Size, Size: row.Size, ETag: row.ETag})
		m.Size += row.Size
	}
	// S3's multipart ETag: the MD5 of the parts' MD5s, and their count.
	m.ETag = fmt.Sprintf("%s-%d", hex.EncodeToString(sums.Sum(nil)), len(m.Parts))
	return m, nil
}

func (g *Gateway) completeUpload(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key, id string, pl payload) *Error {
	body, e := readBody(r, pl, maxCompleteBytes)
	if e != nil {
		return e
	}
	var doc completeXML
	if err := xml.Unmarshal(body, &doc); err != nil {
		return errorf(ErrMalformedXML, "the completion document: %v", err)
	}
	u, raw, e := g.getUpload(ctx, bucket, key, id)
	if e != nil {
		return e
	}
	if g.claimed(u) {
		return errorf(ErrNoSuchUpload, "upload %q is being completed", id)
	}
	rows, e := g.partRows(ctx, id)
	if e != nil {
		return e
	}
	m, e := g.planManifest(ctx, id, doc, rows)
	if e != nil {
		return e
	}
	m.Headers = u.Headers
	// Claim the upload, so that no other completion or abort races this
	// one (an abort would delete the parts the manifest names).
	u.CompletingMs = g.opts.Clock.Now().UnixMilli()
	claim, err := json.Marshal(u)
	if err != nil {
		return g.internal("complete "+id, err)
	}
	ok, err := g.kv.CompareAndSet(ctx, uploadKey(id), raw, claim)
	if err != nil {
		return g.internal("complete "+id, err)
	}
	if !ok {
		return errorf(ErrNoSuchUpload, "upload %q was completed or aborted meanwhile", id)
	}
	// The manifest this one replaces, if any: its parts go with it.
	var replaced *manifest
	if old, err := g.stat(ctx, manifestKey(bucket, key)); err == nil && old != nil {
		if replaced, err = g.readManifest(ctx, old); err != nil {
			g.opts.Logf("s3: the manifest %s replaces did not read (its parts will be left behind): %v", old.Key, err)
		}
	}
	mb, err := json.Marshal(m)
	if err == nil {
		var rec *objectpb.ObjectRecord
		rec, err = g.c.PutReader(ctx, manifestKey(bucket, key), bytes.NewReader(mb), int64(len(mb)), objectpb.Redundancy_REP)
		if err == nil {
			g.finishCompletion(ctx, bucket, key, id, m, rec, claim)
			if replaced != nil && replaced.UploadID != id {
				g.dropPartObjects(ctx, replaced.UploadID, nil)
			}
		}
	}
	if err != nil {
		// Release the claim: the client may try again.
		if _, cerr := g.kv.CompareAndSet(ctx, uploadKey(id), claim, raw); cerr != nil {
			g.opts.Logf("s3: releasing upload %s after a failed completion: %v", id, cerr)
		}
		return g.internal("complete "+id, err)
	}
	loc := "/" + bucket + "/" + (&url.URL{Path: key}).EscapedPath()
	return writeXML(w, completeResultXML{Xmlns: xmlns, Location: loc, Bucket: bucket, Key: key, ETag: `"` + m.ETag + `"`})
}

// finishCompletion records a committed manifest's metadata and removes
// what it replaced and what the upload left over; failures are logged
// (what is left is garbage, never served).
func (g *Gateway) finishCompletion(ctx context.Context, bucket, key, id string, m *manifest, rec *objectpb.ObjectRecord, claim []byte) {
	g.putMeta(ctx, bucket, key, objectMeta{Version: rec.Version, ETag: m.ETag, Headers: m.Headers, Size: m.Size})
	// A single-part version begun before this manifest is replaced.
	if single, err := g.stat(ctx, objectKey(bucket, key)); err == nil && single != nil && single.Version < rec.Version {
		if err := g.c.Delete(ctx, objectKey(bucket, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.opts.Logf("s3: removing the replaced %s/%s: %v", bucket, key, err)
		}
	}
	keep := map[string]bool{}
	for _, p := range m.Parts {
		keep[p.Key] = true
	}
	g.dropPartObjects(ctx, id, keep)
	g.dropPartRows(ctx, id)
	if ok, err := g.kv.DeleteIf(ctx, uploadKey(id), claim); err != nil || !ok {
		g.opts.Logf("s3: removing completed upload %s: %v (held by another claim: %v)", id, err, !ok && err == nil)
	}
}

func (g *Gateway) abortUpload(ctx context.Context, w http.ResponseWriter, bucket, key, id string) *Error {
	u, raw, e := g.getUpload(ctx, bucket, key, id)
	if e != nil {
		return e
	}
	if g.claimed(u) {
		return errorf(ErrInvalidRequest, "upload %q is being completed", id)
	}
	ok, err := g.kv.DeleteIf(ctx, uploadKey(id), raw)
	if err != nil {
		return g.internal("abort "+id, err)
	}
	if !ok {
		return errorf(ErrNoSuchUpload, "upload %q was completed or aborted meanwhile", id)
	}
	g.dropPartObjects(ctx, id, nil)
	g.dropPartRows(ctx, id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type listPartsXML struct {
	XMLName              xml.Name  `xml:"ListPartsResult"`
	Xmlns                string    `xml:"xmlns,attr"`
	Bucket               string    `xml:"Bucket"`
	Key                  string    `xml:"Key"`
	UploadID             string    `xml:"UploadId"`
	Initiator            ownerXML  `xml:"Initiator"`
	Owner                ownerXML  `xml:"Owner"`
	StorageClass         string    `xml:"StorageClass"`
	PartNumberMarker     int       `xml:"PartNumberMarker"`
	NextPartNumberMarker int       `xml:"NextPartNumberMarker"`
	MaxParts             int       `xml:"MaxParts"`
	IsTruncated          bool      `xml:"IsTruncated"`
	Parts                []partXML `xml:"Part"`
}

type partXML struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
}

func (g *Gateway) listParts(ctx context.Context, w http.ResponseWriter, bucket, key, id string, q url.Values) *Error {
	u, _, e := g.getUpload(ctx, bucket, key, id)
	if e != nil {
		return e
	}
	maxP, marker := 1000, 0
	if s := q.Get("max-parts"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errorf(ErrInvalidArgument, "max-parts %q is not a non-negative integer", s)
		}
		maxP = min(n, 1000)
	}
	if s := q.Get("part-number-marker"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errorf(ErrInvalidArgument, "part-number-marker %q is not a non-negative integer", s)
		}
		marker = n
	}
	rows, e := g.partRows(ctx, id)
	if e != nil {
		return e
	}
	numbers := make([]int, 0, len(rows))
	for n := range rows {
		if n > marker {
			numbers = append(numbers, n)
		}
	}
	sort.Ints(numbers)
	owner := ownerXML{ID: g.opts.AccessKey, DisplayName: g.opts.AccessKey}
	out := listPartsXML{Xmlns: xmlns, Bucket: bucket, Key: key, UploadID: id, Initiator: owner, Owner: owner,
		StorageClass: storageClass(objectpb.Redundancy(u.Redundancy)), PartNumberMarker: marker, MaxParts: maxP}
	for _, n := range numbers {
		if len(out.Parts) == maxP {
			out.IsTruncated = true
			break
		}
		p := rows[n]
		out.Parts = append(out.Parts, partXML{PartNumber: n, LastModified: s3Time(time.UnixMilli(p.ModifiedMs)), ETag: `"` + p.ETag + `"`, Size: p.Size})
		out.NextPartNumberMarker = n
	}
	return writeXML(w, out)
}
