package operator

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/grantretry/grantretry"
)

// Exit statuses of both tools' deadletter commands.
const (
	ExitOK      = 0 // every letter the run sent, and every letter named, was delivered
	ExitFailure = 1 // a letter sent or named was not delivered, could not be read or sent, or the run was stopped
	ExitUsage   = 2 // called wrongly: nothing sent
)

// ExitCode is the exit status of a command that returned err: ExitOK for
// nil, ExitUsage for a UsageError, ExitFailure for any other.
func ExitCode(err error) int {
	var uerr UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &uerr):
		return ExitUsage
	}
	return ExitFailure
}

// MaxLetterBound is the longest -deadline and -timeout: a day.
const MaxLetterBound = 24 * time.Hour

// DefaultTimeout is -timeout's default: the bound on each letter's
// redelivery, retries included, when neither -timeout nor -deadline is
// given.
const DefaultTimeout = time.Minute

// RedeliverFlags are the flags of both tools' redeliver command. Register
// them on a flag set, parse it, then Check them.
type RedeliverFlags struct {
	All            bool
	Submission     string // -submission: the waiting letters of one submission
	Early          bool
	Late           bool
	IncludeRefused bool
	TrustKey       bool
	DryRun         bool
	Rate           Rate          // -rate: sends begun per second, across the run; 0: no pacing
	Concurrency    int           // -concurrency: letters sent at once
	Budget         int           // -budget: retries of each letter's call
	Deadline       time.Duration // -deadline: each letter's call, from its first attempt
	Timeout        time.Duration // -timeout as given; see LetterTimeout
	RulesFile      string        // -rules
	Creds          Credentials   // -header, -header-env

	// Rules are the rules read from RulesFile by Check.
	Rules []grantretry.Rule

	fs *flag.FlagSet
}

// Register defines the flags on fs; where says where the letters wait,
// for the help texts ("in DIR", "in the database").
func (f *RedeliverFlags) Register(fs *flag.FlagSet, where string) {
	f.fs = fs
	fs.BoolVar(&f.All, "all", false, "redeliver every letter waiting "+where+" that is due, not late, not refused and not ambiguous")
	fs.StringVar(&f.Submission, "submission", "", "redeliver the waiting letters of submission `ID`, chosen as -all chooses")
	fs.BoolVar(&f.Early, "early", false, "send the letters named even if they are not due: the funder said it will not take them before their not_before, and you know better")
	fs.BoolVar(&f.Late, "late", false, "send late letters too (they missed their closing time, due_by): the funder agreed to take them late")
	fs.BoolVar(&f.IncludeRefused, "include-refused", false, "with -all or -submission, send the letters the funder last refused (a terminal answer, such as 422) too")
	fs.BoolVar(&f.DryRun, "dry-run", false, "print what would be sent, and send nothing")
	fs.BoolVar(&f.TrustKey, "trust-key", false, "send letters whose last attempt was ambiguous too: the funder honours Idempotency-Key")
	fs.Var(&f.Rate, "rate", "begin at most `N` sends a second, across the run (N/s, N/m, N/h, or N a second; default: no pacing)")
	fs.IntVar(&f.Concurrency, "concurrency", 1, "send `N` letters at once")
	fs.IntVar(&f.Budget, "budget", grantretry.DefaultMaxRetries, "the `RETRIES` each letter's call may spend")
	fs.DurationVar(&f.Deadline, "deadline", grantretry.DefaultDeadline, "bound `D` on each letter's call from its first attempt, its waits included")
	fs.DurationVar(&f.Timeout, "timeout", DefaultTimeout, "bound on each letter's redelivery, retries included; given -deadline alone, the deadline and a quarter more")
	fs.StringVar(&f.RulesFile, "rules", "", "a JSON `FILE` of the funder's own rules (grantretry.Rule), which classify its answers")
	fs.Var(HeaderFlag{C: &f.Creds}, "header", `"Name: value": a header added to every request, such as the credentials (repeatable)`)
	fs.Var(HeaderEnvFlag{C: &f.Creds}, "header-env", `"Name=VAR": a header whose value is read from environment variable VAR, so it stays out of shell history (repeatable)`)
}

// set reports whether the flag name was given on the command line.
func (f *RedeliverFlags) set(name string) bool {
	given := false
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	}
	return given
}

// Check returns a UsageError if the flags, with the letters ids named,
// make no run: ids and a selection (-all, -submission) together or
// neither, -early with a selection, a bad -header, or a -concurrency,
// -budget, -deadline or -timeout out of range (a -deadline or -timeout
// at most MaxLetterBound). Then it reads -rules into Rules; an error doing
// so is a UsageError too, and starts "-rules: ".
func (f *RedeliverFlags) Check(ids []string) error {
	selecting := f.All || f.Submission != ""
	switch {
	case f.Creds.Err != nil:
		return UsageError{f.Creds.Err}
	case selecting == (len(ids) > 0):
		return UsageError{errors.New("give letter ids or -all (or -submission ID), not both nor neither")}
	case selecting && f.Early:
		return UsageError{errors.New("-early sends the letters named, one by one: it does not go with -all or -submission")}
	case f.Concurrency < 1:
		return UsageError{fmt.Errorf("-concurrency %d: want 1 or more", f.Concurrency)}
	case f.Budget < 0:
		return UsageError{fmt.Errorf("-budget %d: want 0 or more retries", f.Budget)}
	case f.Deadline <= 0:
		return UsageError{fmt.Errorf("-deadline %v: want a positive duration", f.Deadline)}
	case f.Deadline > MaxLetterBound:
		return UsageError{fmt.Errorf("-deadline %v: want at most %v", f.Deadline, MaxLetterBound)}
	case f.Timeout <= 0:
		return UsageError{fmt.Errorf("-timeout %v: want a positive duration", f.Timeout)}
	case f.Timeout > MaxLetterBound:
		return UsageError{fmt.Errorf("-timeout %v: want at most %v", f.Timeout, MaxLetterBound)}
	case f.set("deadline") && f.set("timeout") && f.Deadline > f.Timeout:
		return UsageError{fmt.Errorf("-deadline %v is longer than -timeout %v, which bounds each letter's redelivery: give a -timeout at least as long, or leave it out", f.Deadline, f.Timeout)}
	}
	f.Rules = nil
	if f.RulesFile != "" {
		rules, err := ReadRules(f.RulesFile)
		if err != nil {
			return UsageError{rulesFlagError{err}}
		}
		f.Rules = rules
	}
	return nil
}

// LetterTimeout is the bound on each letter's redelivery: -timeout when
// it is given, the -deadline and a quarter more when only -deadline is,
// DefaultTimeout when neither is. The fleet's tool leases a letter for a
// quarter more than this.
func (f *RedeliverFlags) LetterTimeout() time.Duration {
	if f.set("deadline") && !f.set("timeout") {
		return f.Deadline + f.Deadline/4
	}
	return f.Timeout
}

// rulesFlagError is Check's error about the -rules file: "-rules: " and what
// ReadRules said, without the library's prefix; it matches what it wraps.
type rulesFlagError struct{ err error }

func (e rulesFlagError) Error() string { return "-rules: " + DropLibraryPrefix(e.err.Error()) }
func (e rulesFlagError) Unwrap() error { return e.err }
