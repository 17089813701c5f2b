package echomq_test

import (
	"errors"
	"fmt"

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
