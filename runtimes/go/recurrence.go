package echomq

// The consumer's recurrence leg (TypeScript's src/consumer/legs.ts `recurring`): the Repeat
// pump and this consumer's share of the schedulers' hand-off (JobSchedulers.Advance). An
// `every` scheduler, a cron scheduler with a lookahead and a Repeat cadence need neither:
// promote makes the next occurrence when it releases the current one, so their slots never
// wait for this leg. It runs once a beat, at the instant a reply reported (a cadence's slot
// nothing released, a scheduler whose next run a runtime computes), at once when promote
// reports `handoffs` (a release it could not follow, or a lookahead running low), and at once
// when a wake says a definition changed (`w r`: register, upsert).

import (
	"context"
	"sync"
	"time"
)

// minRecurringWait is the shortest wait before the leg runs again for an instant already due.
const minRecurringWait = 50 * time.Millisecond

// recurring runs the leg when it is due; true when it released or made occurrences.
func (c *Consumer) recurring() (bool, error) {
	now := time.Now()
	c.mu.Lock()
	beat := time.Duration(c.opts.BeatMs) * time.Millisecond
	due := !c.recurringDueAt.IsZero() && !now.Before(c.recurringDueAt)
	if !c.recurrenceMoved && !due && now.Sub(c.lastRecurring) < beat {
		c.mu.Unlock()
		return false, nil
	}
	c.recurrenceMoved = false
	c.mu.Unlock()
	ctx := context.Background()
	var wg sync.WaitGroup
	var pump PumpResult
	var handoff AdvanceResult
	var pumpErr, handoffErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		pump, pumpErr = c.q.Repeat().Pump(ctx, c.opts.PromoteBatch)
	}()
	go func() {
		defer wg.Done()
		handoff, handoffErr = c.q.Schedulers().Advance(ctx, c.opts.PromoteBatch)
	}()
	wg.Wait()
	if pumpErr != nil || handoffErr != nil {
		c.mu.Lock()
		c.recurrenceMoved = true // try again on the next beat
		c.mu.Unlock()
		if pumpErr != nil {
			return false, pumpErr
		}
		return false, handoffErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastRecurring = now
	// Server instants: only their difference from the reply's now is used.
	until := func(due, serverNow int64) time.Duration {
		if due < 0 {
			return -1
		}
		return time.Duration(due-serverNow) * time.Millisecond
	}
	c.recurringDueAt = time.Time{}
	for _, d := range []time.Duration{until(pump.NextDue, pump.Now), until(handoff.NextDue, handoff.Now)} {
		if d < 0 {
			continue
		}
		if d < minRecurringWait {
			// Due already (more than a batch, or one left to another runtime): soon, not a spin.
			d = minRecurringWait
		}
		at := time.Now().Add(d)
		if c.recurringDueAt.IsZero() || at.Before(c.recurringDueAt) {
			c.recurringDueAt = at
		}
	}
	released := len(pump.Minted) > 0 || len(handoff.Made) > 0
	if released {
		c.short = false
	}
	return released, nil
}
