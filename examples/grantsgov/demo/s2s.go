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
	"github.com/grantretry/grantretry/internal/fakes2s"
)

// The second funder profile: Grants.gov's S2S SOAP endpoint, over mutual
// TLS, which ignores Idempotency-Key and takes no submission id, so a
// resend after a dropped connection would be a second application. The
// pipeline puts its submission id in the application's SubmissionTitle,
// and GetApplicationList filtered on that title is the reconciler: before
// any resend of an ambiguous submission, the pipeline asks whether the
// funder recorded the first.

// s2sApplications go to the S2S endpoint, one after another on one
// kept-alive connection.
var s2sApplications = []application{
	{ID: "GRANT-2026-0007", Title: "Tribal language archive", Amount: 180000},
	{ID: "GRANT-2026-0008", Title: "Wildfire smoke sensors", Amount: 64000},
	{ID: "GRANT-2026-0009", Title: "Rural transit pilot", Amount: 230000},
}

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

// options give the S2S host a policy of its own: SOAP faults classified by
// their faultcode, and GetApplicationList asked before an ambiguous
// submission is sent again. The JSON funder keeps the demo's policy. Both
// listen on 127.0.0.1, so the rule names the port.
func (s *s2sFunder) options() ([]grantretry.Option, error) {
	u, err := url.Parse(s.URL())
	if err != nil {
		return nil, err
	}
	return []grantretry.Option{grantretry.ForHost(u.Host,
		grantretry.WithClassifier(grantretry.ClassifySOAPFault),
		grantretry.WithReconciler(s.getApplicationList),
	)}, nil
}

// getApplicationList is the reconciler: a GetApplicationList filtered on
// the SubmissionTitle, which is the submission id. It asks through a plain
// client with the same client certificate: when the query fails, the
// Transport itself waits and asks again within the call's budget, and an
// unkeyed POST is one net/http never resends once written. If the funder
// recorded the submission, the caller gets the answer the funder would
// have sent, with the first tracking number and its ReceivedDateTime.
func (s *s2sFunder) getApplicationList(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	if q.SubmissionID == "" {
		return nil, errors.New("no submission title to ask GetApplicationList about")
	}
	apps, err := fakes2s.Lookup(ctx, s.lookup, q.Request.URL.String(), q.SubmissionID)
	if err != nil || len(apps) == 0 {
		return nil, err
	}
	ct, body := fakes2s.SubmitResponse(apps[0].TrackingNumber, apps[0].ReceivedDateTime)
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {ct}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
	}, nil
}

// submitS2S sends one application as a SubmitApplication titled with its
// id. As with submit, only a request that could not be built is an error.
func submitS2S(ctx context.Context, client *http.Client, url string, app application) (result, error) {
	ctx = grantretry.WithSubmissionID(ctx, app.ID)
	form := fmt.Sprintf("<SF424><Title>%s</Title><Amount>%d</Amount></SF424>", app.Title, app.Amount)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(fakes2s.SubmitEnvelope(app.ID, form)))
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
		receipt, _ := fakes2s.ParseSubmitResponse(resp.Header.Get("Content-Type"), body)
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
	fmt.Fprintf(w, "S2S funder received %d submission requests and hung up on %d after recording it; GetApplicationList queries: %d; applications: %d, duplicates: %d\n",
		s.Received(), s.Dropped(), s.Queries(), s.TotalApplications(), s.Duplicates())
	if d := s.Duplicates(); d > 0 {
		return fmt.Errorf("the S2S funder recorded %d duplicate applications", d)
	}
	return nil
}
