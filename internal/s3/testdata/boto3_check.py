"""Drives flashmend's S3 gateway with boto3, unchanged (internal/s3 TestBoto3).

Reads FLASHMEND_S3 (http://HOST:PORT), FLASHMEND_S3_ACCESS_KEY and
FLASHMEND_S3_SECRET_KEY; exits non-zero with the failed check's message.
"""
import hashlib
import os
import sys
import tempfile

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint = os.environ["FLASHMEND_S3"]
ak = os.environ["FLASHMEND_S3_ACCESS_KEY"]
sk = os.environ["FLASHMEND_S3_SECRET_KEY"]
checks = 0


def client(secret=sk):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ak,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def check(cond, what):
    global checks
    if not cond:
        sys.exit("FAILED: " + what)
    checks += 1


def error_code(fn):
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


s3 = client()
s3.create_bucket(Bucket="photos")
s3.create_bucket(Bucket="empty-one")
names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
check(names == ["empty-one", "photos"], "list_buckets: %r" % names)
s3.head_bucket(Bucket="photos")
check(error_code(lambda: s3.head_bucket(Bucket="nobucket")) in ("404", "NoSuchBucket"), "head_bucket of a missing bucket")
check(error_code(lambda: s3.create_bucket(Bucket="photos")) == "BucketAlreadyOwnedByYou", "create_bucket twice")

data = os.urandom(300000)
put = s3.put_object(Bucket="photos", Key="2024/cat.jpg", Body=data, ContentType="image/jpeg")
check(put["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(), "put_object ETag is the MD5: %r" % put["ETag"])
for key in ["2024/dog.jpg", "2025/owl.jpg", "readme.txt"]:
    s3.put_object(Bucket="photos", Key=key, Body=key.encode())

got = s3.get_object(Bucket="photos", Key="2024/cat.jpg")
check(got["Body"].read() == data, "get_object bytes")
check(got["ContentType"] == "image/jpeg", "get_object content type %r" % got["ContentType"])
check(got["ETag"] == put["ETag"], "get_object ETag")
part = s3.get_object(Bucket="photos", Key="2024/cat.jpg", Range="bytes=1000-1999")
check(part["Body"].read() == data[1000:2000], "ranged get_object bytes")
check(part["ContentRange"] == "bytes 1000-1999/300000", "Content-Range %r" % part["ContentRange"])
head = s3.head_object(Bucket="photos", Key="2024/cat.jpg")
check(head["ContentLength"] == 300000 and head["ETag"] == put["ETag"], "head_object")
check(error_code(lambda: s3.get_object(Bucket="photos", Key="2024/cat.jpg", Range="bytes=400000-")) == "InvalidRange", "unsatisfiable range")
check(error_code(lambda: s3.get_object(Bucket="photos", Key="nope")) == "NoSuchKey", "get_object of a missing key")
check(error_code(lambda: s3.get_object(Bucket="nobucket", Key="x")) == "NoSuchBucket", "get_object of a missing bucket")
check(error_code(lambda: client("wrong-secret").list_buckets()) == "SignatureDoesNotMatch", "a wrong secret")

listing = s3.list_objects_v2(Bucket="photos", Delimiter="/")
check([c["Prefix"] for c in listing.get("CommonPrefixes", [])] == ["2024/", "2025/"], "common prefixes %r" % listing.get("CommonPrefixes"))
check([o["Key"] for o in listing.get("Contents", [])] == ["readme.txt"], "top-level keys")
listing = s3.list_objects_v2(Bucket="photos", Prefix="2024/")
check([(o["Key"], o["Size"]) for o in listing["Contents"]] == [("2024/cat.jpg", 300000), ("2024/dog.jpg", 12)], "prefix listing")
pages = s3.get_paginator("list_objects_v2").paginate(Bucket="photos", PaginationConfig={"PageSize": 1})
keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
check(keys == ["2024/cat.jpg", "2024/dog.jpg", "2025/owl.jpg", "readme.txt"], "paginated listing %r" % keys)

with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "up"), os.path.join(d, "down")
    with open(src, "wb") as f:
        f.write(os.urandom(5 * 1024 * 1024 + 3))
    s3.upload_file(src, "photos", "big.bin")
    s3.download_file("photos", "big.bin", dst)
    check(open(src, "rb").read() == open(dst, "rb").read(), "upload_file/download_file round trip")

# User metadata, standard headers and the storage class (REP or EC) travel
# with the object.
s3.put_object(Bucket="photos", Key="meta.txt", Body=b"hello", Metadata={"owner": "ada", "shot-on": "2024-05-01"},
              ContentDisposition="attachment", StorageClass="STANDARD_IA")
head = s3.head_object(Bucket="photos", Key="meta.txt")
check(head["Metadata"] == {"owner": "ada", "shot-on": "2024-05-01"}, "user metadata %r" % head["Metadata"])
check(head["ContentDisposition"] == "attachment", "Content-Disposition %r" % head.get("ContentDisposition"))
check(head.get("StorageClass") == "STANDARD_IA", "storage class %r" % head.get("StorageClass"))
check(error_code(lambda: s3.put_object(Bucket="photos", Key="x", Body=b"x", Metadata={"big": "m" * 3000})) == "MetadataTooLarge",
      "oversized user metadata")

# Multipart: three parts (5 MiB, 5 MiB, 1 KiB), listed, completed; the ETag
# is S3's multipart form, the bytes and ranges across parts come back.
parts_data = [os.urandom(5 * 1024 * 1024), os.urandom(5 * 1024 * 1024), os.urandom(1024)]
mpu = s3.create_multipart_upload(Bucket="photos", Key="video.mp4", ContentType="video/mp4", Metadata={"camera": "x1"})
uid = mpu["UploadId"]
etags = []
for i, d in enumerate(parts_data):
    etags.append(s3.upload_part(Bucket="photos", Key="video.mp4", UploadId=uid, PartNumber=i + 1, Body=d)["ETag"])
check(etags == ['"%s"' % hashlib.md5(d).hexdigest() for d in parts_data], "part ETags are MD5s")
listed = s3.list_parts(Bucket="photos", Key="video.mp4", UploadId=uid)
check([(p["PartNumber"], p["Size"], p["ETag"]) for p in listed["Parts"]] == [(i + 1, len(d), etags[i]) for i, d in enumerate(parts_data)],
      "list_parts %r" % listed["Parts"])
check(error_code(lambda: s3.complete_multipart_upload(Bucket="photos", Key="video.mp4", UploadId=uid, MultipartUpload={
    "Parts": [{"PartNumber": 2, "ETag": etags[1]}, {"PartNumber": 1, "ETag": etags[0]}]})) == "InvalidPartOrder", "parts out of order")
check(error_code(lambda: s3.complete_multipart_upload(Bucket="photos", Key="video.mp4", UploadId=uid, MultipartUpload={
    "Parts": [{"PartNumber": 1, "ETag": etags[1]}]})) == "InvalidPart", "a part with the wrong ETag")
check(error_code(lambda: s3.complete_multipart_upload(Bucket="photos", Key="video.mp4", UploadId=uid, MultipartUpload={
    "Parts": [{"PartNumber": 3, "ETag": etags[2]}, {"PartNumber": 4, "ETag": etags[2]}]})) == "InvalidPart", "a part never uploaded")
done = s3.complete_multipart_upload(Bucket="photos", Key="video.mp4", UploadId=uid, MultipartUpload={
    "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
want_etag = '"%s-3"' % hashlib.md5(b"".join(hashlib.md5(d).digest() for d in parts_data)).hexdigest()
check(done["ETag"] == want_etag, "multipart ETag %r, want %r" % (done["ETag"], want_etag))
whole = b"".join(parts_data)
got = s3.get_object(Bucket="photos", Key="video.mp4")
check(got["Body"].read() == whole and got["ETag"] == want_etag, "multipart get_object")
check(got["ContentType"] == "video/mp4" and got["Metadata"] == {"camera": "x1"}, "multipart object's headers")
start, end = 5 * 1024 * 1024 - 100, 10 * 1024 * 1024 + 99
part = s3.get_object(Bucket="photos", Key="video.mp4", Range="bytes=%d-%d" % (start, end))
check(part["Body"].read() == whole[start:end + 1], "a range across three parts")
check(s3.head_object(Bucket="photos", Key="video.mp4")["ContentLength"] == len(whole), "multipart head_object size")
check(error_code(lambda: s3.list_parts(Bucket="photos", Key="video.mp4", UploadId=uid)) == "NoSuchUpload", "a completed upload is gone")
sizes = {o["Key"]: (o["Size"], o["ETag"]) for o in s3.list_objects_v2(Bucket="photos")["Contents"]}
check(sizes["video.mp4"] == (len(whole), want_etag), "multipart object listed %r" % (sizes["video.mp4"],))

# An aborted upload leaves nothing.
mpu = s3.create_multipart_upload(Bucket="photos", Key="aborted.bin")
s3.upload_part(Bucket="photos", Key="aborted.bin", UploadId=mpu["UploadId"], PartNumber=1, Body=b"abc")
s3.abort_multipart_upload(Bucket="photos", Key="aborted.bin", UploadId=mpu["UploadId"])
check(error_code(lambda: s3.list_parts(Bucket="photos", Key="aborted.bin", UploadId=mpu["UploadId"])) == "NoSuchUpload", "aborted upload")
check(error_code(lambda: s3.head_object(Bucket="photos", Key="aborted.bin")) in ("404", "NoSuchKey"), "no object from an aborted upload")

# upload_file above the multipart threshold: s3transfer's own multipart path.
from boto3.s3.transfer import TransferConfig
with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "up"), os.path.join(d, "down")
    with open(src, "wb") as f:
        f.write(os.urandom(13 * 1024 * 1024 + 5))
    cfg = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    s3.upload_file(src, "photos", "multi.bin", Config=cfg)
    s3.download_file("photos", "multi.bin", dst, Config=cfg)
    check(open(src, "rb").read() == open(dst, "rb").read(), "multipart upload_file/download_file round trip")
    check(s3.head_object(Bucket="photos", Key="multi.bin")["ETag"].endswith('-3"'), "upload_file made 3 parts")

# Overwriting a multipart object with a single part one and back.
s3.put_object(Bucket="photos", Key="video.mp4", Body=b"now small")
check(s3.get_object(Bucket="photos", Key="video.mp4")["Body"].read() == b"now small", "single part over multipart")

# CopyObject: metadata copied or replaced; a copy onto itself must change
# something.
copied = s3.copy_object(Bucket="photos", Key="meta-copy.txt", CopySource={"Bucket": "photos", "Key": "meta.txt"})
check(copied["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(b"hello").hexdigest(), "copy ETag")
head = s3.head_object(Bucket="photos", Key="meta-copy.txt")
check(head["Metadata"] == {"owner": "ada", "shot-on": "2024-05-01"}, "copied metadata %r" % head["Metadata"])
s3.copy_object(Bucket="photos", Key="meta-copy.txt", CopySource="photos/meta.txt", MetadataDirective="REPLACE",
               Metadata={"owner": "bob"}, ContentType="text/plain")
got = s3.get_object(Bucket="photos", Key="meta-copy.txt")
check(got["Body"].read() == b"hello" and got["Metadata"] == {"owner": "bob"} and got["ContentType"] == "text/plain", "replaced metadata")
check(error_code(lambda: s3.copy_object(Bucket="photos", Key="meta.txt", CopySource="photos/meta.txt")) == "InvalidRequest", "copy onto itself")
check(error_code(lambda: s3.copy_object(Bucket="photos", Key="c", CopySource="photos/nope")) == "NoSuchKey", "copy of a missing key")

# Presigned URLs (query authentication), read and write, by a plain HTTP
# client.
import urllib.request
import urllib.error
url = s3.generate_presigned_url("get_object", Params={"Bucket": "photos", "Key": "meta.txt"}, ExpiresIn=300)
check(urllib.request.urlopen(url).read() == b"hello", "presigned GET")
url = s3.generate_presigned_url("put_object", Params={"Bucket": "photos", "Key": "presigned.txt"}, ExpiresIn=300)
urllib.request.urlopen(urllib.request.Request(url, data=b"via a presigned URL", method="PUT")).read()
check(s3.get_object(Bucket="photos", Key="presigned.txt")["Body"].read() == b"via a presigned URL", "presigned PUT")
bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
try:
    urllib.request.urlopen(urllib.request.Request(bad, data=b"x", method="PUT"))
    check(False, "a tampered presigned URL was accepted")
except urllib.error.HTTPError as e:
    check(e.code == 403 and b"SignatureDoesNotMatch" in e.read(), "tampered presigned URL")

# DeleteObjects: every key reported, a missing one too (as S3 does).
res = s3.delete_objects(Bucket="photos", Delete={"Objects": [{"Key": k} for k in ["meta-copy.txt", "presigned.txt", "never-was"]]})
check(sorted(d["Key"] for d in res["Deleted"]) == ["meta-copy.txt", "never-was", "presigned.txt"] and not res.get("Errors"),
      "delete_objects %r" % res)
check(error_code(lambda: s3.head_object(Bucket="photos", Key="presigned.txt")) in ("404", "NoSuchKey"), "deleted by delete_objects")
for key in ["meta.txt", "video.mp4", "multi.bin"]:
    s3.delete_object(Bucket="photos", Key=key)

check(error_code(lambda: s3.delete_bucket(Bucket="photos")) == "BucketNotEmpty", "delete_bucket of a full bucket")
for key in ["2024/cat.jpg", "2024/dog.jpg", "2025/owl.jpg", "readme.txt", "big.bin"]:
    s3.delete_object(Bucket="photos", Key=key)
check(error_code(lambda: s3.head_object(Bucket="photos", Key="readme.txt")) in ("404", "NoSuchKey"), "head_object after delete")
s3.delete_bucket(Bucket="photos")
s3.delete_bucket(Bucket="empty-one")
check(s3.list_buckets()["Buckets"] == [], "no buckets left")
print("boto3 %s: %d checks passed" % (boto3.__version__, checks))
