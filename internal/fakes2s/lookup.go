package fakes2s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxAnswerBytes bounds the answer Lookup reads.
const maxAnswerBytes = 1 << 20

// ErrQueryFailed is returned by Lookup when the funder answers the query
// with anything but 200: it could not say what it recorded.
var ErrQueryFailed = errors.New("fakes2s: GetApplicationList failed")

// Lookup asks the funder at url (a Funder's URL) which applications it has
// recorded for a submission id, with a GetApplicationList query sent
// through client (http.DefaultClient if nil), and returns their tracking
// numbers, oldest first.
//
// An empty list with a nil error means the funder answered and has
// recorded nothing under that id. Any error means it cannot be told: the
// call failed (the error wraps the client's), the funder answered another
// status (ErrQueryFailed) or an answer that is not a well-formed list for
// that id (ErrMalformed).
//
// Lookup reads the answer to its end and closes it, so the connection goes
// back to client's idle pool before Lookup returns.
func Lookup(ctx context.Context, client *http.Client, url, submissionID string) (trackingNumbers []string, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ListEnvelope(submissionID)))
	if err != nil {
		return nil, fmt.Errorf("fakes2s: GetApplicationList: %w", err)
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("SOAPAction", `"GetApplicationList"`)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fakes2s: GetApplicationList: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fakes2s: GetApplicationList: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: status %d", ErrQueryFailed, resp.StatusCode)
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("%w: answer longer than %d bytes", ErrMalformed, maxAnswerBytes)
	}
	return parseListResponse(body, submissionID)
}
