package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// Run is one redeliver command over a Store, as both tools run it.
type Run struct {
	Store Store
	Flags *RedeliverFlags // registered, parsed and checked
	IDs   []string        // the letters named; none with -all or -submission
	// Client sends the letters (NewClient); nil for a dry run.
	Client *http.Client
	// Note ends the record of each letter delivered: how it was sent and
	// where it is on the record ("grantretry deadletter redeliver, on the
	// audit trail PATH").
	Note string
	// Stdout takes a line for each letter delivered, planned or left,
	// and the summary; Stderr a line for each letter not delivered or not
	// sent, after Prefix ("grantretry: deadletter: ").
	Stdout, Stderr io.Writer
	Prefix         string
	// AskWith names the library call that can ask the funder about an
	// ambiguous letter, for the line of a named one not sent:
	// "deadletter.Redeliver", "fleet.Letters.Redeliver".
	AskWith string
	// Now is the clock that judges letters due and late; time.Now if nil.
	Now func() time.Time

	mu  sync.Mutex // guards the lines and sum
	sum Summary
}

// Redeliver runs r: it chooses the letters, sends them through r.Client
// (at most -rate begun a second, -concurrency at once) or plans them,
// writes a line for each, then the summary, which it returns too.
//
// Once ctx ends (SignalContext: SIGINT or SIGTERM), no letter is begun;
// the sends in flight end and are recorded by the store. A send that ends
// circuit_open (the Transport's breaker for its host is open) leaves the
// letters of that host not yet begun untried; the others go on.
//
// The error is nil when every letter sent was delivered and every letter
// named was (letters -all or -submission left are no failure); otherwise
// it says how many were not, and whether the run was stopped.
func (r *Run) Redeliver(ctx context.Context) (*Summary, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	r.sum = Summary{DryRun: r.Flags.DryRun}
	waiting, err := r.Store.Waiting(ctx)
	r.sum.Waiting = len(waiting)
	var chosen []*grantretry.Letter
	if len(r.IDs) == 0 {
		if err != nil {
			r.report(err)
			for range countErrors(err) {
				r.sum.addNotSent("could not be read")
			}
		}
		chosen = r.choose(waiting, now)
		r.sum.Selected = len(chosen) + r.sum.NotSent // and those that could not be read
	} else {
		chosen = r.named(ctx, waiting)
		r.sum.Selected = len(dedupeIDs(r.IDs))
	}
	r.send(ctx, chosen, now)
	if ctx.Err() != nil {
		r.sum.Stopped = stopCause(ctx)
	}
	werr := r.sum.Write(r.Stdout)
	s := r.sum
	return &s, errors.Join(r.result(), werr)
}

// result is the run's error.
func (r *Run) result() error {
	s := &r.sum
	if !s.Failed() {
		return nil
	}
	notDone := s.NotDelivered + s.NotSent + s.NotTried
	msg := fmt.Sprintf("%d of %s not redelivered", notDone, countNoun(s.Selected, "letter"))
	if s.NotRecorded > 0 {
		msg += fmt.Sprintf(", %d delivered but not recorded", s.NotRecorded)
	}
	if s.Stopped != "" {
		return fmt.Errorf("stopped by %s: %s, %d of them not tried", s.Stopped, msg, s.NotTried)
	}
	return errors.New(msg)
}

// choose returns, of the waiting letters (of -submission's, if given),
// those -all sends at now: due, and not late, refused or ambiguous with a
// key unless -late, -include-refused or -trust-key; and prints a line
// for each of the others, which are left, not failed.
func (r *Run) choose(waiting []*grantretry.Letter, now time.Time) []*grantretry.Letter {
	f := r.Flags
	var chosen, late, notDue, refused, ambiguous []*grantretry.Letter
	for _, l := range waiting {
		switch {
		case f.Submission != "" && l.SubmissionID != f.Submission:
		case !f.Late && deadletter.Late(l, now):
			late = append(late, l)
		case !deadletter.Due(l, now):
			notDue = append(notDue, l)
		case !f.IncludeRefused && deadletter.Refused(l):
			refused = append(refused, l)
		case !f.TrustKey && l.Ambiguous && l.IdempotencyKey != "":
			ambiguous = append(ambiguous, l)
		default:
			chosen = append(chosen, l)
		}
	}
	for _, l := range late {
		r.left(l, deadletter.ErrLate)
	}
	SortByDue(notDue, now)
	for _, l := range notDue {
		r.left(l, deadletter.ErrNotYet)
	}
	for _, l := range refused {
		fmt.Fprintln(r.Stdout, Refused(l))
		r.sum.LeftRefused++
	}
	for _, l := range ambiguous {
		r.left(l, deadletter.ErrAmbiguous)
	}
	return chosen
}

// left prints the line of l, which a selection leaves because it is late
// (ErrLate), not due (ErrNotYet), ambiguous (ErrAmbiguous) or another's
// (ErrElsewhere), and counts it.
func (r *Run) left(l *grantretry.Letter, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leftLocked(l, why)
}

func (r *Run) leftLocked(l *grantretry.Letter, why error) {
	s := &r.sum
	switch why {
	case deadletter.ErrLate:
		fmt.Fprintln(r.Stdout, Late(l))
		s.LeftLate++
	case deadletter.ErrNotYet:
		fmt.Fprintln(r.Stdout, NotDue(l))
		s.LeftNotDue++
		if s.NextDue.IsZero() || l.NotBefore.Before(s.NextDue) {
			s.NextDue = l.NotBefore
		}
	case deadletter.ErrAmbiguous:
		fmt.Fprintln(r.Stdout, Ambiguous(l))
		s.LeftAmbiguous++
	case ErrElsewhere:
		fmt.Fprintln(r.Stdout, Elsewhere(l))
		s.LeftElsewhere++
	}
}

// named returns the letters ids, each once, as the store holds them;
// each that cannot be sent (no such letter, one redelivered or retired)
// is reported and counted not sent.
func (r *Run) named(ctx context.Context, waiting []*grantretry.Letter) []*grantretry.Letter {
	byID := map[string]*grantretry.Letter{}
	for _, l := range waiting {
		byID[l.ID] = l
	}
	var out []*grantretry.Letter
	for _, id := range dedupeIDs(r.IDs) {
		if l := byID[id]; l != nil {
			out = append(out, l)
			continue
		}
		found, err := r.Store.Find(ctx, id)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.report(fmt.Errorf("letter %s was not sent: there is no such letter %s", EscapeControl(id), r.Store.Where()))
			r.sum.addNotSent("no such letter")
		case err != nil:
			r.report(err)
			r.sum.addNotSent("could not be read")
		case found.Redelivery != nil:
			r.report(fmt.Errorf("letter %s was not sent: it was already %s", id, LetterState(found.Redelivery)))
			r.sum.addNotSent("redelivered already")
		case found.Retirement != nil:
			r.report(fmt.Errorf("letter %s was not sent: it was %s", id, RetiredState(found.Retirement)))
			r.sum.addNotSent("retired")
		default:
			out = append(out, found.Letter)
		}
	}
	return out
}

// send sends (or plans) the letters chosen, with -concurrency workers.
func (r *Run) send(ctx context.Context, letters []*grantretry.Letter, now time.Time) {
	pacer := NewPacer(r.Flags.Rate)
	var (
		mu     sync.Mutex
		next   int
		broken = map[string]bool{} // hosts whose breaker is open
	)
	take := func() (*grantretry.Letter, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(letters) {
			return nil, false
		}
		next++
		return letters[next-1], true
	}
	isBroken := func(host string) bool {
		mu.Lock()
		defer mu.Unlock()
		return broken[host]
	}
	breakHost := func(host string) {
		mu.Lock()
		defer mu.Unlock()
		broken[host] = true
	}
	var wg sync.WaitGroup
	for range min(r.Flags.Concurrency, max(len(letters), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, ok := take()
				if !ok {
					return
				}
				host := letterHost(l)
				if r.notTried(ctx, l, host, isBroken) {
					continue
				}
				if r.refuseNamed(l, now) {
					continue
				}
				if r.Flags.DryRun {
					if !r.refuseNamedAmbiguous(l) {
						r.plan(l)
					}
					continue
				}
				if pacer.Wait(ctx) != nil {
					r.notTriedLine(l, "") // stopped while it waited its turn
					continue
				}
				if r.notTried(ctx, l, host, isBroken) {
					continue
				}
				if r.one(ctx, l) {
					breakHost(host)
				}
			}
		}()
	}
	wg.Wait()
}

// notTried reports whether l is not to be begun, the run stopped or its
// host's breaker open, and if so prints and counts it.
func (r *Run) notTried(ctx context.Context, l *grantretry.Letter, host string, broken func(string) bool) bool {
	switch {
	case ctx.Err() != nil:
		r.notTriedLine(l, "")
	case host != "" && broken(host):
		r.notTriedLine(l, ": the funder's breaker for "+EscapeControl(host)+" is open")
	default:
		return false
	}
	return true
}

func (r *Run) notTriedLine(l *grantretry.Letter, why string) {
	r.line(r.Stdout, "not tried: "+LetterName(l)+why)
	r.mu.Lock()
	r.sum.NotTried++
	r.mu.Unlock()
}

// refuseNamed refuses a letter named that is late (unless -late) or not
// due (unless -early), reporting it, and reports whether it did.
func (r *Run) refuseNamed(l *grantretry.Letter, now time.Time) bool {
	if len(r.IDs) == 0 {
		return false
	}
	var err error
	why := ""
	switch {
	case !r.Flags.Late && deadletter.Late(l, now):
		err, why = NotSentLate(l, "-late", r.where()), "late"
	case !r.Flags.Early && !deadletter.Due(l, now):
		err, why = NotSentNotDue(l, "-early", r.where()), "not due"
	default:
		return false
	}
	r.report(err)
	r.mu.Lock()
	r.sum.addNotSent(why)
	r.mu.Unlock()
	return true
}

// refuseNamedAmbiguous refuses, in a dry run, a letter named that is
// ambiguous and carries a key, unless -trust-key, as the store's send
// refuses it in a real run; it reports whether it did.
func (r *Run) refuseNamedAmbiguous(l *grantretry.Letter) bool {
	if len(r.IDs) == 0 || r.Flags.TrustKey || !l.Ambiguous || l.IdempotencyKey == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportLocked(NotSentAmbiguous(l, "", r.AskWith, r.where()))
	r.sum.addNotSent("ambiguous")
	return true
}

// plan prints the dry run's plan of l.
func (r *Run) plan(l *grantretry.Letter) {
	var b strings.Builder
	err := WritePlan(&b, l, &r.Flags.Creds)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.reportLocked(err)
		r.sum.addNotSent("cannot be sent")
		return
	}
	io.WriteString(r.Stdout, b.String())
	r.sum.Sent++
}

func (r *Run) where() string { return "it stays " + r.Store.Where() }

// one sends l and reports what came of it; it reports whether the send
// ended circuit_open, so that the letters of its host are not begun.
//
// A stop (ctx ending) does not cut the send: once begun, a letter is sent
// and its result recorded within its own bound (LetterTimeout), so that a
// letter the funder took is not left ambiguous with no answer.
func (r *Run) one(ctx context.Context, l *grantretry.Letter) (breakerOpen bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.Flags.LetterTimeout())
	defer cancel()
	selecting := len(r.IDs) == 0
	if selecting && !r.Flags.IncludeRefused {
		ctx = LeaveRefused(ctx)
	}
	if r.Flags.Early {
		ctx = deadletter.SendEarly(ctx)
	}
	if r.Flags.Late {
		ctx = deadletter.SendLate(ctx)
	}
	sent, err := r.Store.Send(ctx, l, r.Client, r.Flags.reconciler(), r.Note)
	where := r.where()
	if sent.Letter != nil && sent.Letter.Ambiguous && !l.Ambiguous {
		where += ", now ambiguous: the funder may have it"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.sum
	switch {
	case errors.Is(err, ErrNotRecorded):
		s.Sent++
		s.NotRecorded++
		s.addDelivered("answered " + statusText(sent.Record.Status) + ", not recorded")
		r.reportLocked(fmt.Errorf("%w; %s", err, where))
	case err == nil && sent.Delivered:
		s.Sent++
		rec := sent.Record
		why := "answered " + statusText(rec.Status)
		switch {
		case strings.HasPrefix(rec.Note, ReconciledNote):
			why = "reconciled"
		case strings.HasPrefix(rec.Note, AppliedNote):
			why = "already applied"
		}
		s.addDelivered(why)
		fmt.Fprintln(r.Stdout, Redelivered(l, rec))
	case err == nil:
		s.Sent++
		rec := sent.Record
		rec.Note = ""
		s.addNotDelivered("answered " + statusText(rec.Status))
		r.reportLocked(errors.New(NotRedelivered(l, rec, where)))
		// The call that opened the host's breaker: the letters of the
		// host not yet begun would meet it.
		return rec.Disposition == grantretry.CircuitOpen
	case err != nil && sent.Record.Status != 0:
		// Answered and not delivered, and the answer could not be
		// recorded in the letter: counted by its answer, which the
		// error says could not be recorded.
		s.Sent++
		s.addNotDelivered("answered " + statusText(sent.Record.Status) + ", not recorded")
		r.reportLocked(fmt.Errorf("%s%w; %s", r.naming(l, err, "not redelivered"), err, where))
		return sent.Record.Disposition == grantretry.CircuitOpen
	case errors.Is(err, ErrRefused) && selecting:
		now := l
		if sent.Letter != nil {
			now = sent.Letter
		}
		fmt.Fprintln(r.Stdout, Refused(now))
		s.LeftRefused++
	case errors.Is(err, ErrElsewhere):
		if selecting {
			r.leftLocked(l, ErrElsewhere)
			return false
		}
		s.addNotSent("another's")
		r.reportLocked(fmt.Errorf("%s not sent: %s; %s", LetterName(l), strings.TrimPrefix(ErrElsewhere.Error(), "grantretry: "), where))
	case errors.Is(err, deadletter.ErrAmbiguous), errors.Is(err, deadletter.ErrNotYet), errors.Is(err, deadletter.ErrLate):
		now := l
		if sent.Letter != nil {
			now = sent.Letter
		}
		if selecting {
			for _, e := range []error{deadletter.ErrAmbiguous, deadletter.ErrNotYet, deadletter.ErrLate} {
				if errors.Is(err, e) {
					r.leftLocked(now, e)
					break
				}
			}
			return false
		}
		switch {
		case errors.Is(err, deadletter.ErrAmbiguous):
			s.addNotSent("ambiguous")
			r.reportLocked(NotSentAmbiguous(now, "", r.AskWith, where))
		case errors.Is(err, deadletter.ErrNotYet):
			s.addNotSent("not due")
			r.reportLocked(NotSentNotDue(now, "-early", where))
		default:
			s.addNotSent("late")
			r.reportLocked(NotSentLate(now, "-late", where))
		}
	case errors.Is(err, grantretry.ErrCircuitOpen):
		// Nothing left: the letter is not tried, as the rest of its host's.
		fmt.Fprintln(r.Stdout, "not tried: "+LetterName(l)+": the funder's breaker for "+EscapeControl(letterHost(l))+" is open")
		s.NotTried++
		return true
	case sentNothing(err):
		s.addNotSent("cannot be sent")
		r.reportLocked(fmt.Errorf("%s%w; %s", r.naming(l, err, "not sent"), err, where))
	default:
		s.Sent++
		why := "no answer"
		var gerr *grantretry.Error
		if errors.As(err, &gerr) && gerr.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			why = "no answer: timeout"
		}
		s.addNotDelivered(why)
		r.reportLocked(fmt.Errorf("%s%w; %s", r.naming(l, err, "not redelivered"), err, where))
	}
	return false
}

// naming is what goes before err on the line of l, so that the line
// names it: "" when err names it, else its name and what, "letter ID
// (submission S) not sent: ".
func (r *Run) naming(l *grantretry.Letter, err error, what string) string {
	if msg := err.Error(); strings.Contains(msg, "letter "+l.ID+" ") || strings.Contains(msg, "letter "+l.ID+":") {
		return ""
	}
	return LetterName(l) + " " + what + ": "
}

// sentNothing reports whether err, a Send's, says that no request of the
// letter left: a letter that cannot be sent (deadletter.ErrBadLetter),
// one the client refused before sending (grantretry.ErrNotSent), or a
// redelivering Transport's call that made no attempt.
func sentNothing(err error) bool {
	var gerr *grantretry.Error
	return errors.Is(err, deadletter.ErrBadLetter) || errors.Is(err, grantretry.ErrNotSent) ||
		errors.As(err, &gerr) && gerr.Attempts == 0
}

// statusText is "503 Service Unavailable", or the code alone.
func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("%d %s", code, text)
	}
	return fmt.Sprint(code)
}

// letterHost is the host of l's URL, whose breaker its send meets.
func letterHost(l *grantretry.Letter) string {
	u, err := url.Parse(l.URL)
	if err != nil {
		return ""
	}
	return u.Host
}

// line writes s and a line end to w, one line at a time.
func (r *Run) line(w io.Writer, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(w, s)
}

// report writes err to Stderr, a line for each of its lines, each after
// Prefix, with the library's own "grantretry: " prefixes dropped.
func (r *Run) report(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportLocked(err)
}

func (r *Run) reportLocked(err error) {
	for _, line := range strings.Split(DropLibraryPrefix(err.Error()), "\n") {
		fmt.Fprintf(r.Stderr, "%s%s\n", r.Prefix, line)
	}
}

// DropLibraryPrefix is msg without the library's "grantretry: " (and
// "grantretry: fleet: ") at the start of each of its lines and after each
// ": ", where one error quotes another: a tool prints its own prefix
// once.
func DropLibraryPrefix(msg string) string {
	for _, p := range []string{"grantretry: fleet: ", "grantretry: "} {
		msg = strings.ReplaceAll("\n"+msg, "\n"+p, "\n")[1:]
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
	}
	return msg
}

// countErrors is how many errors err joins (errors.Join); 1 for any other.
func countErrors(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}
