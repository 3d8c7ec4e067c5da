package s3

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

type listObjectsXML struct {
	XMLName               xml.Name     `xml:"ListBucketResult"`
	Xmlns                 string       `xml:"xmlns,attr"`
	Name                  string       `xml:"Name"`
	Prefix                string       `xml:"Prefix"`
	Delimiter             string       `xml:"Delimiter,omitempty"`
	MaxKeys               int          `xml:"MaxKeys"`
	KeyCount              int          `xml:"KeyCount"`
	IsTruncated           bool         `xml:"IsTruncated"`
	ContinuationToken     string       `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string       `xml:"NextContinuationToken,omitempty"`
	StartAfter            string       `xml:"StartAfter,omitempty"`
	Contents              []contentXML `xml:"Contents"`
	CommonPrefixes        []prefixXML  `xml:"CommonPrefixes"`
}

type contentXML struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

type prefixXML struct {
	Prefix string `xml:"Prefix"`
}

// listObjects is ListObjectsV2: keys after the continuation token (or
// start-after) in key order, keys sharing a prefix up to the delimiter
// rolled into one common prefix, at most max-keys entries.
func (g *Gateway) listObjects(ctx context.Context, w http.ResponseWriter, bucket string, q url.Values) *Error {
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	maxKeys := 1000
	if s := q.Get("max-keys"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errorf(ErrInvalidArgument, "max-keys %q is not a non-negative integer", s)
		}
		maxKeys = min(n, 1000)
	}
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	after := q.Get("start-after")
	token := q.Get("continuation-token")
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return errorf(ErrInvalidArgument, "the continuation token is not valid")
		}
		after = string(b)
	}
	entries, e := g.listEntries(ctx, bucket, prefix)
	if e != nil {
		return e
	}
	metas, err := g.kv.Scan(ctx, metaKey(bucket, prefix), prefixEnd(metaKey(bucket, prefix)), 0)
	if err != nil {
		return g.internal("list "+bucket, err)
	}
	etags := map[string]objectMeta{}
	for _, r := range metas {
		var m objectMeta
		if json.Unmarshal(r.Value, &m) == nil {
			etags[strings.TrimPrefix(string(r.Key), metaPrefix+bucket+"/")] = m
		}
	}
	out := listObjectsXML{Xmlns: xmlns, Name: bucket, Prefix: prefix, Delimiter: delim, MaxKeys: maxKeys,
		ContinuationToken: token, StartAfter: q.Get("start-after")}
	last := ""
	for _, ent := range entries {
		key, rec := ent.key, ent.rec
		entry := key
		isPrefix := false
		if delim != "" {
			if i := strings.Index(key[len(prefix):], delim); i >= 0 {
				entry, isPrefix = key[:len(prefix)+i+len(delim)], true
			}
		}
		// A common prefix is listed once: after it, its keys are passed.
		if entry <= after || entry == last {
			continue
		}
		if out.KeyCount == maxKeys {
			out.IsTruncated = true
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(last))
			break
		}
		last = entry
		out.KeyCount++
		if isPrefix {
			out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{Prefix: entry})
			continue
		}
		etag, size := "v"+strconv.FormatUint(rec.Version, 10), rec.SizeBytes
		if m, ok := etags[key]; ok && m.Version == rec.Version {
			etag = m.ETag
			if ent.multipart {
				size = m.Size
			}
		} else if ent.multipart {
			// No metadata row: the manifest has the figures.
			m, err := g.readManifest(ctx, rec)
			if err != nil {
				return g.internal("list "+bucket, err)
			}
			etag, size = m.ETag, m.Size
		}
		out.Contents = append(out.Contents, contentXML{Key: key, LastModified: s3Time(time.UnixMilli(rec.CreatedUnixMs)),
			ETag: `"` + etag + `"`, Size: size, StorageClass: storageClass(rec.Redundancy)})
	}
	return writeXML(w, out)
}

// listEntry is one S3 key of a listing: the version lookup would serve.
type listEntry struct {
	key       string
	rec       *objectpb.ObjectRecord
	multipart bool
}

// listEntries lists BUCKET's keys starting with prefix, in key order,
// single-part and multipart alike (where both exist, the version begun
// last, as lookup resolves it).
func (g *Gateway) listEntries(ctx context.Context, bucket, prefix string) ([]listEntry, *Error) {
	singles, err := g.c.List(ctx, objectKey(bucket, prefix))
	if err != nil {
		return nil, g.internal("list "+bucket, err)
	}
	multis, err := g.c.List(ctx, manifestKey(bucket, prefix))
	if err != nil {
		return nil, g.internal("list "+bucket, err)
	}
	out := make([]listEntry, 0, len(singles)+len(multis))
	i, j := 0, 0
	for i < len(singles) || j < len(multis) {
		var s, m listEntry
		if i < len(singles) {
			s = listEntry{key: strings.TrimPrefix(singles[i].Key, objectKey(bucket, "")), rec: singles[i]}
		}
		if j < len(multis) {
			m = listEntry{key: strings.TrimPrefix(multis[j].Key, manifestKey(bucket, "")), rec: multis[j], multipart: true}
		}
		switch {
		case j == len(multis) || i < len(singles) && s.key < m.key:
			out = append(out, s)
			i++
		case i == len(singles) || m.key < s.key:
			out = append(out, m)
			j++
		default: // both kinds: the newer
			if m.rec.Version > s.rec.Version {
				out = append(out, m)
			} else {
				out = append(out, s)
			}
			i++
			j++
		}
	}
	return out, nil
}

// writeXML answers 200 with v as an XML document.
func writeXML(w http.ResponseWriter, v any) *Error {
	body, err := xml.Marshal(v)
	if err != nil {
		return errorf(ErrInternal, "encode the answer: %v", err)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append([]byte(xml.Header), body...))
	return nil
}
