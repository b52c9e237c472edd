package fakes2s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxAnswerBytes bounds the answer Query reads.
const maxAnswerBytes = 1 << 20

// ErrQueryFailed is returned by Query and Lookup when the funder answers
// with anything but 200: it could not say what it recorded.
var ErrQueryFailed = errors.New("fakes2s: list query failed")

// Lookup asks the funder at url (a Funder's URL) which applications it has
// recorded under a SubmissionTitle, with a GetApplicationList filtered on
// it, as Kuali Coeus asks with its proposal number, sent through client,
// which must present the client certificate (a Funder's NewTransport). It
// returns them oldest first.
func Lookup(ctx context.Context, client *http.Client, url, title string) ([]ApplicationInfo, error) {
	return Query(ctx, client, url, OpGetApplicationList, Filter{Type: FilterSubmissionTitle, Value: title})
}

// Query sends op (OpGetApplicationList or OpGetSubmissionList) with
// filters to the funder at url through client, with the operation's
// SOAPAction, and returns the applications of its answer.
//
// An empty list with a nil error means the funder answered and has
// recorded nothing that matches. Any error means it cannot be told: the
// call failed (the error wraps the client's), the funder answered another
// status (ErrQueryFailed) or an answer that is not a well-formed list
// (ErrMalformed).
//
// Query reads the answer to its end and closes it, so the connection goes
// back to client's idle pool before Query returns.
func Query(ctx context.Context, client *http.Client, url, op string, filters ...Filter) ([]ApplicationInfo, error) {
	var envelope []byte
	switch op {
	case OpGetApplicationList:
		envelope = ListEnvelope(filters...)
	case OpGetSubmissionList:
		envelope = SubmissionListEnvelope(filters...)
	default:
		return nil, fmt.Errorf("fakes2s: %q is not a list query", op)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(envelope))
	if err != nil {
		return nil, fmt.Errorf("fakes2s: %s: %w", op, err)
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("SOAPAction", `"`+Action(op)+`"`)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fakes2s: %s: %w", op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fakes2s: %s: reading the answer: %w", op, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: status %d", ErrQueryFailed, op, resp.StatusCode)
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("%w: answer longer than %d bytes", ErrMalformed, maxAnswerBytes)
	}
	return parseList(resp.Header.Get("Content-Type"), body)
}
