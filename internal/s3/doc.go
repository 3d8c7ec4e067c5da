// Package s3 is flashmend's S3-compatible gateway, first slice: AWS
// Signature Version 4 in the Authorization header; buckets (create, list,
// head, delete if empty); PutObject, GetObject with a single byte Range,
// HeadObject, DeleteObject; ListObjectsV2 (prefix, delimiter, max-keys,
// continuation token, start-after); errors as S3's XML error document with
// S3's codes. Requests are path-style (http://HOST:PORT/BUCKET/KEY).
//
// # What it owns
//
//   - The mapping of S3 onto the cluster: an object BUCKET/KEY is the
//     object store's key "s3/BUCKET/KEY" (stored and read through the
//     streaming client, so memory per request is the client's window, not
//     the object's size); a bucket is the KV row "s3/bucket/BUCKET" (its
//     creation time), created with a compare-and-set; an object's ETag
//     (the MD5 of its bytes, as S3 defines it for single-part uploads) and
//     content type are the KV row "s3/meta/BUCKET/KEY", bound to the
//     object version they describe.
//   - Authentication: one access key and secret (Options); every request
//     must carry a valid SigV4 signature over its method, path, query,
//     signed headers and x-amz-content-sha256, within 15 minutes of the
//     server's clock.
//
// # Failure model and invariants
//
//   - A PUT body is checked while it streams: its SHA-256 against the
//     signed x-amz-content-sha256 (unless UNSIGNED-PAYLOAD) and its MD5
//     against Content-MD5 when given. A mismatch fails the read of the
//     body, so the cluster never commits the version: bad input changes
//     nothing. A body shorter than Content-Length fails likewise.
//   - A GET answers its status and headers only with the first verified
//     byte; a read that fails before then is an S3 error, one that fails
//     after it cuts the connection (the client sees a short body, never a
//     complete-looking wrong one).
//   - A metadata write that fails after the object was committed leaves
//     the object served with the ETag "vVERSION" until it is written
//     again (logged). Deleting a bucket checks it is empty first; a PUT
//     racing the delete can leave an object in a deleted bucket, which
//     is not listed or served until the bucket is created again.
//   - Not yet: presigned URLs, multipart upload, CopyObject,
//     DeleteObjects, user metadata, aws-chunked (streaming-signed)
//     payloads, ListObjects v1, virtual-hosted-style requests; each is
//     answered NotImplemented, never mis-served.
package s3
