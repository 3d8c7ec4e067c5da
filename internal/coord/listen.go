package coord

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/flashmend/flashmend/internal/base"
)

// listenFile remembers the port the coordinator served on, so that a
// restart on the same directory keeps the cluster endpoint (and every shell
// that exported it) valid.
const listenFile = "listen.json"

// listenRecord is listenFile's content. CRC32C covers the decimal port; a
// file that fails it is ignored (a new port is chosen and remembered).
type listenRecord struct {
	Port   int    `json:"port"`
	CRC32C uint32 `json:"crc32c"`
}

func portChecksum(port int) uint32 {
	return base.CRC32C([]byte(strconv.Itoa(port)))
}

// RememberedPort returns the coordinator port recorded in dir, 0 when none
// is recorded or the record does not verify.
func RememberedPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, listenFile))
	if err != nil {
		return 0
	}
	var r listenRecord
	if json.Unmarshal(b, &r) != nil || r.Port <= 0 || r.Port > 65535 || r.CRC32C != portChecksum(r.Port) {
		return 0
	}
	return r.Port
}

func rememberPort(dir string, port int) error {
	b, err := json.Marshal(listenRecord{Port: port, CRC32C: portChecksum(port)})
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, listenFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, listenFile))
}

// listen opens the coordinator's gRPC listener. An explicit addr is used as
// given. Without one, with a directory, the coordinator listens on
// 127.0.0.1 at the port remembered in dir; a free port is chosen (and
// remembered) only the first time, or when the remembered one has been
// taken by another program, which is logged.
func listen(addr, dir string, logf func(string, ...any)) (net.Listener, error) {
	if addr != "" || dir == "" {
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		return net.Listen("tcp", addr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if port := RememberedPort(dir); port != 0 {
		lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			return lis, nil
		}
		logf("coordinator: port %d (remembered in %s) is not available (%v); choosing a new one", port, dir, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := rememberPort(dir, lis.Addr().(*net.TCPAddr).Port); err != nil {
		lis.Close()
		return nil, fmt.Errorf("coordinator: remember port: %w", err)
	}
	return lis, nil
}
