package echomq

// The JobScheduler's next-run computation, as src/recurring/next-run.ts has it (TypeScript is
// the reference: test/recurring/next-run-cases.json holds both runtimes to the same answers).
// Pure: (repeat options, reference time, runs made) -> the next run's epoch ms; no clock is
// read, so every runtime agrees. Cron fields are matched on a zone's wall clock (cron.go); the
// wall clock is mapped to an instant here, with TypeScript's DST rules: a local time the clocks
// skip (spring forward) runs once at the end of the gap, a local time that happens twice (fall
// back) runs once, at its first occurrence, and never again in the second pass.

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"time"
)

// RepeatOptions say how a scheduler repeats: set exactly one of Every or Pattern, or
// Immediately alone. The JSON form is the one the TypeScript runtime stores (`repeat` on the
// record), field for field and in its order, so both runtimes see an unchanged definition as
// the same text.
type RepeatOptions struct {
	// Every is the interval in ms (>= 1); 0: not an interval schedule.
	Every int64 `json:"every,omitempty"`
	// Pattern is a cron expression (cron.go): 5 fields, or 6 with seconds first; "": none.
	Pattern string `json:"pattern,omitempty"`
	// TZ is the IANA zone the pattern is read in (only with Pattern); "": UTC.
	TZ string `json:"tz,omitempty"`
	// Immediately runs once at the reference time before the cadence (while no run was made).
	Immediately bool `json:"immediately,omitempty"`
	// StartDate: no run before this instant (epoch ms); nil: none.
	StartDate *int64 `json:"startDate,omitempty"`
	// EndDate: no run after this instant (epoch ms, inclusive); nil: none.
	EndDate *int64 `json:"endDate,omitempty"`
	// Limit is the most runs in total (>= 1); 0: unlimited.
	Limit int64 `json:"limit,omitempty"`
}

const repeatExample = "e.g. {Every: 60000}, {Pattern: \"0 9 * * *\", TZ: \"Europe/Berlin\"} or {Immediately: true}"

var (
	zonesMu sync.Mutex
	zones   = map[string]*time.Location{}
)

// zone loads an IANA zone from /usr/share/zoneinfo (cached); EMQCRON for one it does not know.
func zone(name string) (*time.Location, error) {
	zonesMu.Lock()
	defer zonesMu.Unlock()
	if loc := zones[name]; loc != nil {
		return loc, nil
	}
	// "" and "Local" mean the process's zone to Go; TypeScript refuses both.
	var loc *time.Location
	var err error
	if name != "" && name != "Local" {
		loc, err = time.LoadLocation(name)
	}
	if loc == nil || err != nil {
		return nil, newError("EMQCRON", "tz must be an IANA time zone name, got %q; e.g. 'UTC', 'America/New_York' or 'Europe/Berlin'", name)
	}
	zones[name] = loc
	return loc, nil
}

type compiledRepeat struct {
	RepeatOptions
	cron *Cron
	loc  *time.Location
}

func (r RepeatOptions) compile() (*compiledRepeat, error) {
	if r.Every != 0 && r.Pattern != "" {
		return nil, newError("EMQINPUT", "set exactly one of Every or Pattern, got both; %s", repeatExample)
	}
	if r.Every == 0 && r.Pattern == "" && !r.Immediately {
		return nil, newError("EMQINPUT", "set one of Every or Pattern (or Immediately for a single run); %s", repeatExample)
	}
	if r.Every < 0 {
		return nil, newError("EMQINPUT", "Every must be a whole number of ms >= 1, got %d; e.g. {Every: 60000} (one minute)", r.Every)
	}
	if r.TZ != "" && r.Pattern == "" {
		return nil, newError("EMQINPUT", "TZ applies only to a cron pattern, got TZ %q without one; e.g. {Pattern: \"0 9 * * *\", TZ: \"Europe/Berlin\"}", r.TZ)
	}
	c := &compiledRepeat{RepeatOptions: r}
	if r.Pattern != "" {
		cron, err := ParseCron(r.Pattern)
		if err != nil {
			return nil, err
		}
		tz := r.TZ
		if tz == "" {
			tz = "UTC"
		}
		if c.loc, err = zone(tz); err != nil {
			return nil, err
		}
		c.cron = cron
	}
	if r.Limit < 0 {
		return nil, newError("EMQINPUT", "Limit must be a whole number >= 1 (0: unlimited), got %d", r.Limit)
	}
	for _, d := range []struct {
		name string
		v    *int64
	}{{"StartDate", r.StartDate}, {"EndDate", r.EndDate}} {
		if d.v != nil && *d.v < 0 {
			return nil, newError("EMQINPUT", "%s must be epoch ms (a whole number >= 0), got %d", d.name, *d.v)
		}
	}
	if r.StartDate != nil && r.EndDate != nil && *r.EndDate < *r.StartDate {
		return nil, newError("EMQINPUT", "EndDate must not be before StartDate, got StartDate %s and EndDate %s",
			time.UnixMilli(*r.StartDate).UTC().Format(time.RFC3339Nano), time.UnixMilli(*r.EndDate).UTC().Format(time.RFC3339Nano))
	}
	return c, nil
}

// Validate checks the options without computing anything: EMQCRON for a pattern it cannot read
// (or that never matches) and an unknown zone, EMQINPUT for everything else.
func (r RepeatOptions) Validate() error {
	_, err := r.compile()
	return err
}

// CalculateNextMillis is the epoch ms of the next run after referenceMs with count runs made,
// and false when there is none (count reached Limit, or the run would pass EndDate):
//   - Every: referenceMs + Every; while StartDate is later than referenceMs, StartDate.
//   - Pattern: the first instant strictly after referenceMs (and not before StartDate) the
//     pattern allows in TZ, with the DST rules above.
//   - Immediately: while count is 0, referenceMs (or a later StartDate); then the cadence, or
//     none when Immediately was given alone.
func CalculateNextMillis(r RepeatOptions, referenceMs, count int64) (int64, bool, error) {
	c, err := r.compile()
	if err != nil {
		return 0, false, err
	}
	if referenceMs < 0 {
		return 0, false, newError("EMQINPUT", "referenceMs must be epoch ms (a whole number >= 0), got %d", referenceMs)
	}
	if count < 0 {
		return 0, false, newError("EMQINPUT", "count (runs already made) must be a whole number >= 0, got %d", count)
	}
	if c.Limit > 0 && count >= c.Limit {
		return 0, false, nil
	}
	later := c.StartDate != nil && *c.StartDate > referenceMs
	var next int64
	ok := true
	switch {
	case c.Immediately && count == 0:
		next = referenceMs
		if later {
			next = *c.StartDate
		}
	case c.Every > 0:
		next = referenceMs + c.Every
		if later {
			next = *c.StartDate
		}
	case c.cron != nil:
		after := referenceMs
		if c.StartDate != nil && *c.StartDate-1 > after { // t > start-1 is t >= start: startDate may be a run
			after = *c.StartDate - 1
		}
		next, ok = nextCronInstant(c.cron, c.loc, after)
	default:
		ok = false // Immediately alone, and it has run
	}
	if !ok || (c.EndDate != nil && next > *c.EndDate) {
		return 0, false, nil
	}
	return next, true, nil
}

// ── time zones: a "wall clock" is a zone's local time written as epoch ms as if it were UTC ──

const dayMs = 86_400_000

// offsetAt is the zone's offset from UTC in ms at instant t (resolved to the whole second).
func offsetAt(loc *time.Location, t int64) int64 {
	_, off := time.UnixMilli(floorDiv(t, 1000) * 1000).In(loc).Zone()
	return int64(off) * 1000
}

func wallClockAt(loc *time.Location, t int64) int64 { return t + offsetAt(loc, t) }

// instantOf is the instant a wall-clock time means: its only occurrence; the first of two when
// the clocks go back; and inside a gap (the clocks went forward over it), the first instant
// after the gap.
func instantOf(loc *time.Location, wall int64) int64 {
	before, after := offsetAt(loc, wall-dayMs), offsetAt(loc, wall+dayMs)
	offsets := []int64{before}
	if after != before {
		offsets = append(offsets, after)
	}
	first, found := int64(0), false
	for _, off := range offsets {
		t := wall - off
		if wallClockAt(loc, t) == wall && (!found || t < first) {
			first, found = t, true
		}
	}
	if found {
		return first
	}
	lo, hi := wall-maxInt64(before, after), wall-minInt64(before, after)
	if hi <= lo {
		return hi
	}
	for hi-lo > 1 {
		mid := floorDiv(lo+hi, 2)
		if wallClockAt(loc, mid) > wall {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// wallClockHighWater is the latest wall-clock time shown at or before t: the wall clock at t,
// except in the second pass of a repeated hour, where the clock read higher before it was set
// back (those times have fired and must not fire again).
func wallClockHighWater(loc *time.Location, t int64) int64 {
	wall := wallClockAt(loc, t)
	first := instantOf(loc, wall)
	if first >= t {
		return wall
	}
	offsetFirst := offsetAt(loc, first)
	if offsetAt(loc, t) == offsetFirst {
		return wall
	}
	lo, hi := first, t
	for hi-lo > 1 {
		mid := floorDiv(lo+hi, 2)
		if offsetAt(loc, mid) == offsetFirst {
			lo = mid
		} else {
			hi = mid
		}
	}
	return maxInt64(wall, wallClockAt(loc, lo))
}

// nextCronInstant is the first instant strictly after `after` the pattern allows in loc.
func nextCronInstant(c *Cron, loc *time.Location, after int64) (int64, bool) {
	if loc == time.UTC {
		return c.nextWall(after)
	}
	wall := wallClockHighWater(loc, after)
	for guard := 0; guard < 1000; guard++ {
		next, ok := c.nextWall(wall)
		if !ok {
			return 0, false
		}
		wall = next
		if t := instantOf(loc, wall); t > after {
			return t, true
		}
	}
	return 0, false
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func minInt64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// ── the stored form ─────────────────────────────────────────────────────────────────────────

// isoWithZone is TypeScript's: ISO strings without a zone designator are refused.
var isoWithZone = regexp.MustCompile(`(?i)^\d{4}-\d{2}-\d{2}(?:$|T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})$)`)

// ParseRepeat reads repeat options as JSON, the way TypeScript's validation reads them: the
// stored `repeat` of a scheduler's record (dates as epoch ms), or options a caller wrote with
// dates as ISO 8601 strings with Z or an offset. Values TypeScript refuses (every 0, limit 0,
// a fraction, a string where a number goes) are refused here with the same codes; unknown
// fields are ignored.
func ParseRepeat(text []byte) (RepeatOptions, error) {
	var raw map[string]interface{}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var r RepeatOptions
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return r, newError("EMQINPUT", "repeat options must be a JSON object, got %s; %s", clipText(string(text), 64), repeatExample)
	}
	whole := func(field string, min int64) (int64, bool, error) {
		v, ok := raw[field]
		if !ok {
			return 0, false, nil
		}
		n, isNum := v.(json.Number)
		i, err := n.Int64()
		if !isNum || err != nil || i < min {
			return 0, false, newError("EMQINPUT", "%s must be a whole number >= %d, got %v", field, min, v)
		}
		return i, true, nil
	}
	var err error
	if r.Every, _, err = whole("every", 1); err != nil {
		return r, err
	}
	if r.Limit, _, err = whole("limit", 1); err != nil {
		return r, err
	}
	if v, ok := raw["pattern"]; ok {
		s, isText := v.(string)
		if !isText || strings.TrimSpace(s) == "" {
			return r, newError("EMQCRON", "pattern must be a non-empty cron string, got %v; %s", v, cronExample)
		}
		r.Pattern = s
	}
	if v, ok := raw["tz"]; ok {
		s, isText := v.(string)
		if !isText {
			return r, newError("EMQCRON", "tz must be an IANA time zone name, got %v", v)
		}
		if r.Pattern == "" {
			return r, newError("EMQINPUT", "tz applies only to a cron pattern, got tz %q without one", s)
		}
		if _, err := zone(s); err != nil {
			return r, err
		}
		r.TZ = s
	}
	if v, ok := raw["immediately"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return r, newError("EMQINPUT", "immediately must be true or false, got %v", v)
		}
		r.Immediately = b
	}
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"startDate", &r.StartDate}, {"endDate", &r.EndDate}} {
		v, ok := raw[f.name]
		if !ok {
			continue
		}
		ms := int64(-1)
		switch x := v.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				ms = i
			}
		case string:
			if isoWithZone.MatchString(x) {
				ms = parseISOms(x)
			}
		}
		if ms < 0 {
			return r, newError("EMQINPUT", "%s must be epoch ms (a whole number >= 0) or an ISO 8601 string with Z or an offset, got %v; e.g. 1767225600000 or '2026-01-01T00:00:00Z'", f.name, v)
		}
		*f.dst = &ms
	}
	return r, r.Validate()
}

// parseISOms reads the ISO forms isoWithZone admits; -1 when it cannot.
func parseISOms(s string) int64 {
	s = strings.ToUpper(s)
	if len(s) == 10 {
		s += "T00:00:00Z" // a date alone is UTC midnight, as Date.parse reads it
	}
	// +hhmm without a colon: put one in for RFC 3339.
	if n := len(s); n > 5 && (s[n-5] == '+' || s[n-5] == '-') && !strings.Contains(s[n-5:], ":") {
		s = s[:n-2] + ":" + s[n-2:]
	}
	if m := noSeconds.FindStringSubmatch(s); m != nil {
		s = m[1] + ":00" + m[2] // hh:mm without seconds: RFC 3339 wants them
	}
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli()
		}
	}
	return -1
}

var noSeconds = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})([Z+-].*)$`)
