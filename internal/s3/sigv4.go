package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, header form (the Authorization header) and
// query form (presigned URLs): the
// request is put in canonical form, hashed, and signed with a key derived
// from the secret, the date, the region and the service. The server
// recomputes the signature from what it received and compares.

const (
	sigAlgorithm    = "AWS4-HMAC-SHA256"
	amzDateLayout   = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// maxClockSkew is how far a request's X-Amz-Date may be from the
	// server's clock (S3's RequestTimeTooSkewed).
	maxClockSkew = 15 * time.Minute
)

// authorization is a parsed Authorization header.
type authorization struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseAuthorization(h string) (authorization, *Error) {
	var a authorization
	rest, ok := strings.CutPrefix(h, sigAlgorithm+" ")
	if !ok {
		return a, errorf(ErrAccessDenied, "only %s header authorization is supported", sigAlgorithm)
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, errorf(ErrAuthorizationHeaderMalformed, "malformed authorization part %q", part)
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return a, errorf(ErrAuthorizationHeaderMalformed, "malformed credential %q", v)
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
		return a, errorf(ErrAuthorizationHeaderMalformed, "authorization lacks a credential, signed headers or signature")
	}
	return a, nil
}

// verify checks r's signature (header form) against secret and returns
// what the body must be (checked as it is read, see bodyCheck).
func verify(r *http.Request, a authorization, secret string, now time.Time) (payload, *Error) {
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		return payload{}, errorf(ErrAccessDenied, "missing or malformed X-Amz-Date %q", amzDate)
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return payload{}, errorf(ErrRequestTimeTooSkewed, "request time %s is %s from the server's", amzDate, d.Round(time.Second))
	}
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		return payload{}, errorf(ErrAccessDenied, "missing x-amz-content-sha256")
	}
	if payloadHash != unsignedPayload && payloadHash != streamingPayload && !isSHA256Hex(payloadHash) {
		return payload{}, errorf(ErrNotImplemented, "payload signing mode %q is not supported (use a signed or unsigned single-chunk payload, or %s)", payloadHash, streamingPayload)
	}
	if e := checkSignature(r, a, secret, amzDate, r.URL.Query(), payloadHash); e != nil {
		return payload{}, e
	}
	switch payloadHash {
	case unsignedPayload:
		return payload{}, nil
	case streamingPayload:
		return payload{chunked: &chunkSigning{key: signingKey(secret, a.date, a.region, a.service), amzDate: amzDate,
			scope: strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/"), seed: a.signature}}, nil
	}
	return payload{sha: payloadHash}, nil
}

// Presigned URLs carry the signature in the query (SigV4 query
// authentication); the payload is unsigned.
const (
	maxPresignedExpiry = 7 * 24 * time.Hour // S3's limit
)

// verifyPresigned checks a presigned request: its X-Amz-* query parameters,
// its expiry, and its signature over every other query parameter. It
// returns the payload hash the body must match ("": unsigned).
func verifyPresigned(r *http.Request, accessKey, secret string, now time.Time) (payload, *Error) {
	q := r.URL.Query()
	if alg := q.Get("X-Amz-Algorithm"); alg != sigAlgorithm {
		return payload{}, errorf(ErrAuthorizationQueryParametersError, "X-Amz-Algorithm %q: only %s is supported", alg, sigAlgorithm)
	}
	var a authorization
	f := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(f) != 5 || f[4] != "aws4_request" {
		return payload{}, errorf(ErrAuthorizationQueryParametersError, "malformed X-Amz-Credential %q", q.Get("X-Amz-Credential"))
	}
	a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
	a.signature = q.Get("X-Amz-Signature")
	if sh := q.Get("X-Amz-SignedHeaders"); sh != "" {
		a.signedHeaders = strings.Split(sh, ";")
	}
	if a.signature == "" || len(a.signedHeaders) == 0 {
		return payload{}, errorf(ErrAuthorizationQueryParametersError, "a presigned URL needs X-Amz-Signature and X-Amz-SignedHeaders")
	}
	if a.accessKey != accessKey {
		return payload{}, errorf(ErrInvalidAccessKeyID, "the access key %q is not known", a.accessKey)
	}
	amzDate := q.Get("X-Amz-Date")
	t, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		return payload{}, errorf(ErrAuthorizationQueryParametersError, "missing or malformed X-Amz-Date %q", amzDate)
	}
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > maxPresignedExpiry {
		return payload{}, errorf(ErrAuthorizationQueryParametersError, "X-Amz-Expires %q: want 1 to %d seconds", q.Get("X-Amz-Expires"), int64(maxPresignedExpiry/time.Second))
	}
	if t.Sub(now) > maxClockSkew {
		return payload{}, errorf(ErrRequestTimeTooSkewed, "presigned URL dated %s, in the future", amzDate)
	}
	if now.After(t.Add(time.Duration(secs) * time.Second)) {
		return payload{}, errorf(ErrAccessDenied, "request has expired: presigned at %s for %d seconds", amzDate, secs)
	}
	payloadHash := unsignedPayload
	if h := q.Get("X-Amz-Content-Sha256"); h != "" {
		payloadHash = h
	}
	if payloadHash != unsignedPayload && !isSHA256Hex(payloadHash) {
		return payload{}, errorf(ErrNotImplemented, "payload signing mode %q is not supported", payloadHash)
	}
	signedQuery := url.Values{}
	for k, vs := range q {
		if k != "X-Amz-Signature" {
			signedQuery[k] = vs
		}
	}
	if e := checkSignature(r, a, secret, amzDate, signedQuery, payloadHash); e != nil {
		return payload{}, e
	}
	if payloadHash == unsignedPayload {
		return payload{}, nil
	}
	return payload{sha: payloadHash}, nil
}

// checkSignature recomputes a's signature of r from its canonical form
// (query: the parameters signed) and compares.
func checkSignature(r *http.Request, a authorization, secret, amzDate string, query url.Values, payloadHash string) *Error {
	if !strings.HasPrefix(amzDate, a.date) {
		return errorf(ErrSignatureDoesNotMatch, "credential date %s is not the request's date %s", a.date, amzDate)
	}
	signedHost := false
	for _, h := range a.signedHeaders {
		signedHost = signedHost || h == "host"
	}
	if !signedHost {
		return errorf(ErrAccessDenied, "the host header must be signed")
	}
	canonical := strings.Join([]string{
		r.Method,
		canonicalURI(r.URL),
		canonicalQuery(query),
		canonicalHeaders(r, a.signedHeaders),
		strings.Join(a.signedHeaders, ";"),
		payloadHash,
	}, "\n")
	want := signature(secret, a.date, a.region, a.service, amzDate, canonical)
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return errorf(ErrSignatureDoesNotMatch, "the request signature we calculated does not match the signature you provided")
	}
	return nil
}

// signature is SigV4's signature of a canonical request.
func signature(secret, date, region, service, amzDate, canonical string) string {
	scope := strings.Join([]string{date, region, service, "aws4_request"}, "/")
	toSign := strings.Join([]string{sigAlgorithm, amzDate, scope, hexSHA256([]byte(canonical))}, "\n")
	return hex.EncodeToString(hmacSHA256(signingKey(secret, date, region, service), toSign))
}

// signingKey is SigV4's key for a date, region and service.
func signingKey(secret, date, region, service string) []byte {
	key := hmacSHA256([]byte("AWS4"+secret), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	return hmacSHA256(key, "aws4_request")
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// canonicalURI is the path with every byte outside the unreserved set
// percent-encoded, slashes kept (S3 does not normalize or double-encode).
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	// Re-encode from the decoded path so that equivalent escapings sign
	// alike.
	dec, err := url.PathUnescape(p)
	if err != nil {
		return p
	}
	return uriEncode(dec, false)
}

// uriEncode percent-encodes every byte but A-Z a-z 0-9 - _ . ~ (and /
// unless encodeSlash), upper-case hex.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func canonicalQuery(q url.Values) string {
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func canonicalHeaders(r *http.Request, signed []string) string {
	var b strings.Builder
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length": // net/http moves it out of the header map
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(strings.Join(strings.Fields(v), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
