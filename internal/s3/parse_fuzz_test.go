package s3

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz targets for what the gateway parses from a request: the Range
// header, the SigV4 Authorization header and signature check, the copy
// source header, a part number, and the XML bodies of
// CompleteMultipartUpload and DeleteObjects. Seed corpora are in
// testdata/fuzz/; `go test` runs them, `flashmend torture fuzz` (or go test
// -fuzz=FuzzX) explores further.

// FuzzParseRange: a Range header is no range, a range inside the object,
// or InvalidRange; a well-formed "bytes=a-b" gives exactly [a, min(b,
// size-1)].
func FuzzParseRange(f *testing.F) {
	for _, h := range []string{"bytes=0-99", "bytes=-5", "bytes=5-", "bytes=9-3", "bytes=0-0,2-3", "bytes=-0", "items=1-2", "bytes=99999999999999999999-1"} {
		f.Add(h, int64(100))
	}
	f.Add("bytes=0-", int64(0))
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		br, ok, e := parseRange(h, size)
		if e != nil {
			if e.Code != ErrInvalidRange.Code || ok {
				t.Fatalf("parseRange(%q, %d): error %v ok %v", h, size, e, ok)
			}
			return
		}
		if !ok {
			return
		}
		if br.start < 0 || br.start > br.end || br.end >= size {
			t.Fatalf("parseRange(%q, %d) = [%d, %d]: outside the object", h, size, br.start, br.end)
		}
		spec := strings.TrimPrefix(h, "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		if s, err := strconv.ParseInt(a, 10, 64); err == nil && a != "" {
			if br.start != s {
				t.Fatalf("parseRange(%q, %d) starts at %d", h, size, br.start)
			}
			if e, err := strconv.ParseInt(b, 10, 64); err == nil && br.end != min(e, size-1) {
				t.Fatalf("parseRange(%q, %d) ends at %d", h, size, br.end)
			}
		}
	})
}

// FuzzParseAuthorization: any header parses or is a malformed-header
// error; what parses has every field, and the header written back from
// the fields parses to the same fields.
func FuzzParseAuthorization(f *testing.F) {
	f.Add(sigAlgorithm + " Credential=AK/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc")
	f.Add(sigAlgorithm + " Credential=/a/b/c/aws4_request,SignedHeaders=,Signature=")
	f.Add("AWS AK:sig")
	f.Add(sigAlgorithm + " Credential=AK/d/r/s/aws4_request, SignedHeaders=host, Signature=s, Signature=t")
	f.Fuzz(func(t *testing.T, h string) {
		a, e := parseAuthorization(h)
		if e != nil {
			if e.Code != ErrAuthorizationHeaderMalformed.Code && e.Code != ErrAccessDenied.Code {
				t.Fatalf("parseAuthorization(%q): %v", h, e)
			}
			return
		}
		if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
			t.Fatalf("parseAuthorization(%q) accepted %+v", h, a)
		}
		if strings.ContainsAny(a.accessKey+a.date+a.region+a.service, "/,") || strings.Contains(a.signature, ",") {
			return // cannot be written back unambiguously; the signature check will fail it
		}
		again := sigAlgorithm + " Credential=" + strings.Join([]string{a.accessKey, a.date, a.region, a.service, "aws4_request"}, "/") +
			", SignedHeaders=" + strings.Join(a.signedHeaders, ";") + ", Signature=" + a.signature
		b, e := parseAuthorization(again)
		if e != nil || b.accessKey != a.accessKey || b.date != a.date || b.region != a.region || b.service != a.service ||
			b.signature != a.signature || strings.Join(b.signedHeaders, ";") != strings.Join(a.signedHeaders, ";") {
			t.Fatalf("written back %q parsed to %+v %v, first %+v", again, b, e, a)
		}
	})
}

// FuzzSigV4: a request signed as a client signs it verifies; the same
// signature over a different key, query value, header value or payload
// hash does not.
func FuzzSigV4(f *testing.F) {
	f.Add("bucket/key", "prefix", "a/b", []byte(nil), uint8(0))
	f.Add("b/k with space/ü", "list-type", "2", []byte("body"), uint8(1))
	f.Add("b/%2F", "x", "", []byte{}, uint8(2))
	f.Add("b/k", "uploadId", "abc=", []byte("p"), uint8(3))
	f.Fuzz(func(t *testing.T, path, qk, qv string, payload []byte, which uint8) {
		if !utf8.ValidString(path) || qk == "" {
			return
		}
		at := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
		u := &url.URL{Scheme: "http", Host: "127.0.0.1:9000", Path: "/" + path, RawQuery: url.Values{qk: {qv}}.Encode()}
		r, err := http.NewRequest(http.MethodPut, u.String(), nil)
		if err != nil {
			return
		}
		sign(r, testAccessKey, testSecretKey, payload, at)
		a, e := parseAuthorization(r.Header.Get("Authorization"))
		if e != nil {
			t.Fatalf("client's header does not parse: %v", e)
		}
		if _, e := verify(r, a, testSecretKey, at); e != nil {
			t.Fatalf("signed request does not verify: %v (%s)", e, u)
		}
		// The same signature over something else.
		switch which % 4 {
		case 0:
			r.URL.Path += "x"
			r.URL.RawPath = ""
		case 1:
			q := r.URL.Query()
			q.Set(qk, qv+"x")
			r.URL.RawQuery = q.Encode()
		case 2:
			r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("0", 64))
		case 3:
			r.Header.Set("X-Amz-Date", at.Add(time.Second).Format(amzDateLayout))
		}
		if _, e := verify(r, a, testSecretKey, at); e == nil {
			t.Fatalf("change %d to %s still verifies", which%4, r.URL)
		}
	})
}

// FuzzParseCopySource: a copy source parses to a valid bucket name and a
// non-empty UTF-8 key of at most maxKeyBytes, or is an error; never a
// panic.
func FuzzParseCopySource(f *testing.F) {
	for _, h := range []string{"bucket/key", "/bucket/a/b", "bucket/k%20ey", "bucket/", "/", "b/k?versionId=1", "bucket/%zz", "BUCKET/k"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		b, k, e := parseCopySource(h)
		if e != nil {
			return
		}
		if checkBucketName(b) != nil || k == "" || len(k) > maxKeyBytes || !utf8.ValidString(k) {
			t.Fatalf("parseCopySource(%q) = %q, %q", h, b, k)
		}
	})
}

// FuzzParsePartNumber: 1..maxParts or an error.
func FuzzParsePartNumber(f *testing.F) {
	for _, s := range []string{"1", "10000", "10001", "0", "-1", "+5", "007", " 1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, e := parsePartNumber(s)
		if e == nil && (n < 1 || n > maxParts) {
			t.Fatalf("parsePartNumber(%q) = %d", s, n)
		}
	})
}

// FuzzXMLBodies: the CompleteMultipartUpload and DeleteObjects documents
// parse or fail without a panic, and what parses marshals back to a
// document that parses to the same values.
func FuzzXMLBodies(f *testing.F) {
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b</Key><VersionId>null</VersionId></Object></Delete>`))
	f.Add([]byte(`<Delete><Object><Key>&lt;&#0;</Key></Object></Delete>`))
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><Delete/>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var c completeXML
		if xml.Unmarshal(body, &c) == nil {
			out, err := xml.Marshal(c)
			if err != nil {
				t.Fatalf("parsed completion does not marshal: %v", err)
			}
			var c2 completeXML
			if err := xml.Unmarshal(out, &c2); err != nil || len(c2.Parts) != len(c.Parts) {
				t.Fatalf("completion round trip: %v, %d parts, want %d", err, len(c2.Parts), len(c.Parts))
			}
			for i := range c.Parts {
				if c2.Parts[i] != c.Parts[i] {
					t.Fatalf("completion round trip: part %d %+v, want %+v", i, c2.Parts[i], c.Parts[i])
				}
			}
		}
		var d deleteXML
		if xml.Unmarshal(body, &d) == nil {
			out, err := xml.Marshal(d)
			if err != nil {
				t.Fatalf("parsed delete does not marshal: %v", err)
			}
			var d2 deleteXML
			if err := xml.Unmarshal(out, &d2); err != nil || len(d2.Objects) != len(d.Objects) || d2.Quiet != d.Quiet {
				t.Fatalf("delete round trip: %v", err)
			}
			for i := range d.Objects {
				if d2.Objects[i] != d.Objects[i] {
					t.Fatalf("delete round trip: object %d %+v, want %+v", i, d2.Objects[i], d.Objects[i])
				}
			}
		}
	})
}
