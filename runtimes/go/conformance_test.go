package echomq

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
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

// firstCase is the first case of a script's file.
func firstCase(t *testing.T, files []ConformanceFile, script string) *ConformanceCase {
	t.Helper()
	for _, f := range files {
		if f.Script == script && len(f.Cases) > 0 {
			return &f.Cases[0]
		}
	}
	t.Fatalf("no %s case", script)
	return nil
}

// The replayer itself: a case whose expectations differ from what the script does must fail,
// or a passing count would prove nothing.
func TestReplayerReportsADifference(t *testing.T) {
	scripts, files, conn := replayFixture(t)
	c := firstCase(t, files, "hello")
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
	// A list expectation (a job's log lines) is compared entry by entry, and a key type the
	// replayer does not know is refused, never passed unchecked.
	logCase := firstCase(t, files, "log")
	for key, raw := range logCase.Expect.Keys {
		if !strings.Contains(string(raw), `"list"`) {
			continue
		}
		for _, expectation := range []string{`{"type": "list", "value": ["not", "these", "lines"]}`, `{"type": "list", "value": []}`} {
			wrong = *logCase
			wrong.Expect.Keys = map[string]json.RawMessage{key: json.RawMessage(expectation)}
			if problems, err := ReplayCase(conn, scripts, &wrong); err != nil || len(problems) == 0 {
				t.Fatalf("a wrong list %s passed: %v %v", expectation, problems, err)
			}
		}
		wrong = *logCase
		wrong.Expect.Keys = map[string]json.RawMessage{key: json.RawMessage(strings.Replace(string(raw), `"list"`, `"later_type"`, 1))}
		if _, err := ReplayCase(conn, scripts, &wrong); err == nil || !strings.Contains(err.Error(), `"later_type" is not one this replayer knows`) {
			t.Fatalf("an unknown key type: %v", err)
		}
	}
}

// SPEC 22.1 rule 5: a case of a later level, or a placeholder of a later level, is refused naming
// the level, never skipped silently nor replayed half-understood.
func TestReplayerRefusesALaterLevelAndAnUnknownPlaceholderNamingTheLevel(t *testing.T) {
	scripts, files, conn := replayFixture(t)
	hello := *firstCase(t, files, "hello")
	later := hello
	later.Level = KnownLevel + 1
	problems, err := ReplayCase(conn, scripts, &later)
	want := fmt.Sprintf("the case needs SPEC level %d; this replayer knows level %d (SPEC 22.2, 23)", KnownLevel+1, KnownLevel)
	if err != nil || len(problems) != 1 || problems[0] != want {
		t.Fatalf("a later level's case: %v %v", problems, err)
	}
	// A canary the replay would write, to prove the refusal touched nothing.
	if _, err := conn.Do("SET", "canary", "1"); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"reply", "setup", "event"} {
		unknown := hello
		switch where {
		case "reply":
			unknown.Expect.Reply = json.RawMessage(`[1, "$later_thing"]`)
		case "setup":
			unknown.Setup = [][]string{{"HSET", "emq:{c}:meta", "at", "$later_thing"}}
		case "event":
			unknown.Expect.Events = []map[string]json.RawMessage{{"event": json.RawMessage(`"x"`), "at": json.RawMessage(`"$later_thing"`)}}
		}
		_, err := ReplayCase(conn, scripts, &unknown)
		if err == nil || !strings.Contains(err.Error(), "unknown placeholder $later_thing: this replayer knows those of SPEC level "+fmt.Sprint(KnownLevel)) {
			t.Fatalf("an unknown placeholder in the %s: %v", where, err)
		}
	}
	if n, _ := redis.Int(conn.Do("EXISTS", "canary")); n != 1 {
		t.Fatal("a refused case flushed the database: it was replayed")
	}
}
