package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
	"github.com/grantretry/grantretry/internal/fakes2s"
)

// The second funder profile: Grants.gov's S2S SOAP endpoint, over mutual
// TLS, which ignores Idempotency-Key and takes no submission id, so a
// resend after a dropped connection would be a second application. The
// pipeline writes its submission id as the application's SubmissionTitle,
// and the host gets grantsgov.Profile: its faults read by their text
// (grantsgov.ClassifyFault), and GetApplicationList filtered on that title
// asked before any resend of an ambiguous submission
// (grantsgov.Reconciler).

// s2sApplications go to the S2S endpoint, one after another on one
// kept-alive connection.
var s2sApplications = []application{
	{ID: "GRANT-2026-0007", Title: "Tribal language archive", Amount: 180000},
	{ID: "GRANT-2026-0008", Title: "Wildfire smoke sensors", Amount: 64000},
	{ID: "GRANT-2026-0009", Title: "Rural transit pilot", Amount: 230000},
}

// s2sRefused is sent as a corrected application whose previous tracking
// number was mistyped (7 digits, not 8): the service refuses it with a
// schema-validation fault, a 500 soap:Server that ClassifyFault reads as
// terminal. It is tried once, and the breaker does not count it.
const (
	s2sRefused         = "GRANT-2026-0007"
	s2sMistypedTracker = "GRANT1234567"
)

// s2sDropped is the one submission the S2S funder records and then hangs
// up on. It goes out second, on the connection the first left idle: the
// case in which net/http would resend it by itself, were it allowed to.
const s2sDropped = "GRANT-2026-0008"

// s2sFunder is the S2S endpoint, the Transport with the client
// certificate that the pipeline's calls go out on, and the plain client
// its reconciler asks through.
type s2sFunder struct {
	*fakes2s.Funder
	inner  *http.Transport
	lookup *http.Client
}

// startS2S starts the S2S endpoint, which drops s2sDropped's first
// submission and nothing else.
func startS2S() (*s2sFunder, error) {
	f, err := fakes2s.Start(fakes2s.Options{
		Drop: func(title string, n int) bool { return title == s2sDropped && n == 1 },
	})
	if err != nil {
		return nil, err
	}
	return &s2sFunder{Funder: f, inner: f.NewTransport(), lookup: &http.Client{Transport: f.NewTransport()}}, nil
}

// close stops the endpoint; its ledger can still be read.
func (s *s2sFunder) close() {
	s.inner.CloseIdleConnections()
	s.lookup.CloseIdleConnections()
	s.Close()
}

// options give the S2S host grantsgov's profile; the JSON funder keeps
// the demo's policy. Both listen on 127.0.0.1, so the rule names the
// port. The reconciler asks through a plain client with the same client
// certificate: when the query fails, the Transport itself waits and asks
// again within the call's budget, and an unkeyed POST is one net/http
// never resends once written.
func (s *s2sFunder) options() ([]grantretry.Option, error) {
	u, err := url.Parse(s.URL())
	if err != nil {
		return nil, err
	}
	rec, err := grantsgov.NewReconciler(s.lookup, grantsgov.DefaultClockSkew)
	if err != nil {
		return nil, err
	}
	return []grantretry.Option{grantsgov.Profile(u.Host, rec)}, nil
}

// submitS2S sends one application as a SubmitApplication titled with its
// id, checked with grantsgov.SubmissionTitle before it goes out. As with
// submit, only a request that could not be built is an error.
func submitS2S(ctx context.Context, client *http.Client, url string, app application) (result, error) {
	ctx = grantretry.WithSubmissionID(ctx, app.ID)
	form := fmt.Sprintf("<SF424><Title>%s</Title><Amount>%d</Amount></SF424>", app.Title, app.Amount)
	previous := ""
	if app.ID == s2sRefused {
		previous = s2sMistypedTracker
	}
	envelope := fakes2s.ResubmitEnvelope(previous, app.ID, form)
	if title, err := grantsgov.SubmissionTitle(envelope); err != nil || title != app.ID {
		return result{}, fmt.Errorf("the SubmitApplication of %s is titled %q (%v): the reconciler could not find it", app.ID, title, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(envelope))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))

	r := result{app: app}
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		var gerr *grantretry.Error
		if errors.As(err, &gerr) {
			r.outcome = gerr.Outcome
		}
		return r, nil
	}
	defer resp.Body.Close()
	r.outcome, _ = grantretry.OutcomeOf(resp)
	if body, err := io.ReadAll(resp.Body); err == nil && resp.StatusCode == http.StatusOK {
		receipt, _ := grantsgov.ParseSubmitResponse(body)
		r.record = receipt.TrackingNumber
	}
	return r, nil
}

// report prints the S2S funder's ledger per submission, and fails if any
// was recorded twice.
func (s *s2sFunder) report(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBMISSION\tAPPLICATIONS\tTRACKING NUMBERS")
	for _, app := range s2sApplications {
		fmt.Fprintf(tw, "%s\t%d\t%v\n", app.ID, s.Applications(app.ID), s.TrackingNumbers(app.ID))
	}
	tw.Flush()
	fmt.Fprintf(w, "S2S funder received %d submission requests, refused %d and hung up on %d after recording it;\nGetApplicationList queries: %d; applications: %d, duplicates: %d\n",
		s.Received(), s.Refused(), s.Dropped(), s.Queries(), s.TotalApplications(), s.Duplicates())
	if d := s.Duplicates(); d > 0 {
		return fmt.Errorf("the S2S funder recorded %d duplicate applications", d)
	}
	return nil
}
