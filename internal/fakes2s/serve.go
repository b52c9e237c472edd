package fakes2s

import (
	"io"
	"net/http"
)

// maxRequestBytes bounds the body the funder reads; a larger one is a
// soap:Client fault.
const maxRequestBytes = 8 << 20

func (f *Funder) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.enter() {
		hangUp(w)
		return
	}
	defer f.handlers.Done()
	if r.URL.Path != PortPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "fakes2s: the SOAP port takes POST only", http.StatusMethodNotAllowed)
		return
	}
	// The whole body is read before anything is recorded, so a drop can
	// never be mistaken by the client for a request it had not finished
	// sending.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	c, perr := parseCall(body)
	if err != nil {
		perr = err
	}
	if c.op == opList {
		f.serveQuery(w, c.id, perr)
		return
	}
	f.serveSubmit(w, c.id, perr)
}

// serveSubmit answers a SubmitApplication, or anything that is not a
// GetApplicationList query (perr says why it is malformed). The funder
// never looks at Idempotency-Key: every well-formed call is a new
// application.
func (f *Funder) serveSubmit(w http.ResponseWriter, id string, perr error) {
	f.countSubmission()
	if perr != nil {
		writeFault(w, http.StatusInternalServerError, "soap:Client", perr.Error())
		return
	}
	if !f.wait() {
		hangUp(w)
		return
	}
	tracking, n := f.record(id)
	if f.shouldDrop(id, n) {
		hangUp(w)
		return
	}
	writeSOAP(w, http.StatusOK, SubmitResponse(id, tracking))
}

// serveQuery answers a GetApplicationList query (perr says why it is
// malformed).
func (f *Funder) serveQuery(w http.ResponseWriter, id string, perr error) {
	n := f.countQuery(id)
	if perr != nil {
		writeFault(w, http.StatusInternalServerError, "soap:Client", perr.Error())
		return
	}
	if !f.wait() {
		hangUp(w)
		return
	}
	if f.queryFails(id, n) {
		writeFault(w, http.StatusServiceUnavailable, "soap:Server", "application list temporarily unavailable")
		return
	}
	writeSOAP(w, http.StatusOK, listResponse(id, f.TrackingNumbers(id)))
}

// hangUp closes the connection without writing a byte of response. The
// request has been read to its end, so the client's Transport sees its
// connection closed by the server (EOF) while waiting for the status line:
// on a kept-alive connection, the case in which net/http resends a
// replayable request itself.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (never on HTTP/1.1): aborting the handler drops
		// the connection too.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
