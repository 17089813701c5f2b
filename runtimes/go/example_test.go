package echomq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"echomq"
)

// The delays of a backoff policy, as every runtime computes them (SPEC.md section 5.1).
func ExampleBackoff_DelayMs() {
	policy := echomq.Exponential(1000, 5000)
	for attempt := 1; attempt <= 4; attempt++ {
		ms, _ := policy.DelayMs(attempt, nil)
		fmt.Println(attempt, ms)
	}
	// Output:
	// 1 1000
	// 2 2000
	// 3 4000
	// 4 5000
}

// A refusal matches the sentinel of its code with errors.Is; errors.As gives code and message.
func ExampleError() {
	_, err := echomq.Connect("redis://127.0.0.1:1", echomq.Options{ProtocolVersion: 7})
	fmt.Println(errors.Is(err, echomq.ErrInput), errors.Is(err, echomq.ErrLease))
	var e *echomq.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code)
	}
	// Output:
	// true false
	// EMQINPUT
}

// The next runs of a cron pattern read in a time zone, across the spring-forward gap: 02:30
// does not exist in New York on 2026-03-08, so that run is at 03:00 EDT (07:00 UTC).
func ExampleCalculateNextMillis() {
	r := echomq.RepeatOptions{Pattern: "30 2 * * *", TZ: "America/New_York"}
	at := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i := int64(0); i < 3; i++ {
		next, _, err := echomq.CalculateNextMillis(r, at, i)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(time.UnixMilli(next).UTC().Format(time.RFC3339))
		at = next
	}
	// Output:
	// 2026-03-08T07:00:00Z
	// 2026-03-09T06:30:00Z
	// 2026-03-10T06:30:00Z
}

// A pattern the Go runtime cannot read is refused with EMQCRON before anything is written.
func ExampleRepeatOptions_Validate() {
	err := echomq.RepeatOptions{Pattern: "0 9 * * MON#6"}.Validate() // there is no sixth Monday
	fmt.Println(errors.Is(err, echomq.ErrCron))
	err = echomq.RepeatOptions{Every: 1000, TZ: "UTC"}.Validate()
	fmt.Println(errors.Is(err, echomq.ErrInput))
	// Output:
	// true
	// true
}

// A scheduler defined in Go, served by any consumer of the queue (Go or TypeScript): a report
// at 09:00 Berlin time, every weekday. (Compiled, not run: it needs a Redis server.)
func ExampleJobSchedulers_Upsert() {
	client, err := echomq.Connect("redis://127.0.0.1:6379", echomq.Options{})
	if err != nil {
		return
	}
	defer client.Close()
	q, _ := client.Queue("reports")
	ctx := context.Background()
	res, err := q.Schedulers().Upsert(ctx, "daily-report",
		echomq.RepeatOptions{Pattern: "0 9 * * 1-5", TZ: "Europe/Berlin"},
		echomq.SchedulerTemplate{Name: "report", Data: map[string]string{"kind": "daily"}})
	if err == nil {
		fmt.Println(res.Status, res.JobID)
	}
}
