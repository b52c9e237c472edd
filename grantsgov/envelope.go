package grantsgov

import (
	"net/http"

	"github.com/grantretry/grantretry"
)

// soapEnvelope finds the envelope an answer carries, as
// grantretry.SOAPEnvelope reads it: the root part of Grants.gov's MTOM/XOP
// framing (whatever the Content-Type says: the service labels plain
// envelopes multipart/related too), with the attachments after it never
// looked at.
func soapEnvelope(resp *http.Response, body []byte) ([]byte, bool) {
	return grantretry.SOAPEnvelope(resp, body)
}
