package echomq

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The shared table (test/recurring/next-run-cases.json), the one TypeScript's
// test/recurring/next-run-cases.test.ts asserts src/recurring/next-run.ts on: TypeScript is the
// reference, so a case where Go answers otherwise is a Go bug.
func TestNextRunSharedCases(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "test", "recurring", "next-run-cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []struct {
			Name   string          `json:"name"`
			Repeat json.RawMessage `json:"repeat"`
			Ref    string          `json:"ref"`
			Count  int64           `json:"count"`
			Next   *string         `json:"next"`
			Error  string          `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(text, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) < 50 {
		t.Fatalf("the table has %d cases, want at least 50", len(table.Cases))
	}
	for _, c := range table.Cases {
		ref, err := time.Parse(time.RFC3339Nano, c.Ref)
		if err != nil {
			t.Fatalf("%s: bad ref %q", c.Name, c.Ref)
		}
		next, ok, err := int64(0), false, error(nil)
		r, err := ParseRepeat(c.Repeat)
		if err == nil {
			next, ok, err = CalculateNextMillis(r, ref.UnixMilli(), c.Count)
		}
		if c.Error != "" {
			var e *Error
			if !errors.As(err, &e) || e.Code != c.Error {
				t.Errorf("%s: want %s, got next %d ok %v err %v", c.Name, c.Error, next, ok, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		got := "null"
		if ok {
			got = time.UnixMilli(next).UTC().Format("2006-01-02T15:04:05.000Z")
		}
		want := "null"
		if c.Next != nil {
			want = *c.Next
		}
		if got != want {
			t.Errorf("%s: got %s, want %s (TypeScript's)", c.Name, got, want)
		}
	}
}
