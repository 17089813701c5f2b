package echomq

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

func TestSchedulersUpsertGetListCountRemove(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	s := q.Schedulers()
	created, err := s.Upsert(ctx, "report", RepeatOptions{Every: 60000}, SchedulerTemplate{Data: map[string]int{"n": 1}, Opts: SchedulerJobOptions{Priority: 3}})
	if err != nil || created.Status != "created" || created.NextRunAt == nil || created.JobID == "" {
		t.Fatal(created, err)
	}
	again, err := s.Upsert(ctx, "report", RepeatOptions{Every: 60000}, SchedulerTemplate{Data: map[string]int{"n": 2}})
	if err != nil || again.Status != "updated" || *again.NextRunAt != *created.NextRunAt || again.JobID != created.JobID {
		t.Fatalf("an unchanged definition keeps its occurrence: %+v %v (was %+v)", again, err, created)
	}
	replaced, err := s.Upsert(ctx, "report", RepeatOptions{Pattern: "0 9 * * *", TZ: "Europe/Berlin"}, SchedulerTemplate{})
	if err != nil || replaced.Status != "replaced" || replaced.JobID == created.JobID {
		t.Fatal(replaced, err)
	}
	if _, err := s.Upsert(ctx, "nightly", RepeatOptions{Pattern: "0 0 * * *"}, SchedulerTemplate{Name: "night"}); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get(ctx, "report")
	if err != nil || v == nil || v.Repeat.Pattern != "0 9 * * *" || v.Repeat.TZ != "Europe/Berlin" || v.Name != "report" || v.NextRunAt == nil || v.JobID != replaced.JobID {
		t.Fatalf("%+v %v", v, err)
	}
	// The waiting occurrence is an ordinary delayed job at the scheduler's instant.
	row, err := q.Get(ctx, v.JobID)
	if err != nil || row == nil || row.State != "scheduled" || row.RunAt == nil || *row.RunAt != *v.NextRunAt {
		t.Fatalf("%+v %v", row, err)
	}
	list, err := s.List(ctx, 0, -1)
	if err != nil || len(list) != 2 || *list[0].NextRunAt > *list[1].NextRunAt {
		t.Fatalf("soonest first: %+v %v", list, err)
	}
	if n, err := s.Count(ctx); err != nil || n != 2 {
		t.Fatal(n, err)
	}
	if none, err := s.Get(ctx, "absent"); err != nil || none != nil {
		t.Fatal(none, err)
	}
	if ok, err := s.RemoveByKey(ctx, "report"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if row, _ := q.Get(ctx, v.JobID); row != nil {
		t.Fatalf("the waiting occurrence goes with its scheduler: %+v", row)
	}
	if ok, _ := s.Remove(ctx, "report"); ok {
		t.Fatal("removed twice")
	}
	if n, _ := s.Count(ctx); n != 1 {
		t.Fatal(n)
	}
	ended, err := s.Upsert(ctx, "past", RepeatOptions{Every: 1000, EndDate: int64p(1000)}, SchedulerTemplate{})
	if err != nil || ended.Status != "ended" || ended.NextRunAt != nil || ended.JobID != "" {
		t.Fatal(ended, err)
	}
	_, err = s.Upsert(ctx, "bad", RepeatOptions{Pattern: "61 * * * *"}, SchedulerTemplate{})
	if !errors.Is(err, &Error{Code: "EMQCRON"}) {
		t.Fatalf("a bad pattern is EMQCRON: %v", err)
	}
	if _, err := s.Upsert(ctx, "both", RepeatOptions{Every: 5, Pattern: "* * * * *"}, SchedulerTemplate{}); !errors.Is(err, ErrInput) {
		t.Fatal(err)
	}
}

func int64p(n int64) *int64 { return &n }

// A Go-only consumer serves an every-100 ms scheduler and a cron every second: every slot once,
// on its grid, none early (the row's start is never before its run-at), none twice.
func TestAGoConsumerServesEverySlotOfItsSchedulersOnce(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	s := q.Schedulers()
	if _, err := s.Upsert(ctx, "fast", RepeatOptions{Every: 100}, SchedulerTemplate{Name: "fast"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upsert(ctx, "tick", RepeatOptions{Pattern: "* * * * * *"}, SchedulerTemplate{Name: "tick"}); err != nil {
		t.Fatal(err)
	}
	// Cut the cron lookahead to one instant, so the slots after it need this consumer's
	// recurrence leg (promote's handoffs, the top-up and the hand-off), not only promote.
	conn := q.client.Conn()
	ahead, _ := redis.String(conn.Do("HGET", q.Key("scheduler:tick"), "ahead"))
	if len(strings.Fields(ahead)) != Ahead {
		t.Fatalf("the upsert wrote a lookahead of %d instants, want %d: %q", len(strings.Fields(ahead)), Ahead, ahead)
	}
	conn.Do("HSET", q.Key("scheduler:tick"), "ahead", strings.Fields(ahead)[0])
	conn.Close()
	var mu sync.Mutex
	runs := map[string][]int64{}
	seen := map[string]int{}
	early := 0
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		row, err := q.Get(ctx, job.ID)
		if err != nil || row == nil || row.RunAt == nil || row.StartedAt == nil {
			return nil, errors.New("no row")
		}
		mu.Lock()
		defer mu.Unlock()
		seen[job.ID]++
		runs[job.Name] = append(runs[job.Name], *row.RunAt)
		if *row.StartedAt < *row.RunAt {
			early++
		}
		return nil, nil
	}, ConsumerOptions{Concurrency: 4, BeatMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "5 cron runs and 40 every runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs["tick"]) >= 5 && len(runs["fast"]) >= 40
	})
	if err := c.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	if early > 0 {
		t.Errorf("%d runs started before their run-at", early)
	}
	for name, period := range map[string]int64{"fast": 100, "tick": 1000} {
		slots := append([]int64(nil), runs[name]...)
		sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
		for i := 1; i < len(slots); i++ {
			if slots[i]-slots[i-1] != period {
				t.Errorf("%s: slot %d is %d ms after the previous, want %d (none skipped, none twice): %v", name, i, slots[i]-slots[i-1], period, slots)
				break
			}
		}
	}
}

// The hand-off: an occurrence cancelled before it ran is followed by the recurrence leg (Advance),
// and a limit ends the scheduler.
func TestAdvanceFollowsACancelledOccurrenceAndEndsAtTheLimit(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	s := q.Schedulers()
	up, err := s.Upsert(ctx, "thrice", RepeatOptions{Every: 50, Limit: 3}, SchedulerTemplate{})
	if err != nil {
		t.Fatal(err)
	}
	if status, err := q.Cancel(ctx, up.JobID); err != nil || status != "cancelled" {
		t.Fatal(status, err)
	}
	var made []string
	waitFor(t, 5*time.Second, "the scheduler to end", func() bool {
		out, err := s.Advance(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, out.Made...)
		for _, id := range made {
			q.Cancel(ctx, id) // never run: the hand-off follows each
		}
		v, _ := s.Get(ctx, "thrice")
		return v != nil && v.Ended != ""
	})
	v, _ := s.Get(ctx, "thrice")
	if v.Ended != "limit" || v.IterationCount != 3 || v.NextRunAt != nil || len(made) != 2 {
		t.Fatalf("%+v made %v", v, made)
	}
}

func TestRepeatRegisterListPumpUnregister(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	r := q.Repeat()
	status, err := r.Register(ctx, "beat", 50, map[string]string{"k": "v"}, RegisterOptions{})
	if err != nil || status != "registered" {
		t.Fatal(status, err)
	}
	if status, _ := r.Register(ctx, "beat", 50, nil, RegisterOptions{}); status != "exists" {
		t.Fatal(status)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].EveryMs != 50 || string(list[0].Template) != `{"k":"v"}` || list[0].CatchUp != "once" {
		t.Fatalf("%+v %v", list, err)
	}
	var mu sync.Mutex
	count := 0
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		mu.Lock()
		count++
		mu.Unlock()
		return nil, nil
	}, ConsumerOptions{BeatMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "5 occurrences", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return count >= 5
	})
	c.Close(5 * time.Second)
	if ok, err := r.Unregister(ctx, "beat"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if list, _ := r.List(ctx); len(list) != 0 {
		t.Fatal(list)
	}
	if _, err := r.Pump(ctx, 0); err != nil {
		t.Fatal(err)
	}
}
