package echomq

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// claimIDs claims up to n jobs by hand (the claim script), for tests of what is claimable.
func claimIDs(t *testing.T, q *Queue, n int) []string {
	ctx := context.Background()
	t.Helper()
	reply, err := redis.Values(q.Run(ctx, "claim", "", q.Prefix, n, 30000, "test"))
	if err != nil {
		t.Fatal(err)
	}
	flat, _ := redis.Values(reply[0], nil)
	var ids []string
	for i := 0; i+6 < len(flat); i += 7 {
		id, _ := redis.String(flat[i], nil)
		ids = append(ids, id)
	}
	return ids
}

func TestPauseResumeAndLanes(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, map[string]int{"n": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.Pause(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, _ := q.Pause(ctx); ok {
		t.Fatal("paused twice")
	}
	if ids := claimIDs(t, q, 10); len(ids) != 0 {
		t.Fatalf("a paused queue gave %v", ids)
	}
	if ok, err := q.Resume(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ids := claimIDs(t, q, 10); len(ids) != 1 {
		t.Fatalf("a resumed queue gave %v", ids)
	}
	lanes := q.Lanes()
	one := 1
	if err := lanes.Configure(ctx, "g", LaneSettings{Concurrency: &one}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		q.Enqueue(ctx, map[string]int{"n": i}, &JobOptions{Group: "g"})
	}
	if ids := claimIDs(t, q, 10); len(ids) != 1 {
		t.Fatalf("a lane of concurrency 1 gave %v", ids)
	}
	if ok, err := lanes.Pause(ctx, "h"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	q.Enqueue(ctx, map[string]int{"n": 9}, &JobOptions{Group: "h"})
	flat, _ := q.Enqueue(ctx, map[string]int{"n": 10}, nil)
	if ids := claimIDs(t, q, 10); len(ids) != 1 || ids[0] != flat.ID {
		t.Fatalf("a paused lane's job was claimed: %v", ids)
	}
	if ok, err := lanes.Resume(ctx, "h"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ids := claimIDs(t, q, 10); len(ids) != 1 {
		t.Fatalf("the resumed lane gave %v", ids)
	}
	if err := lanes.Configure(ctx, "g", LaneSettings{ClearConcurrency: true, Rate: &RateLimit{Max: 5, PerMs: 1000}}); err != nil {
		t.Fatal(err)
	}
	if err := lanes.ConfigureDefault(ctx, LaneSettings{Rate: &RateLimit{Max: 0, PerMs: 10}}); !errors.Is(err, ErrInput) {
		t.Fatalf("a bad rate is EMQINPUT: %v", err)
	}
	if err := lanes.Configure(ctx, "{bad}", LaneSettings{}); !errors.Is(err, ErrInput) {
		t.Fatal(err)
	}
}

func TestChangingAJobThatHasNotStarted(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	a, _ := q.EnqueueIn(ctx, map[string]int{"n": 1}, time.Hour, nil)
	at, err := q.RescheduleIn(ctx, a.ID, 2*time.Hour)
	v, _ := q.Get(ctx, a.ID)
	if err != nil || v.RunAt == nil || *v.RunAt != at {
		t.Fatal(at, err, v)
	}
	if err := q.Reprioritize(ctx, a.ID, 7); err != nil {
		t.Fatal(err)
	}
	if err := q.Update(ctx, a.ID, map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if err := q.Promote(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	v, _ = q.Get(ctx, a.ID)
	if v.State != "pending" || string(v.Data) != `{"n":2}` || v.Priority == nil || *v.Priority != 7 {
		t.Fatalf("%+v", v)
	}
	if err := q.Promote(ctx, a.ID); !errors.Is(err, ErrState) {
		t.Fatalf("promoting a pending job is EMQSTATE: %v", err)
	}
	counts, err := q.Counts(ctx)
	if err != nil || counts["pending"] != 1 || counts["scheduled"] != 0 {
		t.Fatal(counts, err)
	}
	if ok, err := q.Remove(ctx, a.ID); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, _ := q.Remove(ctx, a.ID); ok {
		t.Fatal("removed twice")
	}
	if _, err := q.RescheduleAt(ctx, a.ID, 5); !errors.Is(err, ErrNoJob) {
		t.Fatalf("rescheduling no job is EMQNOJOB: %v", err)
	}
}

func TestDrainRetryRetryAllCleanAndWaitFor(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		q.Enqueue(ctx, map[string]int{"n": i}, nil)
	}
	q.EnqueueIn(ctx, map[string]int{"n": 5}, time.Hour, nil)
	q.EnqueueIn(ctx, map[string]int{"n": 6}, time.Hour, nil)
	if n, err := q.Drain(ctx, DrainOptions{Batch: 2}); err != nil || n != 5 {
		t.Fatal(n, err)
	}
	if n, err := q.Drain(ctx, DrainOptions{Scheduled: true}); err != nil || n != 2 {
		t.Fatal(n, err)
	}
	var ids []string
	for i := 0; i < 6; i++ {
		name := "ok"
		if i%2 == 1 {
			name = "bad"
		}
		a, _ := q.Enqueue(ctx, map[string]interface{}{"n": i, "fail": i%2 == 1}, &JobOptions{Name: name, Attempts: 1})
		ids = append(ids, a.ID)
	}
	var failNow atomic.Bool
	failNow.Store(true)
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		var d struct{ Fail bool }
		json.Unmarshal(job.Data, &d)
		if d.Fail && failNow.Load() {
			return nil, errors.New("boom on purpose")
		}
		return map[string]string{"by": "go"}, nil
	}, ConsumerOptions{BeatMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	result, err := q.WaitFor(ctx, ids[0])
	if err != nil || string(result) != `{"by":"go"}` {
		t.Fatal(string(result), err)
	}
	if _, err := q.WaitFor(ctx, ids[1]); !errors.Is(err, ErrJobFailed) {
		t.Fatalf("a dead job's wait is EMQJOBFAILED: %v", err)
	}
	waitFor(t, 10*time.Second, "3 dead", func() bool {
		n, _ := q.Counts(ctx)
		return n["dead"] == 3 && n["completed"] == 3
	})
	if err := q.Retry(ctx, ids[0]); err != nil {
		t.Fatal(err) // a completed job re-runs
	}
	if err := q.Retry(ctx, "JOB0000000000unknown00"); !errors.Is(err, ErrNoJob) && !errors.Is(err, ErrInput) {
		t.Fatal(err)
	}
	failNow.Store(false)
	if n, err := q.RetryAll(ctx, RetryAllOptions{Name: "bad", ErrorContains: "boom"}); err != nil || n != 3 {
		t.Fatal(n, err)
	}
	for _, id := range ids {
		if _, err := q.WaitFor(ctx, id); err != nil {
			t.Fatal(id, err)
		}
	}
	if n, err := q.Clean(ctx, "completed", 0, 100); err != nil || n != 6 {
		t.Fatal(n, err)
	}
	later, _ := q.EnqueueIn(ctx, map[string]int{"n": 1}, time.Hour, nil)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := q.WaitFor(short, later.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its context ends with the context: %v", err)
	}
	q.Cancel(ctx, later.ID)
	if _, err := q.WaitFor(ctx, later.ID); !errors.Is(err, ErrCancelled) {
		t.Fatal(err)
	}
}
