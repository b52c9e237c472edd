package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// records is what the pipeline keeps on disk: the hash-chained audit trail
// and the dead letters, in one directory.
type records struct {
	dir     string
	trail   *trail.Trail
	letters *deadletter.Dir
	// temporary says dir is removed when the run ends.
	temporary bool
}

const (
	trailName   = "audit.jsonl"
	lettersName = "dead-letters"
)

func openRecords(dir string) (*records, error) {
	sink, err := trail.Open(filepath.Join(dir, trailName), trail.Options{})
	if err != nil {
		return nil, err
	}
	letters, err := deadletter.Open(filepath.Join(dir, lettersName))
	if err != nil {
		sink.Close()
		return nil, err
	}
	return &records{dir: dir, trail: sink, letters: letters}, nil
}

// options make a Transport write its audit trail and keep its dead letters
// here.
func (r *records) options() []grantretry.Option {
	return []grantretry.Option{grantretry.WithAuditTrail(r.trail), grantretry.WithDeadLetter(r.letters)}
}

// trailFiles are the trail's files: the live one and any rotated ones.
func (r *records) trailFiles() ([]string, error) {
	return filepath.Glob(filepath.Join(r.dir, trailName) + "*")
}

// redelivery is one dead letter sent again once the funder is back.
type redelivery struct {
	letter  *grantretry.Letter
	outcome grantretry.Outcome
	status  int
	err     error
}

// redeliverAll sends every dead letter again through client, with its own
// Idempotency-Key, and marks the ones the funder took as redelivered. It
// sends through the directory, which marks each letter in flight before
// it is sent and writes a failed redelivery into it; a letter that may
// already have reached the funder is not sent without a reconciler
// (deadletter.ErrAmbiguous), and says so.
func (r *records) redeliverAll(ctx context.Context, client *http.Client) ([]redelivery, error) {
	letters, err := r.letters.List()
	if err != nil {
		return nil, err
	}
	var out []redelivery
	for _, l := range letters {
		rd := redelivery{letter: l}
		resp, err := r.letters.Redeliver(ctx, client, l.ID, nil)
		if err != nil {
			rd.err = err
			out = append(out, rd)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rd.outcome, _ = grantretry.OutcomeOf(resp)
		rd.status = resp.StatusCode
		if rd.outcome.Disposition == grantretry.Succeeded {
			mark := deadletter.Redelivery{ID: l.ID, Time: time.Now(), Status: rd.status,
				Disposition: rd.outcome.Disposition, Attempts: rd.outcome.Attempts, Note: "redelivered by the grantsgov demo"}
			if err := r.letters.MarkRedelivered(l.ID, mark); err != nil {
				return nil, err
			}
		}
		out = append(out, rd)
	}
	return out, nil
}

func printRedeliveries(w io.Writer, rds []redelivery) {
	if len(rds) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	for _, rd := range rds {
		l, o := rd.letter, rd.outcome
		got := fmt.Sprintf("%s, status %d", o.Disposition, rd.status)
		if rd.err != nil {
			got = "error: " + rd.err.Error()
		}
		fmt.Fprintf(w, "letter %s\n", l.ID)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  submission\t%s\n", l.SubmissionID)
		fmt.Fprintf(tw, "  why it was kept\t%s/%s after %d attempts\n", l.Disposition, l.StopReason, l.Attempts)
		fmt.Fprintf(tw, "  redelivered\t%s\n", got)
		fmt.Fprintf(tw, "  same key\t%v\n", o.IdempotencyKey == l.IdempotencyKey)
		tw.Flush()
	}
}

// verifyTrail closes the trail and checks its hash chain, as an auditor
// would with "grantretry audit verify", and that it holds a reconcile line
// for each of the reconciles questions the calls asked.
func (r *records) verifyTrail(w io.Writer, reconciles int) error {
	if err := r.trail.Close(); err != nil {
		return err
	}
	files, err := r.trailFiles()
	if err != nil {
		return err
	}
	sum, err := trail.Verify(files...)
	if err != nil {
		return err
	}
	var disps []string
	for d, n := range sum.Dispositions {
		disps = append(disps, fmt.Sprintf("%s %d", d, n))
	}
	sort.Strings(disps)
	fmt.Fprintf(w, "%s:\nhash chain verified, %d records (seq %d..%d)\ndispositions: %s; reconcile lines %d\nlast hash %s\n",
		filepath.Join(r.dir, trailName), sum.Records, sum.FirstSeq, sum.LastSeq, strings.Join(disps, ", "),
		sum.Messages[grantretry.MsgReconcile], sum.LastHash)
	if got := sum.Messages[grantretry.MsgReconcile]; got != reconciles {
		return fmt.Errorf("the trail holds %d reconcile lines, the calls asked %d questions", got, reconciles)
	}
	return nil
}

// printNextSteps tells the reader how to look at what the demo kept, or,
// if it kept nothing, how to keep it.
func (r *records) printNextSteps(w io.Writer) {
	if r.temporary {
		fmt.Fprintf(w, "\nThe trail and the dead letters were in a temporary directory, removed as the demo ends.\n"+
			"To keep them and look at them with grantretry audit and deadletter, run:\n"+
			"  go run ./examples/grantsgov -keep DIR\n")
		return
	}
	live := filepath.Join(r.dir, trailName)
	fmt.Fprintf(w, "\nThe trail and the dead letters are kept in %s. Look at them with:\n", r.dir)
	fmt.Fprintf(w, "  go run ./cmd/grantretry audit verify %s\n", live)
	fmt.Fprintf(w, "  go run ./cmd/grantretry audit trace %s -submission GRANT-2026-0006\n", live)
	fmt.Fprintf(w, "  go run ./cmd/grantretry audit trace %s -submission %s\n", live, s2sDropped)
	fmt.Fprintf(w, "  go run ./cmd/grantretry audit trace %s -submission %s\n", live, simplerIDs[1])
	fmt.Fprintf(w, "  go run ./cmd/grantretry deadletter show %s <ID>   (redelivered letters are in %s)\n",
		filepath.Join(r.dir, lettersName), filepath.Join(r.dir, lettersName, deadletter.RedeliveredDir))
}

// newOrEmptyDir creates dir if it is missing and refuses it if it holds
// anything: the records of one run, kept for the reader, must be that
// run's alone.
func newOrEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: keep the records of a run in a new or empty directory", dir)
	}
	return nil
}
