package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pyTool returns the path of a tool `make pytools` installs into
// bin/pyvenv (from PyPI, pinned); it skips the test only when there is no
// python3 to install it with.
func pyTool(t *testing.T, name string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("python3 is not installed: the %s test needs it", name)
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", "pyvenv", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no %s at %s: run 'make pytools' (make test does)", name, p)
	}
	return p
}

// TestAWSCLI drives the gateway with the AWS CLI (v1, from PyPI),
// unchanged: 'aws s3' mb/cp/ls/presign/rm/rb, with a copy large enough to
// go multipart, and 'aws s3api' for a multipart upload part by part, a
// ranged get and an abort.
func TestAWSCLI(t *testing.T) {
	aws := pyTool(t, "aws")
	endpoint, c := startGateway(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[default]\nregion = us-east-1\ns3 =\n"+
		"  addressing_style = path\n  signature_version = s3v4\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n  max_concurrent_requests = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, aws, append([]string{"--endpoint-url", endpoint}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "AWS_CONFIG_FILE="+config, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"),
			"AWS_ACCESS_KEY_ID="+testAccessKey, "AWS_SECRET_ACCESS_KEY="+testSecretKey, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_MAX_ATTEMPTS=1", "AWS_RETRY_MODE=standard")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aws %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	jsonOf := func(out string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("not JSON: %v: %q", err, out)
		}
		return m
	}
	rng := rand.New(rand.NewSource(11))
	write := func(name string, n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := write("big.bin", 12<<20+7)
	write("small.txt", 12)

	run("s3", "mb", "s3://cli")
	run("s3", "cp", "big.bin", "s3://cli/dir/big.bin") // 3 parts of 5 MiB at most
	run("s3", "cp", "small.txt", "s3://cli/small.txt")
	if ls := run("s3", "ls", "s3://cli/"); !strings.Contains(ls, "PRE dir/") || !strings.Contains(ls, " 12 small.txt") {
		t.Fatalf("aws s3 ls s3://cli/:\n%s", ls)
	}
	if ls := run("s3", "ls", "s3://cli/dir/"); !strings.Contains(ls, " 12582919 big.bin") {
		t.Fatalf("aws s3 ls s3://cli/dir/:\n%s", ls)
	}
	run("s3", "cp", "s3://cli/dir/big.bin", "down.bin")
	if got, err := os.ReadFile(filepath.Join(dir, "down.bin")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("aws s3 cp down: %d bytes, differ (%v)", len(got), err)
	}
	if head := jsonOf(run("s3api", "head-object", "--bucket", "cli", "--key", "dir/big.bin")); !strings.HasSuffix(head["ETag"].(string), `-3"`) {
		t.Fatalf("aws s3 cp of 12 MiB did not go multipart in 3 parts: %v", head)
	}

	// s3api: a multipart upload, part by part.
	up := jsonOf(run("s3api", "create-multipart-upload", "--bucket", "cli", "--key", "api.bin"))["UploadId"].(string)
	p1, p2 := write("p1", 5<<20), write("p2", 1000)
	e1 := jsonOf(run("s3api", "upload-part", "--bucket", "cli", "--key", "api.bin", "--upload-id", up, "--part-number", "1", "--body", "p1"))["ETag"]
	e2 := jsonOf(run("s3api", "upload-part", "--bucket", "cli", "--key", "api.bin", "--upload-id", up, "--part-number", "2", "--body", "p2"))["ETag"]
	parts := jsonOf(run("s3api", "list-parts", "--bucket", "cli", "--key", "api.bin", "--upload-id", up))["Parts"].([]any)
	if len(parts) != 2 || parts[1].(map[string]any)["Size"].(float64) != 1000 {
		t.Fatalf("list-parts: %v", parts)
	}
	doc, _ := json.Marshal(map[string]any{"Parts": []map[string]any{{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}}})
	if err := os.WriteFile(filepath.Join(dir, "parts.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	done := jsonOf(run("s3api", "complete-multipart-upload", "--bucket", "cli", "--key", "api.bin", "--upload-id", up, "--multipart-upload", "file://parts.json"))
	if !strings.HasSuffix(done["ETag"].(string), `-2"`) {
		t.Fatalf("complete-multipart-upload: %v", done)
	}
	whole := append(bytes.Clone(p1), p2...)
	got := jsonOf(run("s3api", "get-object", "--bucket", "cli", "--key", "api.bin", "--range", "bytes=5242870-5242889", "range.out"))
	if b, err := os.ReadFile(filepath.Join(dir, "range.out")); err != nil || !bytes.Equal(b, whole[5242870:5242890]) || got["ContentRange"] != "bytes 5242870-5242889/5243880" {
		t.Fatalf("get-object --range across the parts: %v (%v)", got, err)
	}
	ab := jsonOf(run("s3api", "create-multipart-upload", "--bucket", "cli", "--key", "aborted"))["UploadId"].(string)
	run("s3api", "upload-part", "--bucket", "cli", "--key", "aborted", "--upload-id", ab, "--part-number", "1", "--body", "p2")
	run("s3api", "abort-multipart-upload", "--bucket", "cli", "--key", "aborted", "--upload-id", ab)

	// A presigned URL reads with a plain HTTP client.
	u := strings.TrimSpace(run("s3", "presign", "s3://cli/small.txt", "--expires-in", "300"))
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 12 {
		t.Fatalf("presigned get: %d %q", resp.StatusCode, b)
	}

	run("s3", "rm", "s3://cli/small.txt")
	run("s3", "rm", "--recursive", "s3://cli/")
	run("s3", "rb", "s3://cli")
	if recs, err := c.List(ctx, ""); err != nil || len(recs) != 0 {
		t.Fatalf("after aws s3 rm and rb the cluster holds %v (%v)", recs, err)
	}
}
