// Package s3 is flashmend's S3-compatible gateway: AWS Signature Version 4
// in the Authorization header or in the query (presigned URLs); buckets
// (create, list, head, location, delete if empty); PutObject, GetObject
// with a single byte Range, HeadObject, DeleteObject, DeleteObjects,
// CopyObject (metadata copied or replaced); multipart uploads (create,
// upload part, complete, abort, list parts); ListObjectsV2 (prefix,
// delimiter, max-keys, continuation token, start-after); user metadata
// (x-amz-meta-*) and the standard content headers; ETags as S3 defines
// them (the MD5 of a single-part object, "MD5-OF-PART-MD5S-N" for a
// multipart one); a per-object choice of REP or EC with
// x-amz-storage-class (STANDARD or STANDARD_IA); errors as S3's XML error
// document with S3's codes. Requests are path-style
// (http://HOST:PORT/BUCKET/KEY).
//
// # What it owns
//
//   - The mapping of S3 onto the cluster. A single-part object BUCKET/KEY
//     is the object store's key "s3/BUCKET/KEY". A multipart object is a
//     manifest "s3m/BUCKET/KEY" (JSON: the parts in order, each an object
//     "s3mp/UPLOADID/NNNNN-RANDOM" named with its version, offset, size and
//     MD5) and its parts; completing an upload writes only the manifest, no
//     byte of a part is copied. Where both kinds exist for a key (an
//     overwrite of one kind by the other removes the older one after it
//     commits; a crash in between leaves both), the version begun last is
//     the object. A bucket is the KV row "s3/bucket/BUCKET" (its creation
//     time), created with a compare-and-set; an object's ETag, size and
//     stored headers are the KV row "s3/meta/BUCKET/KEY", bound to the
//     object-store version they describe (a manifest carries its own). An
//     upload in progress is the KV row "s3/upload/UPLOADID", its parts the
//     rows "s3/part/UPLOADID/NNNNN" (the part's current object).
//   - Authentication: one access key and secret (Options); every request
//     must carry a valid SigV4 signature over its method, path, query,
//     signed headers and payload hash, within 15 minutes of the server's
//     clock (header form) or before its X-Amz-Expires (presigned, at most
//     7 days).
//
// # Memory bound
//
// No request holds an object: a PUT, an UploadPart and a CopyObject stream
// into the cluster through the client's write window, a GET streams out
// of its read window (internal/client), one part at a time for a multipart
// object. What a request holds beyond those windows is its XML document
// (at most 2 MiB: a completion of 10,000 parts, a delete of 1,000 keys)
// and a manifest (at most 4 MiB). So a 5 GiB multipart upload of 5 MiB
// parts holds, per part in flight, one write window, whatever the object's
// size. BenchmarkMultipartUploadMemory measures it (docs/s3.md has the
// figures): the whole process's peak heap, six nodes included, was 46 MiB
// for a 1 GiB upload and 48.5 MiB for a 5 GiB one.
//
// # Failure model and invariants
//
//   - A PUT or part body is checked while it streams: its SHA-256 against
//     the signed x-amz-content-sha256 (unless UNSIGNED-PAYLOAD, which
//     presigned URLs use) and its MD5 against Content-MD5 when given. A
//     mismatch fails the read of the body, so the cluster never commits
//     the version: bad input changes nothing. A body shorter than
//     Content-Length fails likewise.
//   - A GET answers its status and headers only with the first verified
//     byte; a read that fails before then is an S3 error, one that fails
//     after it cuts the connection (the client sees a short body, never a
//     complete-looking wrong one). A multipart object's part is served
//     only in the exact version its manifest names.
//   - A completion checks every named part (order, ETag, size, stored
//     version) before it changes anything, then claims the upload with a
//     compare-and-set (no second completion or abort races it; a claim
//     older than 15 minutes, left by a gateway that failed, lapses), then
//     commits the manifest. Parts are stored under fresh keys per upload,
//     so no later part upload overwrites what a manifest names. What a
//     failure leaves behind (parts of a replaced manifest, part objects
//     whose row was not written) is garbage: never served, logged.
//   - A metadata write that fails after a single-part object was committed
//     leaves the object served with the ETag "vVERSION" and without its
//     stored headers until it is written again (logged). Deleting a bucket
//     checks it is empty first; a PUT racing the delete can leave an
//     object in a deleted bucket, which is not listed or served until the
//     bucket is created again.
//   - A single-part PUT and a multipart completion of the same key that
//     run at the same time end with one of the two, as S3's last writer
//     wins; a reader during the race may see the other one first.
//   - Not supported, and answered NotImplemented (never mis-served):
//     aws-chunked (streaming-signed) payloads, UploadPartCopy, conditional
//     copies, versioning, ListObjects v1, ListMultipartUploads,
//     virtual-hosted-style requests.
package s3
