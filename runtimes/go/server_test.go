package echomq

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// testServer starts a redis-server of its own on a free port for one test (never the one on
// 6379), and stops it when the test ends. Without redis-server the test skips, saying so.
func testServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server): skipping the tests that need Redis")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		conn, err := redis.DialURL(url)
		if err == nil {
			_, err = conn.Do("PING")
			conn.Close()
			if err == nil {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func protocolDir(t *testing.T) string {
	t.Helper()
	dir, err := FindProtocolDir()
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	if _, err := os.Stat(filepath.Join(abs, "conformance")); err != nil {
		t.Fatalf("no conformance cases under %s", abs)
	}
	return abs
}
