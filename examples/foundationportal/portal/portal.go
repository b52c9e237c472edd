// Package portal is a client for the Foundation Portal API, written the way
// funder and payment SDKs usually are: it takes the caller's *http.Client in
// its constructor, sends its own API key, speaks JSON, and turns a non-2xx
// answer into an *APIError.
//
// It knows nothing of retries. Whatever the caller's *http.Client does
// below it (a retrying transport, a proxy, a recorder) is the caller's
// business; the SDK only promises two things such a transport needs: every
// request carries the caller's context, and every body can be read again
// (it is built from a *bytes.Reader, so http.NewRequest sets GetBody).
package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HeaderAPIKey carries the client's API key on every request.
const HeaderAPIKey = "X-Api-Key"

// HeaderRequestID is the portal's id of one request, echoed on every
// response; quote it to portal support.
const HeaderRequestID = "X-Request-Id"

// DefaultUserAgent is the User-Agent the client sends unless WithUserAgent
// says otherwise.
const DefaultUserAgent = "foundationportal-go/1.3"

// maxResponseBytes bounds how much of a response body the client reads.
const maxResponseBytes = 1 << 20

// Client calls the Foundation Portal API. Build it with NewClient. It is
// safe for concurrent use, as long as the *http.Client it was given is.
type Client struct {
	baseURL   *url.URL
	http      *http.Client
	apiKey    string
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sets the API key sent in the X-Api-Key header. It is required.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// WithUserAgent sets the User-Agent header (default DefaultUserAgent).
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// NewClient returns a client of the portal at baseURL (scheme and host, and
// optionally a path prefix) that sends through httpClient, or through
// http.DefaultClient if it is nil.
func NewClient(baseURL string, httpClient *http.Client, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("portal: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("portal: base URL %q: want http(s)://host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	c := &Client{baseURL: u, http: httpClient, userAgent: DefaultUserAgent}
	for _, o := range opts {
		o(c)
	}
	if c.apiKey == "" {
		return nil, errors.New("portal: an API key is required (WithAPIKey)")
	}
	return c, nil
}

// Application is a grant application as the portal accepts it.
type Application struct {
	// ExternalID is the applicant's own reference; the portal indexes
	// applications by it.
	ExternalID      string `json:"external_id"`
	Organization    string `json:"organization"`
	Program         string `json:"program"`
	Title           string `json:"title"`
	AmountRequested int64  `json:"amount_requested"` // in whole dollars
}

// Receipt is the portal's acknowledgement of a submitted application.
type Receipt struct {
	ApplicationID string    `json:"application_id"` // the portal's own id
	ExternalID    string    `json:"external_id"`
	ReceivedAt    time.Time `json:"received_at"`
}

// Status is where an application stands in the portal's review.
type Status struct {
	ApplicationID string    `json:"application_id"`
	ExternalID    string    `json:"external_id"`
	State         string    `json:"state"` // "received", "in_review", "awarded", "declined"
	UpdatedAt     time.Time `json:"updated_at"`
}

// SubmitApplication submits app. It returns the portal's receipt, an
// *APIError if the portal answered with a non-2xx status, or the error of
// the underlying *http.Client, wrapped.
func (c *Client) SubmitApplication(ctx context.Context, app Application) (*Receipt, error) {
	var r Receipt
	if err := c.do(ctx, http.MethodPost, "/v1/applications", app, &r); err != nil {
		return nil, fmt.Errorf("portal: submit application %s: %w", app.ExternalID, err)
	}
	return &r, nil
}

// GetApplicationStatus returns the status of the application whose
// ExternalID is externalID. A portal that has no such application answers
// with an *APIError of status 404.
func (c *Client) GetApplicationStatus(ctx context.Context, externalID string) (*Status, error) {
	var s Status
	path := "/v1/applications/" + url.PathEscape(externalID) + "/status"
	if err := c.do(ctx, http.MethodGet, path, nil, &s); err != nil {
		return nil, fmt.Errorf("portal: application status %s: %w", externalID, err)
	}
	return &s, nil
}

// do sends one request and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("reading the response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newAPIError(resp, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the response: %w", err)
	}
	return nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, in any) (*http.Request, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := *c.baseURL
	u.Path += path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(HeaderAPIKey, c.apiKey)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// APIError is the portal's answer to a request it did not accept: any
// status outside 2xx. Code and Message come from the portal's JSON error
// body, when it sent one.
type APIError struct {
	StatusCode int
	Code       string // e.g. "invalid_amount", "rate_limited"
	Message    string
	RequestID  string // the X-Request-Id of the response
}

// Error returns the status, the portal's code and its message.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("portal: %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		msg += ": " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

func newAPIError(resp *http.Response, body []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get(HeaderRequestID)}
	var wire struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &wire) == nil {
		e.Code, e.Message = wire.Error.Code, wire.Error.Message
	}
	return e
}
