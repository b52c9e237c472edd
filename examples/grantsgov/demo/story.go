package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
)

// auditLine is one zap audit line, as the demo's logger wrote it: the
// fields the stories read.
type auditLine struct {
	Msg           string `json:"msg"`
	CorrelationID string `json:"correlation_id"`
	Redelivers    string `json:"redelivers"`
	Attempt       int    `json:"attempt"`
	Status        int    `json:"status"`
	Error         string `json:"error"`
	Reason        string `json:"reason"`
	Retryable     bool   `json:"retryable"`
	Wait          string `json:"wait"`
	WaitSource    string `json:"wait_source"`
	Verdict       string `json:"verdict"`
}

// callLines groups audit lines by call: a call's correlation id, and the
// letter it redelivers ("" for a first delivery, which shares its
// correlation id with its redelivery).
type callLines map[[2]string][]auditLine

func parseAuditLines(b []byte) (callLines, error) {
	calls := make(callLines)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("an audit line is not JSON: %w", err)
		}
		k := [2]string{l.CorrelationID, l.Redelivers}
		calls[k] = append(calls[k], l)
	}
	return calls, sc.Err()
}

// story is one submission as the reader is told it: where it went, how
// it ended, each attempt, and why.
type story struct {
	r      result
	funder string
	lines  []auditLine // the call's attempt and reconcile lines, in order
	rd     *redelivery // the redelivery of its dead letter, if any
	rdLine []auditLine
}

// printStories tells each submission in turn, from its Outcome and the
// audit lines of its call.
func printStories(w io.Writer, sim simulation, calls callLines) {
	for i, r := range append(append([]result(nil), sim.results...), sim.s2sResults...) {
		s := story{r: r, funder: "the JSON funder", lines: calls[[2]string{r.outcome.CorrelationID, ""}]}
		if i >= len(sim.results) {
			s.funder = "Grants.gov S2S"
		}
		if rd, ok := sim.redeliveryOf(r.app.ID); ok {
			s.rd = &rd
			s.rdLine = calls[[2]string{rd.outcome.CorrelationID, rd.letter.ID}]
		}
		s.write(w)
	}
}

func (s story) write(w io.Writer) {
	o := s.r.outcome
	fmt.Fprintf(w, "%s to %s: %s after %s", s.r.app.ID, s.funder, o.Disposition, countAttempts(o.Attempts))
	if s.r.record != "" {
		fmt.Fprintf(w, ", recorded as %s", s.r.record)
	}
	fmt.Fprintln(w)
	writeAttempts(w, s.lines)
	fmt.Fprintf(w, "  %s\n", wrapText("why: "+s.why(), 96, "       "))
	if s.rd != nil {
		fmt.Fprintf(w, "  redelivered once the funder was back, under the same key: %s\n", s.redelivered())
		writeAttempts(w, s.rdLine)
	}
	fmt.Fprintln(w)
}

// writeAttempts writes one line per attempt, and per question to a
// reconciler, from the call's audit lines.
func writeAttempts(w io.Writer, lines []auditLine) {
	for i, l := range lines {
		var next *auditLine
		if i+1 < len(lines) {
			next = &lines[i+1]
		}
		switch l.Msg {
		case grantretry.MsgAttempt:
			line := fmt.Sprintf("attempt %d: %s", l.Attempt, answerText(l.Status, l.Error))
			if l.Reason != "" {
				line += " (" + l.Reason + ")"
			}
			if wait := waitText(l); wait != "" {
				then := "then tried again"
				if next != nil && next.Msg == grantretry.MsgReconcile {
					then = "then asked whether the funder has it, instead of sending it again"
				}
				line += fmt.Sprintf("; waited %s, %s", wait, then)
			}
			fmt.Fprintf(w, "  %s\n", wrapText(line, 96, "      "))
		case grantretry.MsgReconcile:
			fmt.Fprintf(w, "  asked the reconciler: %s, %s\n", answerText(l.Status, l.Error), l.Verdict)
		}
	}
}

func answerText(status int, errText string) string {
	if status == 0 {
		if errText == "" {
			return "no answer"
		}
		return "no answer: " + errText
	}
	return fmt.Sprintf("%d", status)
}

// waitText is how long an attempt's line says the call waited before its
// next step, and why: "" when it did not wait.
func waitText(l auditLine) string {
	d, err := time.ParseDuration(l.Wait)
	if err != nil || d <= 0 {
		return ""
	}
	if d < time.Second {
		d = d.Round(time.Millisecond)
	} else {
		d = d.Round(10 * time.Millisecond)
	}
	if l.WaitSource == "retry_after" {
		return d.String() + " as the funder's Retry-After asked"
	}
	return d.String() + " of backoff"
}

// why says in words why the call ended as it did.
func (s story) why() string {
	o := s.r.outcome
	switch o.StopReason {
	case grantretry.StopSuccess:
		switch {
		case s.r.replayed:
			return "the funder recorded the first attempt, but the connection dropped before its answer came back. " +
				"The retry carried the same Idempotency-Key, so the funder answered it from its idempotency store " +
				"(Idempotent-Replayed) and recorded nothing new."
		case o.Attempts > 1:
			return "each failure was transient, so grantretry tried again, within the call's budget of retries."
		}
		return "the funder accepted it at once."
	case grantretry.StopTerminal:
		return fmt.Sprintf("the answer, %d (%s), is terminal: sending the submission again cannot change it, "+
			"so grantretry did not, and the breaker did not count it.", o.Status, o.Reason)
	case grantretry.StopThrottled:
		return "the funder kept failing, and the host's retry throttle, drained by the failures before, refused " +
			"another retry. The call ended dead_letter: it was kept as letter " + o.DeadLetterID + ", the work still owed."
	case grantretry.StopReconciled:
		return fmt.Sprintf("the connection dropped after the submission went out, so the funder may have recorded it. "+
			"This funder ignores Idempotency-Key, so rather than send it again (a second application), grantretry asked "+
			"GetApplicationList, which found it: %d question, no resend.", o.Reconciles)
	}
	return "it stopped: " + o.StopReason + "."
}

func (s story) redelivered() string {
	rd := s.rd
	if rd.err != nil {
		return "failed: " + rd.err.Error()
	}
	return fmt.Sprintf("%s, status %d", rd.outcome.Disposition, rd.status)
}

func countAttempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// wrapText breaks s into lines of at most width columns at spaces, the
// lines after the first indented by indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(s) {
		switch {
		case i == 0:
		case col+1+len(word) > width:
			b.WriteString("\n" + indent)
			col = len(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}
