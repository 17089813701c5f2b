package echomq

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestMintedIDsSortInMintOrderThroughAFrozenAndABackwardClock(t *testing.T) {
	clock := int64(1_700_000_000_000)
	m := NewMinter(func() int64 { return clock }, func(b []byte) error {
		for i := range b {
			b[i] = 7
		}
		return nil
	})
	var last string
	for i := 0; i < 1000; i++ {
		if i == 500 {
			clock -= 10_000 // a clock step back keeps the order
		}
		id, err := m.Mint()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 23 || !strings.HasPrefix(id, "JOB") {
			t.Fatalf("id %q is not JOB + 20 characters", id)
		}
		if id <= last {
			t.Fatalf("id %q minted after %q does not sort after it", id, last)
		}
		last = id
	}
	if got := last[3:13]; got != EncodeTime(1_700_000_000_000) {
		t.Fatalf("time part %s moved although the random part never overflowed", got)
	}
}

func TestARandomPartOverflowMovesTheTimeOnByOneMsAndDrawsAfresh(t *testing.T) {
	draws := 0
	m := NewMinter(func() int64 { return 1000 }, func(b []byte) error {
		draws++
		for i := range b {
			b[i] = 31 // all Z: the next increment overflows
		}
		return nil
	})
	first, _ := m.Mint()
	second, _ := m.Mint()
	if first != "JOB"+EncodeTime(1000)+"ZZZZZZZZZZ" {
		t.Fatalf("first id %s", first)
	}
	if second != "JOB"+EncodeTime(1001)+"ZZZZZZZZZZ" || draws != 2 {
		t.Fatalf("after overflow: %s with %d draws, want time 1001 and a fresh draw", second, draws)
	}
}

func TestCheckIDRefusesWhatTheTypeScriptRuntimeRefuses(t *testing.T) {
	for _, id := range []string{"job1", "JOB", "JOB 1", "JOB\n1", "X" + strings.Repeat("1", 10), "JOB" + strings.Repeat("x", 510)} {
		if err := CheckID(id); Code(err) != "EMQKIND" {
			t.Errorf("CheckID(%q) = %v, want EMQKIND", id, err)
		}
	}
	if err := CheckID("JOB1"); err != nil {
		t.Fatal(err)
	}
}

func TestBackoffFormulasOfTheSpec(t *testing.T) {
	half := func() float64 { return 0.5 }
	cases := []struct {
		policy *Backoff
		n      int
		want   int64
	}{
		{Fixed(250), 1, 250},
		{Fixed(250), 9, 250},
		{Exponential(100, 10_000), 1, 100},
		{Exponential(100, 10_000), 4, 800},
		{Exponential(100, 10_000), 8, 10_000},
		{Exponential(1<<52, 1<<53-1), 60, 1<<53 - 1},
		{Exponential(3, 5), 2, 5},
		{Jitter(Fixed(100)), 1, 50}, // floor(0.5 × 101)
		{Jitter(Fixed(0)), 1, 0},    // bound 0
		{Jitter(Exponential(100, 1000)), 2, 100},
	}
	for _, c := range cases {
		got, err := c.policy.DelayMs(c.n, half)
		if err != nil || got != c.want {
			t.Errorf("%+v attempt %d: %d, %v; want %d", c.policy, c.n, got, err, c.want)
		}
	}
	if _, err := (&Backoff{Kind: "linear"}).DelayMs(1, half); Code(err) != "EMQINPUT" {
		t.Fatalf("an unknown kind: %v", err)
	}
}

func TestBackoffJSONIsWrittenAsTypeScriptWritesIt(t *testing.T) {
	b := Jitter(Exponential(1000, 300000))
	text, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != `{"kind":"jitter","inner":{"kind":"exponential","base":1000,"cap":300000}}` {
		t.Fatalf("wrote %s", text)
	}
	back, err := ParseBackoff(`{"kind":"jitter","inner":{"cap":300000,"base":1000,"kind":"exponential","extra":1}}`)
	if err != nil || !reflect.DeepEqual(back, b) {
		t.Fatalf("read %+v, %v", back, err)
	}
	for _, bad := range []string{`nope`, `{"kind":"fixed"}`, `{"kind":"fixed","ms":1.5}`, `{"kind":"exponential","base":0,"cap":1}`, `{"kind":"jitter"}`} {
		if _, err := ParseBackoff(bad); Code(err) != "EMQINPUT" {
			t.Errorf("ParseBackoff(%s) = %v, want EMQINPUT", bad, err)
		}
	}
}

func TestEntriesForSeveralJobsExpandIntoOneEventEach(t *testing.T) {
	got := ExpandEntry("5-0", []string{"event", "active", "id", "JOB1", "attempt", "1", "ids", "JOB1 JOB2 JOB3", "attempts", "1 3 2"})
	want := []Event{
		{Event: "active", ID: "JOB1", StreamID: "5-0", Fields: map[string]string{"attempt": "1"}},
		{Event: "active", ID: "JOB2", StreamID: "5-0", Fields: map[string]string{"attempt": "3"}},
		{Event: "active", ID: "JOB3", StreamID: "5-0", Fields: map[string]string{"attempt": "2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	added := ExpandEntry("6-0", []string{"event", "added", "id", "JOB1", "name", "mail", "ids", "JOB1 JOB2"})
	if len(added) != 2 || added[1].ID != "JOB2" || added[1].Fields["name"] != "mail" {
		t.Fatalf("a shared field: %+v", added)
	}
	plain := ExpandEntry("7-0", []string{"event", "failed", "id", "JOB9", "attempt", "2", "reason", "error"})
	if len(plain) != 1 || plain[0].Fields["reason"] != "error" || plain[0].ID != "JOB9" {
		t.Fatalf("a plain entry: %+v", plain)
	}
}
