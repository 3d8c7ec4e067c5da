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

check(error_code(lambda: s3.delete_bucket(Bucket="photos")) == "BucketNotEmpty", "delete_bucket of a full bucket")
for key in ["2024/cat.jpg", "2024/dog.jpg", "2025/owl.jpg", "readme.txt", "big.bin"]:
    s3.delete_object(Bucket="photos", Key=key)
check(error_code(lambda: s3.head_object(Bucket="photos", Key="readme.txt")) in ("404", "NoSuchKey"), "head_object after delete")
s3.delete_bucket(Bucket="photos")
s3.delete_bucket(Bucket="empty-one")
check(s3.list_buckets()["Buckets"] == [], "no buckets left")
print("boto3 %s: %d checks passed" % (boto3.__version__, checks))
