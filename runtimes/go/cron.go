package echomq

// Cron patterns as the TypeScript runtime reads them (croner 10 in mode '5-or-6-parts', matched
// on wall-clock fields only; time zones are nextrun.go's): 5 fields (minute hour day-of-month
// month day-of-week, seconds 0) or 6 (seconds first); `*`, `?`, numbers, `a-b`, `*/n`, `a-b/n`,
// lists, month and weekday names in any case, Sunday as 0 or 7, a `+` before the weekdays for
// AND, and the nicknames @yearly @annually @monthly @weekly @daily @midnight @hourly.
//
// Croner's rule for the two day fields is kept, quirks included, because TypeScript is the
// reference: they are OR'd unless one of them is literally `*` (so `0 0 ? * MON` runs daily,
// as croner runs it). Croner's `L`, `W` and `#` are not read here: such a pattern is refused
// with EMQCRON, and a scheduler written with one by TypeScript is left to a TypeScript runtime
// (JobSchedulers.Advance skips it, as TypeScript skips a dialect it does not read).

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cron is a parsed cron pattern.
type Cron struct {
	pattern                            string
	seconds, minutes, hours            [60]bool
	days                               [32]bool // 1..31
	months                             [13]bool // 1..12
	weekdays                           [7]bool  // 0 Sunday .. 6
	starDays, starWeekdays, andWeekday bool
}

const cronExample = "e.g. '0 9 * * *' (09:00 daily) or '*/10 * * * * *' (every 10 s, seconds first)"

var cronNicknames = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

func cronError(pattern, why string) *Error {
	return newError("EMQCRON", "pattern %q is not a valid cron expression (%s); %s", pattern, why, cronExample)
}

var (
	cronCacheMu sync.Mutex
	cronCache   = map[string]*Cron{}
)

// ParseCron parses a pattern; EMQCRON says what is wrong with one it cannot read, or one that
// never matches a date.
func ParseCron(pattern string) (*Cron, error) {
	cronCacheMu.Lock()
	cached := cronCache[pattern]
	cronCacheMu.Unlock()
	if cached != nil {
		return cached, nil
	}
	if strings.TrimSpace(pattern) == "" {
		return nil, newError("EMQCRON", "pattern must be a non-empty cron string, got %q; %s", pattern, cronExample)
	}
	text := strings.TrimSpace(pattern)
	if nick, ok := cronNicknames[strings.ToLower(text)]; ok {
		text = nick
	}
	parts := strings.Fields(text)
	if len(parts) != 5 && len(parts) != 6 {
		return nil, cronError(pattern, "it has "+strconv.Itoa(len(parts))+" fields, 5 or 6 expected")
	}
	if len(parts) == 5 {
		parts = append([]string{"0"}, parts...)
	}
	c := &Cron{pattern: pattern, starDays: parts[3] == "*"}
	dow := parts[5]
	if strings.HasPrefix(dow, "+") {
		c.andWeekday, dow = true, dow[1:]
		if dow == "" {
			return nil, cronError(pattern, "the day-of-week field is empty after '+'")
		}
	}
	c.starWeekdays = dow == "*"
	fields := []struct {
		name     string
		text     string
		lo, hi   int
		names    []string
		namesLo  int
		set      func(int)
		wrapWeek bool
	}{
		{"second", parts[0], 0, 59, nil, 0, func(v int) { c.seconds[v] = true }, false},
		{"minute", parts[1], 0, 59, nil, 0, func(v int) { c.minutes[v] = true }, false},
		{"hour", parts[2], 0, 23, nil, 0, func(v int) { c.hours[v] = true }, false},
		{"day", parts[3], 1, 31, nil, 0, func(v int) { c.days[v] = true }, false},
		{"month", parts[4], 1, 12, monthNames, 1, func(v int) { c.months[v] = true }, false},
		{"dayOfWeek", dow, 0, 7, dayNames, 0, func(v int) { c.weekdays[v%7] = true }, true},
	}
	for _, f := range fields {
		if err := parseCronField(pattern, f.name, f.text, f.lo, f.hi, f.names, f.namesLo, f.set); err != nil {
			return nil, err
		}
	}
	if _, ok := c.nextWall(0); !ok {
		return nil, newError("EMQCRON", "pattern %q never matches a date; %s", pattern, cronExample)
	}
	cronCacheMu.Lock()
	if len(cronCache) >= 512 {
		cronCache = map[string]*Cron{}
	}
	cronCache[pattern] = c
	cronCacheMu.Unlock()
	return c, nil
}

func parseCronField(pattern, name, text string, lo, hi int, names []string, namesLo int, set func(int)) error {
	text = strings.ReplaceAll(text, "?", "*")
	if text == "" {
		return cronError(pattern, "the "+name+" field is empty")
	}
	upper := strings.ToUpper(text)
	for i, n := range names {
		upper = strings.ReplaceAll(upper, n, strconv.Itoa(i+namesLo))
	}
	if strings.ContainsAny(upper, "LW#") {
		return cronError(pattern, "the Go runtime does not read croner's L, W or # yet; a TypeScript consumer serves such a pattern")
	}
	value := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, cronError(pattern, "the "+name+" field has "+strconv.Quote(s)+", not a number")
		}
		if v < lo || v > hi {
			return 0, cronError(pattern, "the "+name+" field has "+s+", outside "+strconv.Itoa(lo)+"-"+strconv.Itoa(hi))
		}
		return v, nil
	}
	for _, part := range strings.Split(upper, ",") {
		if part == "" {
			return cronError(pattern, "the "+name+" field has an empty list entry")
		}
		step := 1
		if i := strings.Index(part, "/"); i >= 0 {
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n < 1 {
				return cronError(pattern, "the "+name+" field has an illegal step "+strconv.Quote(part[i+1:]))
			}
			step, part = n, part[:i]
			if part != "*" && !strings.Contains(part, "-") {
				return cronError(pattern, "stepping with a numeric prefix ("+part+"/"+strconv.Itoa(n)+") is not allowed; use */step or min-max/step")
			}
		}
		from, to := lo, hi
		if name == "dayOfWeek" && part == "*" {
			to = 6
		}
		if part != "*" {
			if i := strings.Index(part, "-"); i >= 0 {
				var err error
				if from, err = value(part[:i]); err != nil {
					return err
				}
				if to, err = value(part[i+1:]); err != nil {
					return err
				}
				if from > to {
					return cronError(pattern, "the "+name+" field's range "+part+" runs backwards")
				}
			} else {
				v, err := value(part)
				if err != nil {
					return err
				}
				from, to = v, v
			}
		}
		for v := from; v <= to; v += step {
			set(v)
		}
	}
	return nil
}

// nextWall is the first wall-clock time (ms, written as if UTC) strictly after `wall` that the
// pattern allows, at whole seconds, as croner's nextRun; false when none comes within 30 years.
func (c *Cron) nextWall(wall int64) (int64, bool) {
	t := time.UnixMilli(floorDiv(wall, 1000)*1000 + 1000).UTC()
	limit := t.Year() + 30
	for t.Year() <= limit {
		switch {
		case !c.months[int(t.Month())]:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case !c.hours[t.Hour()]:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, time.UTC)
		case !c.minutes[t.Minute()]:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute()+1, 0, 0, time.UTC)
		case !c.seconds[t.Second()]:
			t = t.Add(time.Second)
		default:
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

// dayMatches is croner's rule: the weekday alone when it is `*`, AND when the day of month is
// `*` (or `+` asked for it), else OR.
func (c *Cron) dayMatches(t time.Time) bool {
	day := c.days[t.Day()]
	if c.starWeekdays {
		return day
	}
	weekday := c.weekdays[int(t.Weekday())]
	if c.andWeekday || c.starDays {
		return day && weekday
	}
	return day || weekday
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
