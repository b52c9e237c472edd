package fakes2s

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRequestBytes bounds the body the funder reads.
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
	envelope, eerr := Envelope(r.Header.Get("Content-Type"), body)
	el, refused := bodyElement(envelope)
	if err != nil || eerr != nil {
		refused = refuseNotXML()
	}
	// CXF unquotes the header; an empty one leaves dispatch to the Body.
	action := strings.Trim(strings.TrimSpace(r.Header.Get("SOAPAction")), `"`)
	actionOp, actionKnown := operationOf(action)
	op := requestOperation(el.XMLName)
	if refused == nil && op == "" {
		refused = refuseUnknownPart(el.XMLName)
	}
	query := op == OpGetApplicationList || op == OpGetSubmissionList ||
		(op == "" && (actionOp == OpGetApplicationList || actionOp == OpGetSubmissionList))
	if query {
		f.countQuery()
	} else {
		f.countSubmission()
	}

	// The certificate is checked first, as the service's front door does
	// before it reads the request (see the package documentation).
	if text := f.certs.checkClient(r.TLS, time.Now()); text != "" {
		f.countRefused()
		writePlainFault(w, text)
		return
	}
	if action != "" && (!actionKnown || (op != "" && actionOp != op)) {
		f.countRefused()
		writeFault(w, "soap:Server", faultActionMismatch(action))
		return
	}
	if refused != nil {
		f.countRefused()
		writeFault(w, refused.code, refused.text)
		return
	}
	switch op {
	case OpSubmitApplication:
		f.serveSubmit(w, el)
	case OpGetApplicationList:
		f.serveQuery(w, op, el, parseApplicationList)
	case OpGetSubmissionList:
		f.serveQuery(w, op, el, parseSubmissionList)
	}
}

// serveSubmit answers a SubmitApplication. The funder never looks at
// Idempotency-Key: every valid call is a new application.
func (f *Funder) serveSubmit(w http.ResponseWriter, el node) {
	c, refused := parseSubmit(el)
	if refused != nil {
		f.countRefused()
		writeFault(w, refused.code, refused.text)
		return
	}
	if !f.wait() {
		hangUp(w)
		return
	}
	app, n := f.record(readHeader(c.application))
	if f.shouldDrop(app.title, n) {
		hangUp(w)
		return
	}
	ct, body := SubmitResponse(app.tracking, app.received)
	writeAnswer(w, http.StatusOK, ct, body)
}

// serveQuery answers GetApplicationList or GetSubmissionList.
func (f *Funder) serveQuery(w http.ResponseWriter, op string, el node, parse func(node) ([]Filter, *refusal)) {
	filters, refused := parse(el)
	if refused != nil {
		f.countRefused()
		writeFault(w, refused.code, refused.text)
		return
	}
	if !f.wait() {
		hangUp(w)
		return
	}
	if f.queryFails(filters) {
		f.countRefused()
		writePlainFault(w, FaultServerError)
		return
	}
	apps := f.matching(filters)
	var doc []byte
	if op == OpGetApplicationList {
		doc = applicationListResponse(apps)
	} else {
		doc = submissionListResponse(apps)
	}
	ct, body := mtomFrame(doc)
	writeAnswer(w, http.StatusOK, ct, body)
}

func writeAnswer(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// writeFault answers a SOAP 1.1 fault, MTOM-framed, 500.
func writeFault(w http.ResponseWriter, code, text string) {
	ct, body := mtomFrame(faultEnvelope(code, text))
	writeAnswer(w, http.StatusInternalServerError, ct, body)
}

// writePlainFault answers a soap:Server fault as a bare envelope labelled
// multipart/related, 500, as the service's front door does.
func writePlainFault(w http.ResponseWriter, text string) {
	writeAnswer(w, http.StatusInternalServerError, plainMultipartType, faultEnvelope("soap:Server", text))
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
