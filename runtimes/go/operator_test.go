package echomq

import (
	"context"
	"errors"
	"testing"

	"github.com/gomodule/redigo/redis"
)

func TestMigrateStepsUpOnlyWhenTheFleetSpeaksTheVersion(t *testing.T) {
	ctx := context.Background()
	q := testQueueAt(t, 1)
	if _, err := q.Greeting(ctx); err != nil { // stamped 1, a fleet's that still holds a release speaking 1 only
		t.Fatal(err)
	}
	for _, bad := range []MigrateOptions{{To: 3}, {To: -1}, {Window: -1}} {
		if _, err := q.Migrate(ctx, bad); !errors.Is(err, ErrInput) {
			t.Fatalf("Migrate(%+v): %v, want EMQINPUT", bad, err)
		}
	}
	// A consumer of a previous release (its heartbeat lists no protocols: it speaks 1) holds it.
	if _, err := q.Run(ctx, "heartbeat", "", q.Prefix, "old-release", `{"host":"h","pid":1}`); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Migrate(ctx, MigrateOptions{}); !errors.Is(err, ErrFleet) {
		t.Fatalf("migrate beside a consumer speaking 1 only: %v, want EMQFLEET", err)
	}
	if v, _ := q.ProtocolVersion(ctx); v != 1 {
		t.Fatalf("a refused migrate changed the version to %d", v)
	}
	if _, err := q.Run(ctx, "heartbeat", "", q.Prefix, "old-release", ""); err != nil { // it leaves
		t.Fatal(err)
	}
	out, err := q.Migrate(ctx, MigrateOptions{})
	if err != nil || out != (MigrateResult{From: 1, Version: 2, Consumers: 0}) {
		t.Fatalf("migrate with no consumer left: %+v %v", out, err)
	}
	if g, _ := q.Greeting(ctx); g.Version != 2 {
		t.Fatalf("the handle speaks %d after migrate, want 2", g.Version)
	}
	if again, err := q.Migrate(ctx, MigrateOptions{To: 2}); err != nil || again != (MigrateResult{From: 2, Version: 2}) {
		t.Fatalf("a second migrate to 2: %+v %v, want nothing to do", again, err)
	}
	if _, err := q.Migrate(ctx, MigrateOptions{To: 1}); !errors.Is(err, ErrInput) {
		t.Fatalf("a step down: %v, want EMQINPUT", err)
	}
}

func TestLanesListedWithTheirCountsAndSettings(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	lanes := q.Lanes()
	two := 2
	if err := lanes.Configure(ctx, "a", LaneSettings{Concurrency: &two}); err != nil {
		t.Fatal(err)
	}
	if err := lanes.ConfigureDefault(ctx, LaneSettings{Rate: &RateLimit{Max: 5, PerMs: 1000}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"b", "a", "a", "a"} {
		if _, err := q.Enqueue(ctx, "x", &JobOptions{Group: g}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lanes.Pause(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, q, 10); len(got) != 2 { // lane a's cap; lane b is paused
		t.Fatalf("claimed %v, want lane a's 2", got)
	}
	list, err := lanes.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatal(list, err)
	}
	rate := RateLimit{Max: 5, PerMs: 1000}
	a, b := list[0], list[1]
	if a.Group != "a" || a.Pending != 1 || a.Running != 2 || a.Paused || a.Concurrency != 2 || a.Rate == nil || *a.Rate != rate {
		t.Fatalf("lane a: %+v", a)
	}
	if b.Group != "b" || b.Pending != 1 || b.Running != 0 || !b.Paused || b.Concurrency != 0 || b.Rate == nil || *b.Rate != rate {
		t.Fatalf("lane b: %+v", b)
	}
}

func TestObliterateDeletesEveryKeyAndTheQueueStartsAfresh(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	for i := 0; i < 30; i++ {
		if _, err := q.Enqueue(ctx, i, &JobOptions{Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	claimIDs(t, q, 1)
	if _, err := q.Obliterate(ctx, ObliterateOptions{Batch: 100001}); !errors.Is(err, ErrInput) {
		t.Fatalf("a batch over 100000: %v, want EMQINPUT", err)
	}
	if _, err := q.Obliterate(ctx, ObliterateOptions{}); !errors.Is(err, ErrState) {
		t.Fatalf("obliterate with a job active: %v, want EMQSTATE", err)
	}
	if n, _ := keysOf(t, q); n == 0 {
		t.Fatal("a refused obliterate deleted the queue")
	}
	deleted, err := q.Obliterate(ctx, ObliterateOptions{Force: true, Batch: 5})
	if err != nil || deleted < 30 {
		t.Fatalf("obliterate: %d keys, %v", deleted, err)
	}
	if n, listed := keysOf(t, q); n != 0 || listed {
		t.Fatalf("after obliterate: %d keys left, listed %v", n, listed)
	}
	// The next call finds a fresh queue: hello stamps it again.
	if _, err := q.Enqueue(ctx, "again", nil); err != nil {
		t.Fatal(err)
	}
	conn := q.client.Conn()
	defer conn.Close()
	if v, err := redis.Int(conn.Do("HGET", q.Key("meta"), "version")); err != nil || v != DefaultProtocolVersion {
		t.Fatalf("meta version after a fresh start: %d %v", v, err)
	}
}
