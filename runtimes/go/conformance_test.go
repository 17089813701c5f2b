package echomq

import (
	"path/filepath"
	"testing"

	"github.com/gomodule/redigo/redis"
)

// replayFixture: a redis-server of the test's own, the scripts, the cases and a connection.
func replayFixture(t *testing.T) (Scripts, []ConformanceFile, redis.Conn) {
	t.Helper()
	url := testServer(t)
	dir := protocolDir(t)
	scripts, err := LoadScripts(filepath.Join(dir, "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := LoadConformance(filepath.Join(dir, "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := redis.DialURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return scripts, files, conn
}

// Every case of protocol/conformance/ replayed with this runtime's loader and Redis client.
func TestConformance(t *testing.T) {
	scripts, files, conn := replayFixture(t)
	covered := map[string]bool{}
	passed, total := 0, 0
	for _, f := range files {
		covered[f.Script] = len(f.Cases) > 0
		for i := range f.Cases {
			c := &f.Cases[i]
			total++
			t.Run(f.Script+"/"+c.Name, func(t *testing.T) {
				if c.Call.Script != f.Script {
					t.Fatalf("a file holds the cases of one script: %s in %s.json", c.Call.Script, f.Script)
				}
				problems, err := ReplayCase(conn, scripts, c)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range problems {
					t.Error(p)
				}
				if len(problems) == 0 {
					passed++
				}
			})
		}
	}
	for name := range scripts {
		if !covered[name] {
			t.Errorf("protocol/scripts/%s.lua has no conformance case", name)
		}
	}
	t.Logf("conformance: %d of %d cases pass", passed, total)
}

// The replayer itself: a case whose expectations differ from what the script does must fail,
// or a passing count would prove nothing.
func TestReplayerReportsADifference(t *testing.T) {
	scripts, files, conn := replayFixture(t)
	var c *ConformanceCase
	for _, f := range files {
		if f.Script == "hello" {
			c = &f.Cases[0]
		}
	}
	if c == nil {
		t.Fatal("no hello case")
	}
	wrong := *c
	wrong.Expect.Reply = []byte(`"not the reply"`)
	wrong.Expect.Error = nil
	problems, err := ReplayCase(conn, scripts, &wrong)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 {
		t.Fatal("a wrong expected reply passed")
	}
	wrong = *c
	wrong.Call.Keys = []string{"emq:{other}:meta"}
	if problems, _ := ReplayCase(conn, scripts, &wrong); len(problems) == 0 {
		t.Fatal("KEYS that do not follow the contract passed")
	}
}
