package echomq

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
)

// Backoff is a retry policy (SPEC.md section 5.1): fixed, exponential or jitter around an
// inner policy. It travels on the row as JSON, so every runtime reads what another wrote.
type Backoff struct {
	Kind  string   // "fixed", "exponential" or "jitter"
	Ms    int64    // fixed: the delay
	Base  int64    // exponential: the first retry's delay
	Cap   int64    // exponential: the largest delay
	Inner *Backoff // jitter: the bound's policy
}

// DefaultBackoff is the policy of a job that has none: 1 s, 2 s, 4 s … at most 5 minutes.
var DefaultBackoff = Backoff{Kind: "exponential", Base: 1000, Cap: 300000}

const maxBackoffDepth = 8
const maxSafeInteger = 1<<53 - 1

// Fixed, Exponential and Jitter build the three policies.
func Fixed(ms int64) *Backoff { return &Backoff{Kind: "fixed", Ms: ms} }
func Exponential(base, cap int64) *Backoff {
	return &Backoff{Kind: "exponential", Base: base, Cap: cap}
}
func Jitter(inner *Backoff) *Backoff { return &Backoff{Kind: "jitter", Inner: inner} }

// Validate refuses a policy outside the schema, naming the field.
func (b *Backoff) Validate() error { return b.validate(0) }

func (b *Backoff) validate(depth int) error {
	if depth > maxBackoffDepth {
		return newError("EMQINPUT", "backoff policy is nested more than %d jitter levels deep", maxBackoffDepth)
	}
	if b == nil {
		return newError("EMQINPUT", "backoff policy must be an object")
	}
	whole := func(v, min int64, what string) error {
		if v < min || v > maxSafeInteger {
			return newError("EMQINPUT", "backoff %s must be a whole number of ms >= %d, got %d", what, min, v)
		}
		return nil
	}
	switch b.Kind {
	case "fixed":
		return whole(b.Ms, 0, "fixed ms")
	case "exponential":
		if err := whole(b.Base, 1, "exponential base"); err != nil {
			return err
		}
		return whole(b.Cap, 1, "exponential cap")
	case "jitter":
		return b.Inner.validate(depth + 1)
	}
	return newError("EMQINPUT", "backoff policy kind must be 'fixed', 'exponential' or 'jitter', got %q", b.Kind)
}

// MarshalJSON writes the fields in the order SPEC.md gives (kind first), as TypeScript does.
func (b Backoff) MarshalJSON() ([]byte, error) {
	switch b.Kind {
	case "fixed":
		return []byte(`{"kind":"fixed","ms":` + strconv.FormatInt(b.Ms, 10) + `}`), nil
	case "exponential":
		return []byte(`{"kind":"exponential","base":` + strconv.FormatInt(b.Base, 10) + `,"cap":` + strconv.FormatInt(b.Cap, 10) + `}`), nil
	case "jitter":
		if b.Inner == nil {
			return nil, newError("EMQINPUT", "backoff jitter needs an inner policy")
		}
		inner, err := b.Inner.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return append([]byte(`{"kind":"jitter","inner":`), append(inner, '}')...), nil
	}
	return nil, newError("EMQINPUT", "backoff policy kind must be 'fixed', 'exponential' or 'jitter', got %q", b.Kind)
}

// UnmarshalJSON reads a policy; unknown fields are ignored, as SPEC.md asks of readers.
func (b *Backoff) UnmarshalJSON(data []byte) error {
	var raw struct {
		Kind  *string          `json:"kind"`
		Ms    *json.Number     `json:"ms"`
		Base  *json.Number     `json:"base"`
		Cap   *json.Number     `json:"cap"`
		Inner *json.RawMessage `json:"inner"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return newError("EMQINPUT", "backoff policy must be a JSON object: %v", err)
	}
	if raw.Kind == nil {
		return newError("EMQINPUT", "backoff policy has no kind")
	}
	num := func(n *json.Number, what string) (int64, error) {
		if n == nil {
			return 0, newError("EMQINPUT", "backoff %s is missing", what)
		}
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return 0, newError("EMQINPUT", "backoff %s must be a whole number of ms, got %s", what, n.String())
		}
		return v, nil
	}
	out := Backoff{Kind: *raw.Kind}
	var err error
	switch out.Kind {
	case "fixed":
		out.Ms, err = num(raw.Ms, "fixed ms")
	case "exponential":
		if out.Base, err = num(raw.Base, "exponential base"); err == nil {
			out.Cap, err = num(raw.Cap, "exponential cap")
		}
	case "jitter":
		if raw.Inner == nil {
			return newError("EMQINPUT", "backoff jitter needs an inner policy")
		}
		out.Inner = &Backoff{}
		err = json.Unmarshal(*raw.Inner, out.Inner)
	}
	if err != nil {
		return err
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*b = out
	return nil
}

// ParseBackoff reads a row's backoff field.
func ParseBackoff(text string) (*Backoff, error) {
	b := &Backoff{}
	if err := json.Unmarshal([]byte(text), b); err != nil {
		return nil, fromJSONError(err)
	}
	return b, nil
}

func fromJSONError(err error) error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return newError("EMQINPUT", "%v", err)
}

// DelayMs is the delay before the retry after failed attempt n (from 1), per SPEC.md 5.1.
// random returns uniform numbers in [0, 1) for jitter (nil: math/rand).
func (b *Backoff) DelayMs(n int, random func() float64) (int64, error) {
	if err := b.Validate(); err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, newError("EMQINPUT", "backoff attempts must be a whole number >= 1, got %d", n)
	}
	if random == nil {
		random = rand.Float64
	}
	return b.compute(n, random), nil
}

func (b *Backoff) compute(n int, random func() float64) int64 {
	switch b.Kind {
	case "fixed":
		return b.Ms
	case "exponential":
		shift := n - 1
		if shift >= 53 {
			return b.Cap
		}
		// base and cap are at most 2^53 - 1: compare before multiplying to stay in int64.
		if shift >= 63 || b.Base > b.Cap>>uint(shift) {
			return b.Cap
		}
		if d := b.Base << uint(shift); d < b.Cap {
			return d
		}
		return b.Cap
	case "jitter":
		bound := b.Inner.compute(n, random)
		if bound <= 0 {
			return 0
		}
		return int64(random() * float64(bound+1))
	}
	panic(fmt.Sprintf("backoff kind %q passed validation", b.Kind))
}
