package echomq

// Cron patterns as the TypeScript runtime reads them (croner 10 in mode '5-or-6-parts', matched
// on wall-clock fields only; time zones are nextrun.go's): 5 fields (minute hour day-of-month
// month day-of-week, seconds 0) or 6 (seconds first); `*`, `?`, numbers, `a-b`, `*/n`, `a-b/n`,
// lists, month and weekday names in any case, Sunday as 0 or 7, a `+` before the weekdays for
// AND, and the nicknames @yearly @annually @monthly @weekly @daily @midnight @hourly.
//
// Croner's rule for the two day fields is kept, quirks included, because TypeScript is the
// reference: they are OR'd unless one of them is literally `*` (so `0 0 ? * MON` runs daily,
// as croner runs it). Croner's extensions are read as croner reads them: in the day of month
// `L` (the last day; beside other days, as `1,L`), `LW` (the last weekday, Monday to Friday) and
// `15W` (the weekday nearest the 15th, never crossing into another month); in the day of week
// `5#2` (the second Friday), `5#L` or `5L` (the last Friday of the month).

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
	nearest                            [32]bool // 1..31: `15W`, the weekday nearest that day
	lastDay, lastWeekday               bool     // `L`, `LW` in the day of month
	months                             [13]bool // 1..12
	weekdays                           [7]uint8 // 0 Sunday .. 6: occurrence bits (anyOccurrence, nth 1..5, lastOccurrence)
	starDays, starWeekdays, andWeekday bool
}

// Day-of-week occurrence bits, croner's: bit n-1 for `#n` (1..5), lastOccurrence for `#L`, and
// every bit for a plain weekday (any occurrence).
const (
	lastOccurrence uint8 = 32
	anyOccurrence  uint8 = 63
)

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
	dom := parts[3]
	c := &Cron{pattern: pattern}
	switch {
	case strings.ToUpper(dom) == "LW":
		c.lastWeekday, dom = true, ""
	case strings.ContainsAny(dom, "Ll"):
		c.lastDay, dom = true, strings.NewReplacer("L", "", "l", "").Replace(dom)
	}
	c.starDays = dom == "*"
	dow := parts[5]
	if strings.HasPrefix(dow, "+") {
		c.andWeekday, dow = true, dow[1:]
		if dow == "" {
			return nil, cronError(pattern, "the day-of-week field is empty after '+'")
		}
	}
	c.starWeekdays = dow == "*"
	fields := []struct {
		name    string
		text    string
		lo, hi  int
		names   []string
		namesLo int
		set     func(v int, nth uint8)
	}{
		{"second", parts[0], 0, 59, nil, 0, func(v int, _ uint8) { c.seconds[v] = true }},
		{"minute", parts[1], 0, 59, nil, 0, func(v int, _ uint8) { c.minutes[v] = true }},
		{"hour", parts[2], 0, 23, nil, 0, func(v int, _ uint8) { c.hours[v] = true }},
		{"day", dom, 1, 31, nil, 0, func(v int, nth uint8) {
			if nth == nearestDay {
				c.nearest[v] = true
			} else {
				c.days[v] = true
			}
		}},
		{"month", parts[4], 1, 12, monthNames, 1, func(v int, _ uint8) { c.months[v] = true }},
		{"dayOfWeek", dow, 0, 7, dayNames, 0, func(v int, nth uint8) {
			if nth == anyOccurrence {
				c.weekdays[v%7] = anyOccurrence
			} else {
				c.weekdays[v%7] |= nth
			}
		}},
	}
	for _, f := range fields {
		// The day of month may be empty once `L` or `LW` is taken out of it.
		if f.name == "day" && f.text == "" && (c.lastDay || c.lastWeekday) {
			continue
		}
		text := f.text
		if f.name == "day" && c.lastDay {
			// Croner reads `1,L` as day 1 or the last day: the entry L leaves empty is dropped.
			text = strings.Trim(strings.ReplaceAll(text, ",,", ","), ",")
			if text == "" {
				continue
			}
		}
		if err := parseCronField(pattern, f.name, text, f.lo, f.hi, f.names, f.namesLo, f.set); err != nil {
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

// nearestDay marks a day-of-month value written with `W`.
const nearestDay uint8 = 64

func parseCronField(pattern, name, text string, lo, hi int, names []string, namesLo int, set func(int, uint8)) error {
	text = strings.ReplaceAll(text, "?", "*")
	if text == "" {
		return cronError(pattern, "the "+name+" field is empty")
	}
	upper := strings.ToUpper(text)
	for i, n := range names {
		upper = strings.ReplaceAll(upper, n, strconv.Itoa(i+namesLo))
	}
	letters := ""
	switch name {
	case "day":
		letters = "W"
	case "dayOfWeek":
		letters = "L#"
	}
	if i := strings.IndexFunc(upper, func(r rune) bool {
		return !(r >= '0' && r <= '9') && !strings.ContainsRune("*/,-"+letters, r)
	}); i >= 0 {
		return cronError(pattern, "the "+name+" field has "+strconv.Quote(upper[i:i+1])+", a character it does not take")
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
		nth := anyOccurrence
		switch {
		case strings.Contains(part, "#"):
			i := strings.Index(part, "#")
			switch which := part[i+1:]; which {
			case "L":
				nth = lastOccurrence
			case "1", "2", "3", "4", "5":
				nth = 1 << (which[0] - '1')
			default:
				return cronError(pattern, "the "+name+" field's "+strconv.Quote(part)+" wants 1-5 or L after '#' (the nth weekday of the month)")
			}
			part = part[:i]
		case strings.HasSuffix(part, "L"):
			nth, part = lastOccurrence, strings.TrimSuffix(part, "L")
		case strings.HasSuffix(part, "W"):
			if strings.ContainsAny(part, "-/") {
				return cronError(pattern, "the "+name+" field's "+strconv.Quote(part)+": W (the nearest weekday) takes one day, not a range or a step")
			}
			nth, part = nearestDay, strings.TrimSuffix(part, "W")
		}
		if strings.ContainsAny(part, "L#W") {
			return cronError(pattern, "the "+name+" field has "+strconv.Quote(part)+": L, W and # go at the end of one entry")
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
			set(v, nth)
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
// `*` (or `+` asked for it), else OR. The day of month matches by its list, `W`, `LW` or `L`;
// the weekday by its occurrence in the month when written with `#` or `L`.
func (c *Cron) dayMatches(t time.Time) bool {
	day := c.domMatches(t)
	if c.starWeekdays {
		return day
	}
	weekday := c.weekdayMatches(t)
	if c.andWeekday || c.starDays {
		return day && weekday
	}
	return day || weekday
}

func (c *Cron) domMatches(t time.Time) bool {
	d, last := t.Day(), daysIn(t)
	if c.days[d] || (c.lastDay && d == last) || (c.lastWeekday && d == lastWeekdayOf(t, last)) {
		return true
	}
	for n := 1; n <= 31; n++ {
		if c.nearest[n] && nearestWeekday(t, n, last) == d {
			return true
		}
	}
	return false
}

func (c *Cron) weekdayMatches(t time.Time) bool {
	bits := c.weekdays[int(t.Weekday())]
	switch {
	case bits == 0:
		return false
	case bits == anyOccurrence:
		return true
	}
	nth := (t.Day()-1)/7 + 1 // this weekday's occurrence in the month, 1..5
	if bits&(1<<(nth-1)) != 0 {
		return true
	}
	return bits&lastOccurrence != 0 && t.Day()+7 > daysIn(t)
}

// daysIn is the number of days in t's month.
func daysIn(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// lastWeekdayOf is the month's last Monday-to-Friday day (`LW`).
func lastWeekdayOf(t time.Time, last int) int {
	switch time.Date(t.Year(), t.Month(), last, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Sunday:
		return last - 2
	case time.Saturday:
		return last - 1
	}
	return last
}

// nearestWeekday is the weekday nearest day n of t's month (`nW`), never in another month: a
// Saturday moves to the Friday before (the Monday after for the 1st), a Sunday to the Monday
// after (the Friday before for the month's last day); 0 when the month has no day n.
func nearestWeekday(t time.Time, n, last int) int {
	if n > last {
		return 0
	}
	switch time.Date(t.Year(), t.Month(), n, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Sunday:
		if n == last {
			return n - 2
		}
		return n + 1
	case time.Saturday:
		if n == 1 {
			return n + 2
		}
		return n - 1
	}
	return n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
