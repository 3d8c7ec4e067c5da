package s3

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Streaming-signed payloads (x-amz-content-sha256:
// STREAMING-AWS4-HMAC-SHA256-PAYLOAD, Content-Encoding: aws-chunked), which
// minio-go and the AWS SDKs send over plain HTTP: the body is a sequence of
// chunks "HEXSIZE;chunk-signature=SIG\r\nDATA\r\n" ending with a chunk of
// size 0, each signed over the previous chunk's signature (the first over
// the request's), so a chunk cannot be changed, dropped or reordered.

const (
	streamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	emptySHA256      = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// maxChunkHeaderBytes bounds a chunk header line; maxChunkBytes a
	// chunk (clients send 64 KiB to 1 MiB).
	maxChunkHeaderBytes = 4 << 10
	maxChunkBytes       = 16 << 20
)

// payload is what a request's body must be, as its signature says.
type payload struct {
	// sha is the SHA-256 of the body, hex ("": unsigned or chunked).
	sha string
	// chunked, when set, is the seed of a streaming-signed body's chunk
	// signatures.
	chunked *chunkSigning
}

// chunkSigning is what a chunk signature is computed from.
type chunkSigning struct {
	key            []byte // the request's signing key
	amzDate, scope string
	seed           string // the request's signature
}

func (c *chunkSigning) sign(prev, chunkSHA string) string {
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256-PAYLOAD", c.amzDate, c.scope, prev, emptySHA256, chunkSHA}, "\n")
	return hex.EncodeToString(hmacSHA256(c.key, toSign))
}

// chunkedReader decodes and verifies a streaming-signed body. A chunk's
// bytes are handed on before its signature is checked: the check fails
// the read at the chunk's end, and the body's consumer (bodyCheck) fails
// the whole write then, before anything commits.
type chunkedReader struct {
	r    *bufio.Reader
	sig  *chunkSigning
	prev string
	left int64     // bytes of the current chunk not read yet
	sum  hash.Hash // SHA-256 of the current chunk
	want string    // the current chunk's signature as sent
	done bool
	err  error
}

func newChunkedReader(r io.Reader, sig *chunkSigning) *chunkedReader {
	return &chunkedReader{r: bufio.NewReaderSize(r, 64<<10), sig: sig, prev: sig.seed, sum: sha256.New()}
}

var errChunkFormat = errors.New("s3: malformed aws-chunked body")

func (c *chunkedReader) fail(e *Error) (int, error) {
	c.err = e
	return 0, e
}

// header reads the next chunk's header line.
func (c *chunkedReader) header() *Error {
	line, err := c.r.ReadSlice('\n')
	if err != nil || len(line) > maxChunkHeaderBytes || !strings.HasSuffix(string(line), "\r\n") {
		if errors.Is(err, io.EOF) {
			return errorf(ErrIncompleteBody, "the aws-chunked body ends before its last chunk")
		}
		return errorf(ErrInvalidRequest, "%v: bad chunk header", errChunkFormat)
	}
	size, sig, ok := strings.Cut(strings.TrimSuffix(string(line), "\r\n"), ";chunk-signature=")
	n, err := strconv.ParseInt(size, 16, 64)
	if !ok || err != nil || n < 0 || n > maxChunkBytes || len(sig) != 64 {
		return errorf(ErrInvalidRequest, "%v: chunk header %q", errChunkFormat, line)
	}
	c.left, c.want = n, sig
	c.sum.Reset()
	return nil
}

// endChunk checks the chunk just read: its CRLF and its signature.
func (c *chunkedReader) endChunk() *Error {
	var crlf [2]byte
	if _, err := io.ReadFull(c.r, crlf[:]); err != nil || string(crlf[:]) != "\r\n" {
		return errorf(ErrIncompleteBody, "%v: chunk data not followed by CRLF", errChunkFormat)
	}
	got := c.sig.sign(c.prev, hex.EncodeToString(c.sum.Sum(nil)))
	if !hmac.Equal([]byte(got), []byte(c.want)) {
		return errorf(ErrSignatureDoesNotMatch, "a chunk signature of the aws-chunked body does not match")
	}
	c.prev = got
	return nil
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		if e := c.header(); e != nil {
			return c.fail(e)
		}
		if c.left == 0 { // the last chunk
			if e := c.endChunk(); e != nil {
				return c.fail(e)
			}
			c.done = true
			return 0, io.EOF
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.sum.Write(p[:n])
	c.left -= int64(n)
	if c.left == 0 {
		if e := c.endChunk(); e != nil {
			// NB: the chunk's bytes are withheld with the error.
			return c.fail(e)
		}
	} else if errors.Is(err, io.EOF) {
		return c.fail(errorf(ErrIncompleteBody, "the aws-chunked body ends inside a chunk"))
	}
	return n, nil
}
