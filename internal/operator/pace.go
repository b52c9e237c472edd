package operator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate is a pace of sends, in sends per second; zero means no pacing.
// As a flag.Value it reads "N/s", "N/m", "N/h", or a plain "N" (per
// second), N greater than zero.
type Rate float64

// ParseRate reads a -rate: "N/s", "N/m", "N/h", or a plain "N" per
// second, N a number greater than zero ("200/s", "30/m", "0.5"), at most
// MaxRate a second and at least one send in time.Duration's longest span.
func ParseRate(s string) (Rate, error) {
	num, unit, hasUnit := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	if hasUnit {
		switch strings.TrimSpace(unit) {
		case "s":
		case "m":
			per = 60
		case "h":
			per = 3600
		default:
			return 0, fmt.Errorf("-rate %q: want N/s, N/m, N/h or N (per second)", s)
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("-rate %q: want N/s, N/m, N/h or N (per second), N a number", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("-rate %q: want more than zero sends", s)
	}
	r := n / per
	switch {
	case r > float64(MaxRate):
		return 0, fmt.Errorf("-rate %q: want at most %g sends a second", s, float64(MaxRate))
	case !(float64(time.Second)/r < math.MaxInt64):
		return 0, fmt.Errorf("-rate %q: too slow: want at least one send in %v", s, time.Duration(math.MaxInt64).Round(time.Hour))
	}
	return Rate(r), nil
}

// MaxRate is the fastest -rate, a send a nanosecond: the pacer spaces
// starts by whole nanoseconds.
const MaxRate Rate = 1e9

// String is the rate as sends per second ("" when there is none).
func (r *Rate) String() string {
	if r == nil || *r == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s"
}

// Set parses s as ParseRate does.
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("-rate %q: ", s)))
	}
	*r = v
	return nil
}

// Pacer spaces the starts of sends, whichever worker makes them, so that
// at most its rate begin in any second: the n-th start is no earlier than
// the first plus (n-1)/rate. A nil *Pacer, or one of rate zero, never
// waits.
type Pacer struct {
	interval time.Duration
	mu       sync.Mutex
	next     time.Time // when the next start may be
}

// NewPacer returns a Pacer of rate r; nil for a rate of zero or less.
func NewPacer(r Rate) *Pacer {
	if r <= 0 {
		return nil
	}
	return &Pacer{interval: time.Duration(float64(time.Second) / float64(r))}
}

// Wait returns when the caller may start a send, or with ctx's error if
// ctx ends first; a start it waited for and did not make is not given
// back.
func (p *Pacer) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p == nil || p.interval <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.interval)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
