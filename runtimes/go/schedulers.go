package echomq

// JobSchedulers: recurring jobs by an interval, a cron pattern, or once immediately, over the
// scripts TypeScript's src/recurring/schedulers.ts calls, and stored as it stores them, so a
// scheduler upserted by either runtime is read, listed, served and removed by the other.
// Each scheduler keeps exactly one upcoming occurrence, an ordinary delayed job whose id is
// derived from the scheduler id and its instant, so upserts, restarts and racing consumers of
// either runtime never duplicate a run.
//
// The hand-off (SPEC section 15): promote makes an `every` scheduler's next occurrence in the
// call that releases the current one, and a cron scheduler's from the record's lookahead
// (`ahead`, the next 16 instants, computed here since cron is not in Lua). Advance, the
// consumer's recurrence leg, does the rest: it tops up lookaheads that run low, and for an
// occurrence promote could not follow (cancelled, removed, a lookahead that ran out) computes
// the next instant and makes it, compare-and-set on the occurrence it was computed from.

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// Ahead is how many cron instants a scheduler's lookahead holds (TypeScript's AHEAD): promote
// makes each next occurrence from it, and the recurrence leg tops it up below 4.
const Ahead = 16

// upsertTries is how many compare-and-set rounds one upsert makes racing other writers.
const upsertTries = 10

// JobSchedulers is a queue's job schedulers.
type JobSchedulers struct{ q *Queue }

// Schedulers returns the queue's job schedulers.
func (q *Queue) Schedulers() *JobSchedulers { return &JobSchedulers{q: q} }

// SchedulerJobOptions are the options of every occurrence; zero values are absent.
type SchedulerJobOptions struct {
	Priority int      `json:"priority,omitempty"` // 0: none (runs before any prioritised job)
	Group    string   `json:"group,omitempty"`    // the lane each occurrence waits in; "": none
	Attempts int      `json:"attempts,omitempty"` // 0: 1 (the next occurrence is the retry)
	Backoff  *Backoff `json:"backoff,omitempty"`  // nil: the consumer's policy
}

// SchedulerTemplate is what every occurrence is made from.
type SchedulerTemplate struct {
	Name string      // the job name; "": the scheduler id
	Data interface{} // the job data; nil: {}
	Opts SchedulerJobOptions
}

// UpsertResult: Status "created", "replaced" (the repeat options changed: the waiting
// occurrence was replaced), "updated" (same options: the template was stored and written onto
// the waiting occurrence, which keeps its instant) or "ended" (stored, no run left). NextRunAt
// is nil when no run is left; JobID "" when there is no occurrence.
type UpsertResult struct {
	Status    string
	NextRunAt *int64
	JobID     string
}

// SchedulerView is a scheduler as read (TypeScript's SchedulerView, field for field in JSON).
type SchedulerView struct {
	ID             string        `json:"id"`
	Key            string        `json:"key"`
	Name           string        `json:"name"`
	Repeat         RepeatOptions `json:"repeat"`
	RepeatText     string        `json:"-"` // the stored options as they are (another runtime's dialect included)
	Template       ViewTemplate  `json:"template"`
	NextRunAt      *int64        `json:"nextRunAt"` // nil once ended
	JobID          string        `json:"jobId,omitempty"`
	IterationCount int64         `json:"iterationCount"`
	Ended          string        `json:"ended,omitempty"`
	CreatedAt      int64         `json:"createdAt"`
	UpdatedAt      int64         `json:"updatedAt"`
}

// ViewTemplate is a scheduler's stored template.
type ViewTemplate struct {
	Data json.RawMessage     `json:"data"`
	Opts SchedulerJobOptions `json:"opts"`
}

// AdvanceResult is one hand-off: occurrences made, schedulers ended, schedulers left to a
// runtime that reads their options, the server's now and the next due instant (-1: none).
type AdvanceResult struct {
	Made    []string
	Ended   []string
	Skipped []string
	Now     int64
	NextDue int64
}

type schedulerRead struct {
	now      int64
	score    string
	fields   map[string]string
	jobState string
	waiting  bool
}

func (s *JobSchedulers) read(ctx context.Context, id string) (*schedulerRead, error) {
	reply, err := redis.Values(s.q.Run(ctx, "getJobScheduler", "", s.q.Prefix, "one", id))
	if err != nil {
		return nil, err
	}
	if len(reply) < 5 {
		return nil, newError("EMQPROTOCOL", "getJobScheduler replied %v, not {now, score, fields, job_state, waiting, …}", reply)
	}
	r := &schedulerRead{}
	r.now, _ = redis.Int64(reply[0], nil)
	r.score, _ = redis.String(reply[1], nil)
	r.fields, _ = redis.StringMap(reply[2], nil)
	r.jobState, _ = redis.String(reply[3], nil)
	waiting, _ := redis.Int(reply[4], nil)
	r.waiting = waiting == 1
	return r, nil
}

// schedulerWrite reads add/updateJobScheduler's {status, next or ”, occurrence id or ”}.
func schedulerWrite(reply interface{}, err error) (status string, next *int64, jobID string, _ error) {
	entries, err := redis.Values(reply, err)
	if err != nil {
		return "", nil, "", err
	}
	if len(entries) < 3 {
		return "", nil, "", newError("EMQPROTOCOL", "a scheduler write replied %v, not {status, next, job, …}", entries)
	}
	status, _ = redis.String(entries[0], nil)
	switch v := entries[1].(type) {
	case int64:
		next = &v
	case []byte:
		if len(v) > 0 {
			n := number(string(v))
			next = &n
		}
	}
	jobID, _ = redis.String(entries[2], nil)
	return status, next, jobID, nil
}

// lookahead is a cron pattern's next n instants after `from` with `made` runs made, as the
// scripts' `ahead` text; "" for an interval (promote computes it itself).
func lookahead(r RepeatOptions, from, made int64, n int) string {
	if r.Pattern == "" {
		return ""
	}
	out := make([]string, 0, n)
	prev := from
	for count := made; len(out) < n; count++ {
		next, ok, err := CalculateNextMillis(r, prev, count)
		if err != nil || !ok || next <= prev {
			break
		}
		out = append(out, strconv.FormatInt(next, 10))
		prev = next
	}
	return strings.Join(out, " ")
}

// endReason is why a schedule with count runs made has no next run.
func endReason(r RepeatOptions, count int64) string {
	switch {
	case r.Limit > 0 && count >= r.Limit:
		return "limit"
	case r.EndDate != nil:
		return "endDate"
	}
	return "done"
}

// NextOccurrence is the occurrence after the one at prev, as the hand-off computes it at
// server time now: the next slot; that slot although it passed when the one after has not
// (late by less than a period: it runs at once, nothing is skipped); else, two or more slots
// missed, the first slot after now (no burst; for Every, on the grid prev + k*Every).
func NextOccurrence(r RepeatOptions, prev, count, now int64) (int64, bool, error) {
	next, ok, err := CalculateNextMillis(r, prev, count)
	if err != nil || !ok || next >= now {
		return next, ok, err
	}
	after, ok2, err := CalculateNextMillis(r, next, count+1)
	if err != nil {
		return 0, false, err
	}
	if !ok2 || after > now {
		return next, true, nil
	}
	if r.Every > 0 {
		return CalculateNextMillis(r, prev+(now-prev)/r.Every*r.Every, count)
	}
	return CalculateNextMillis(r, now, count)
}

// Upsert creates or changes the scheduler id (see UpsertResult). The template's zero values
// are TypeScript's defaults (name: the id, data: {}).
func (s *JobSchedulers) Upsert(ctx context.Context, id string, repeat RepeatOptions, tpl SchedulerTemplate) (UpsertResult, error) {
	if err := CheckName("scheduler id", id); err != nil {
		return UpsertResult{}, err
	}
	if err := repeat.Validate(); err != nil {
		return UpsertResult{}, err
	}
	text, _ := json.Marshal(repeat)
	canonical := string(text)
	name := tpl.Name
	if name == "" {
		name = id
	}
	if len(name) > 200 {
		return UpsertResult{}, newError("EMQINPUT", "name must be a string of at most 200 characters")
	}
	var data interface{} = map[string]interface{}{}
	if tpl.Data != nil {
		data = tpl.Data
	}
	payload, err := EncodeJSON(data, "job data", s.q.client.opts.MaxPayloadBytes)
	if err != nil {
		return UpsertResult{}, err
	}
	o := tpl.Opts
	if o.Priority < 0 || o.Priority > 1<<21 {
		return UpsertResult{}, newError("EMQINPUT", "priority must be a whole number from 0 to 2097152, got %d", o.Priority)
	}
	if o.Group != "" {
		if err := CheckName("group", o.Group); err != nil {
			return UpsertResult{}, err
		}
	}
	maxText := ""
	if o.Attempts != 0 {
		if o.Attempts < 1 || o.Attempts > 1000000 {
			return UpsertResult{}, newError("EMQINPUT", "attempts must be a whole number from 1 to 1000000, got %d", o.Attempts)
		}
		maxText = strconv.Itoa(o.Attempts)
	}
	backoff := ""
	if o.Backoff != nil {
		if err := o.Backoff.Validate(); err != nil {
			return UpsertResult{}, err
		}
		b, err := o.Backoff.MarshalJSON()
		if err != nil {
			return UpsertResult{}, err
		}
		backoff = string(b)
	}
	for i := 0; i < upsertTries; i++ {
		read, err := s.read(ctx, id)
		if err != nil {
			return UpsertResult{}, err
		}
		stored, exists := read.fields["repeat"]
		count := number(read.fields["count"])
		next, ended, ahead := "", "", ""
		if !exists || stored != canonical {
			if read.waiting {
				count-- // the waiting occurrence is replaced, not run
			}
			at, ok, err := CalculateNextMillis(repeat, read.now, count)
			if err != nil {
				return UpsertResult{}, err
			}
			if ok {
				next = strconv.FormatInt(at, 10)
				ahead = lookahead(repeat, at, count+1, Ahead)
			} else {
				ended = endReason(repeat, count)
			}
		}
		status, nextAt, jobID, err := schedulerWrite(s.q.Run(ctx, "addJobScheduler", "",
			s.q.Prefix, id, canonical, name, payload, strconv.Itoa(o.Priority), o.Group, maxText, backoff,
			next, read.fields["job"], count, ended, ahead))
		if err != nil {
			return UpsertResult{}, err
		}
		if status != "stale" {
			if status == "ended" {
				jobID = ""
			}
			return UpsertResult{Status: status, NextRunAt: nextAt, JobID: jobID}, nil
		}
	}
	return UpsertResult{}, newError("EMQSTATE", "scheduler %s kept changing while it was upserted; try again", id)
}

func schedulerView(id, score string, row map[string]string) *SchedulerView {
	v := &SchedulerView{
		ID: id, Key: id, Name: row["name"], RepeatText: row["repeat"], JobID: row["job"],
		IterationCount: number(row["count"]), Ended: row["ended"],
		CreatedAt: number(row["created"]), UpdatedAt: number(row["updated"]),
	}
	if r, err := ParseRepeat([]byte(row["repeat"])); err == nil {
		v.Repeat = r
	} else {
		_ = json.Unmarshal([]byte(row["repeat"]), &v.Repeat) // what it can read of another dialect
	}
	v.Template.Data = jsonOrText(row["data"])
	if _, ok := row["data"]; !ok {
		v.Template.Data = json.RawMessage("{}")
	}
	v.Template.Opts.Priority = int(number(row["prio"]))
	v.Template.Opts.Group = row["group"]
	v.Template.Opts.Attempts = int(number(row["max"]))
	if b := row["backoff"]; b != "" {
		v.Template.Opts.Backoff, _ = ParseBackoff(b)
	}
	if _, ended := row["ended"]; !ended && score != "" && score != "inf" && score != "+inf" {
		n := number(score)
		v.NextRunAt = &n
	}
	return v
}

// Get reads a scheduler; nil when there is none with that id.
func (s *JobSchedulers) Get(ctx context.Context, id string) (*SchedulerView, error) {
	if err := CheckName("scheduler id", id); err != nil {
		return nil, err
	}
	read, err := s.read(ctx, id)
	if err != nil || read.fields["repeat"] == "" {
		return nil, err
	}
	return schedulerView(id, read.score, read.fields), nil
}

// List is the schedulers by upcoming run, soonest first (ended ones last), ranks start..end
// inclusive (0, -1: all).
func (s *JobSchedulers) List(ctx context.Context, start, end int) ([]SchedulerView, error) {
	records, err := s.q.records(ctx, "schedulers", "scheduler:", start, end)
	if err != nil {
		return nil, err
	}
	out := []SchedulerView{}
	for _, r := range records {
		if r.fields["repeat"] != "" {
			out = append(out, *schedulerView(r.id, r.score, r.fields))
		}
	}
	return out, nil
}

// Count is how many schedulers the queue has (ended ones included).
func (s *JobSchedulers) Count(ctx context.Context) (int64, error) {
	conn, err := s.q.connContext(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return redis.Int64(conn.Do("ZCARD", s.q.Key("schedulers")))
}

// Remove removes the scheduler and its upcoming occurrence if that has not started (one
// released already runs on as an ordinary job). True when it existed.
func (s *JobSchedulers) Remove(ctx context.Context, id string) (bool, error) {
	if err := CheckName("scheduler id", id); err != nil {
		return false, err
	}
	n, err := redis.Int(s.q.Run(ctx, "removeJobScheduler", "", s.q.Prefix, id))
	return n == 1, err
}

// RemoveByKey is Remove by the key a scheduler is listed under (its id).
func (s *JobSchedulers) RemoveByKey(ctx context.Context, key string) (bool, error) {
	return s.Remove(ctx, key)
}

// RunNow runs the scheduler's upcoming occurrence now, ahead of its instant, and returns its
// id; the cadence keeps its grid. EMQNOJOB without such a scheduler, EMQSTATE when no
// occurrence waits.
func (s *JobSchedulers) RunNow(ctx context.Context, id string) (string, error) {
	if err := CheckName("scheduler id", id); err != nil {
		return "", err
	}
	read, err := s.read(ctx, id)
	if err != nil {
		return "", err
	}
	if read.fields["repeat"] == "" {
		return "", newError("EMQNOJOB", "no scheduler %s", id)
	}
	job := read.fields["job"]
	if !read.waiting || job == "" {
		if e, ok := read.fields["ended"]; ok {
			return "", newError("EMQSTATE", "scheduler %s has ended (%s): no occurrence is left to run", id, e)
		}
		return "", newError("EMQSTATE", "scheduler %s has no occurrence waiting: the next one is made at %s", id, read.score)
	}
	if _, err := s.q.Run(ctx, "promote_job", job, s.q.Prefix, job); err != nil {
		return "", err
	}
	return job, nil
}

// Advance is the hand-off (the consumer's recurrence leg runs it): it makes the next
// occurrence of every scheduler whose occurrence was released without one (at most batch; 0:
// 100), or ends it, and tops up the lookahead of cron schedulers that run low. Options this
// runtime cannot compute (another runtime's cron dialect) are left as they are (Skipped).
func (s *JobSchedulers) Advance(ctx context.Context, batch int) (AdvanceResult, error) {
	if batch == 0 {
		batch = 100
	}
	if batch < 1 {
		return AdvanceResult{}, newError("EMQINPUT", "batch must be a whole number >= 1, got %d", batch)
	}
	reply, err := redis.Values(s.q.Run(ctx, "getJobScheduler", "", s.q.Prefix, "due", batch))
	if err != nil {
		return AdvanceResult{}, err
	}
	if len(reply) < 3 {
		return AdvanceResult{}, newError("EMQPROTOCOL", "getJobScheduler due replied %v, not {now, next_due, due, topups}", reply)
	}
	out := AdvanceResult{}
	out.Now, _ = redis.Int64(reply[0], nil)
	out.NextDue, _ = redis.Int64(reply[1], nil)
	due, _ := redis.Strings(reply[2], nil)
	var topups []string
	if len(reply) > 3 {
		topups, _ = redis.Strings(reply[3], nil)
	}
	for i := 0; i+4 < len(due); i += 5 {
		id, job, at, count := due[i], due[i+1], number(due[i+2]), number(due[i+3])
		r, err := ParseRepeat([]byte(due[i+4]))
		var next int64
		var ok bool
		if err == nil {
			next, ok, err = NextOccurrence(r, at, count, out.Now)
		}
		if err != nil {
			// Ending it would destroy it for every runtime: leave it to one that reads it.
			out.Skipped = append(out.Skipped, id)
			continue
		}
		nextText, ended, ahead := "", "", ""
		if ok {
			nextText = strconv.FormatInt(next, 10)
			ahead = lookahead(r, next, count+1, Ahead)
		} else {
			ended = endReason(r, count)
		}
		status, when, jobID, err := schedulerWrite(s.q.Run(ctx, "updateJobScheduler", "", s.q.Prefix, id, job, nextText, ended, ahead))
		if err != nil {
			return out, err
		}
		switch status {
		case "created", "exists":
			if status == "created" {
				out.Made = append(out.Made, jobID)
			}
			if when != nil && (out.NextDue < 0 || *when < out.NextDue) {
				out.NextDue = *when
			}
		case "ended":
			out.Ended = append(out.Ended, id)
		}
	}
	for i := 0; i+5 < len(topups); i += 6 {
		id, job, last, count, left := topups[i], topups[i+1], number(topups[i+2]), number(topups[i+3]), number(topups[i+5])
		r, err := ParseRepeat([]byte(topups[i+4]))
		if err != nil {
			out.Skipped = append(out.Skipped, id)
			continue
		}
		more := lookahead(r, last, count+left, Ahead-int(left))
		if _, _, _, err := schedulerWrite(s.q.Run(ctx, "updateJobScheduler", "", s.q.Prefix, id, job, "more", "", more)); err != nil {
			return out, err
		}
	}
	return out, nil
}
