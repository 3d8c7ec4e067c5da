package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

type copyResultXML struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

// parseCopySource reads x-amz-copy-source: "BUCKET/KEY" or "/BUCKET/KEY",
// URL-encoded.
func parseCopySource(h string) (bucket, key string, e *Error) {
	src, query, _ := strings.Cut(h, "?")
	if query != "" {
		return "", "", errorf(ErrNotImplemented, "copy source %q: versions are not supported", h)
	}
	dec, err := url.PathUnescape(strings.TrimPrefix(src, "/"))
	if err != nil {
		return "", "", errorf(ErrInvalidArgument, "copy source %q is not URL-encoded", h)
	}
	bucket, key, ok := strings.Cut(dec, "/")
	if !ok || key == "" {
		return "", "", errorf(ErrInvalidArgument, "copy source %q: want BUCKET/KEY", h)
	}
	if e := checkBucketName(bucket); e != nil {
		return "", "", e
	}
	if len(key) > maxKeyBytes || !utf8.ValidString(key) {
		return "", "", errorf(ErrKeyTooLong, "object keys are at most %d bytes of UTF-8", maxKeyBytes)
	}
	return bucket, key, nil
}

// copyObject is CopyObject: the source's bytes (a single-part object or
// every part of a multipart one) stream from the cluster into a new
// single-part version of the destination, never held whole; its ETag is
// the MD5 of the bytes, as S3 gives a copy.
func (g *Gateway) copyObject(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket, key string) *Error {
	for h := range r.Header {
		if strings.HasPrefix(strings.ToLower(h), "x-amz-copy-source-") {
			return errorf(ErrNotImplemented, "conditional copies (%s) are not supported", h)
		}
	}
	srcBucket, srcKey, e := parseCopySource(r.Header.Get("X-Amz-Copy-Source"))
	if e != nil {
		return e
	}
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	if _, e := g.bucketExists(ctx, srcBucket); e != nil {
		return e
	}
	red, e := g.redundancy(r)
	if e != nil {
		return e
	}
	src, e := g.lookup(ctx, srcBucket, srcKey)
	if e != nil {
		return e
	}
	headers := src.headers
	switch d := r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if srcBucket == bucket && srcKey == key && r.Header.Get("X-Amz-Storage-Class") == "" {
			return errorf(ErrInvalidRequest, "this copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class or encryption attributes")
		}
	case "REPLACE":
		if headers, e = requestHeaders(r); e != nil {
			return e
		}
	default:
		return errorf(ErrInvalidArgument, "x-amz-metadata-directive %q: want COPY or REPLACE", d)
	}
	if max := g.c.ClusterInfo().MaxObjectBytes; src.size > max {
		return errorf(ErrInvalidRequest, "the copy source is %d bytes, larger than the largest single-part object, %d", src.size, max)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var err error
		if src.size > 0 {
			err = g.send(ctx, src, byteRange{0, src.size - 1}, &response{w: pw})
		}
		pw.CloseWithError(err)
		done <- err
	}()
	sum := md5.New()
	rec, err := g.c.PutReader(ctx, objectKey(bucket, key), io.TeeReader(pr, sum), src.size, red)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the reader if the write gave up
	readErr := <-done
	if err != nil {
		if readErr != nil {
			return g.internal("copy from "+srcBucket+"/"+srcKey, readErr)
		}
		return g.internal("copy to "+bucket+"/"+key, err)
	}
	etag := hex.EncodeToString(sum.Sum(nil))
	g.putMeta(ctx, bucket, key, objectMeta{Version: rec.Version, ETag: etag, Headers: headers, Size: rec.SizeBytes})
	g.dropOlderManifest(ctx, bucket, key, rec.Version)
	return writeXML(w, copyResultXML{Xmlns: xmlns, LastModified: s3Time(time.UnixMilli(rec.CreatedUnixMs)), ETag: `"` + etag + `"`})
}

type deleteXML struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

type deleteResultXML struct {
	XMLName xml.Name         `xml:"DeleteResult"`
	Xmlns   string           `xml:"xmlns,attr"`
	Deleted []deletedXML     `xml:"Deleted"`
	Errors  []deleteErrorXML `xml:"Error"`
}

type deletedXML struct {
	Key string `xml:"Key"`
}

type deleteErrorXML struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

const (
	maxDeleteKeys  = 1000
	maxDeleteBytes = 2 << 20
)

// deleteObjects is DeleteObjects: up to 1000 keys, each deleted as
// DeleteObject would, each with its own outcome.
func (g *Gateway) deleteObjects(ctx context.Context, w http.ResponseWriter, r *http.Request, bucket string, pl payload) *Error {
	body, e := readBody(r, pl, maxDeleteBytes)
	if e != nil {
		return e
	}
	var doc deleteXML
	if err := xml.Unmarshal(body, &doc); err != nil {
		return errorf(ErrMalformedXML, "the delete document: %v", err)
	}
	if len(doc.Objects) == 0 || len(doc.Objects) > maxDeleteKeys {
		return errorf(ErrMalformedXML, "a delete names 1 to %d keys, not %d", maxDeleteKeys, len(doc.Objects))
	}
	if _, e := g.bucketExists(ctx, bucket); e != nil {
		return e
	}
	out := deleteResultXML{Xmlns: xmlns}
	for _, o := range doc.Objects {
		var e *Error
		switch {
		case o.VersionID != "" && o.VersionID != "null":
			e = errorf(ErrNotImplemented, "versions are not supported")
		case o.Key == "" || len(o.Key) > maxKeyBytes || !utf8.ValidString(o.Key):
			e = errorf(ErrKeyTooLong, "object keys are 1 to %d bytes of UTF-8", maxKeyBytes)
		default:
			e = g.removeObject(ctx, bucket, o.Key)
		}
		if e != nil {
			out.Errors = append(out.Errors, deleteErrorXML{Key: o.Key, Code: e.Code, Message: e.Message})
		} else if !doc.Quiet {
			out.Deleted = append(out.Deleted, deletedXML{Key: o.Key})
		}
	}
	return writeXML(w, out)
}
