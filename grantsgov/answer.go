package grantsgov

import (
	"bytes"
	"encoding/xml"
	"strings"
)

// soap11Envelope is the namespace of a SOAP 1.1 envelope, the only version
// Grants.gov S2S speaks.
const soap11Envelope = "http://schemas.xmlsoap.org/soap/envelope/"

// grantsNS starts the namespace of every element the service defines
// (http://apply.grants.gov/services/... and .../system/...).
const grantsNS = "http://apply.grants.gov/"

// An answer's texts are one fault string or a few error messages, each a
// sentence or two; these bounds only cap what a hostile body can make the
// reader hold. Text beyond maxText is not kept: the rules match on the
// start of the text.
const (
	maxDepth    = 32
	maxText     = 4 << 10
	maxMessages = 8
)

// answer is what an envelope says, as far as a retry policy cares.
type answer struct {
	// fault is true for a SOAP fault; its faultstring is texts[0].
	fault bool
	// refused is true for an operation's response with a Success of
	// false at any depth; texts are its ErrorMessage elements.
	refused bool
	// op is the local name of the Body's child: "Fault", or the
	// operation's response, such as "SubmitApplicationResponse".
	op    string
	texts []string
}

// readAnswer reads an envelope down to the end of its Body's first child:
// a Fault (Envelope/Body/Fault/faultstring) or an operation's response, in
// which it looks for Success and ErrorMessage elements in the service's
// namespaces. ok is false for anything else: a document that is not a SOAP
// 1.1 envelope, one whose Body is empty, or one malformed or cut off before
// the answer is known. A response cut off after a Success of false still
// reports what was read. The zero xml.Decoder settings are the safe ones:
// Strict, no entity map beyond XML's five, no CharsetReader, nothing
// fetched.
func readAnswer(env []byte) (answer, bool) {
	d := xml.NewDecoder(bytes.NewReader(env))
	var r answerReader
	for {
		tok, err := d.Token()
		if err != nil {
			return r.a, r.a.refused
		}
		if done, ok := r.step(tok); done {
			return r.a, ok
		}
	}
}

// answerReader follows an envelope token by token. Depths count from 1 at
// the Envelope; the Body's child is at depth 3.
type answerReader struct {
	a       answer
	depth   int
	inBody  bool // the Body is open
	inChild bool // the Body's first child is open
	// collect is the depth of the element whose text is being kept, or 0.
	collect int
	kind    textKind
	text    []byte
}

type textKind int

const (
	textFault textKind = iota
	textSuccess
	textMessage
)

// step takes one token; done is true once the answer is known, with ok
// saying whether there is one.
func (r *answerReader) step(tok xml.Token) (done, ok bool) {
	switch t := tok.(type) {
	case xml.StartElement:
		return r.start(t)
	case xml.EndElement:
		return r.end()
	case xml.CharData:
		if r.collect != 0 && r.collect == r.depth && len(r.text) < maxText {
			n := min(len(t), maxText-len(r.text))
			r.text = append(r.text, t[:n]...)
		} else if r.depth == 0 && len(bytes.TrimLeft(t, " \t\r\n")) > 0 {
			return true, false // text outside the root: not an envelope
		}
	}
	return false, false // comments, processing instructions, a DOCTYPE
}

func (r *answerReader) start(t xml.StartElement) (done, ok bool) {
	if r.depth == maxDepth {
		return true, r.a.refused
	}
	r.depth++
	switch {
	case r.depth == 1:
		if t.Name.Space != soap11Envelope || t.Name.Local != "Envelope" {
			return true, false
		}
	case r.depth == 2:
		r.inBody = t.Name.Space == soap11Envelope && t.Name.Local == "Body"
	case r.depth == 3 && r.inBody:
		if r.a.op != "" {
			return true, r.a.refused // a second child: the first said all
		}
		r.inChild = true
		r.a.op = t.Name.Local
		r.a.fault = t.Name.Space == soap11Envelope && t.Name.Local == "Fault"
		if !r.a.fault && !strings.HasPrefix(t.Name.Space, grantsNS) {
			return true, false // not the service's own response
		}
	case !r.inChild || r.collect != 0:
	case r.a.fault:
		// faultstring is unqualified in SOAP 1.1; the first one counts.
		if r.depth == 4 && t.Name.Space == "" && t.Name.Local == "faultstring" && len(r.a.texts) == 0 {
			r.keep(textFault)
		}
	case strings.HasPrefix(t.Name.Space, grantsNS):
		switch t.Name.Local {
		case "Success":
			r.keep(textSuccess)
		case "ErrorMessage":
			if len(r.a.texts) < maxMessages {
				r.keep(textMessage)
			}
		}
	}
	return false, false
}

func (r *answerReader) keep(k textKind) {
	r.collect, r.kind, r.text = r.depth, k, r.text[:0]
}

func (r *answerReader) end() (done, ok bool) {
	if r.collect == r.depth {
		r.collect = 0
		text := strings.TrimSpace(string(r.text))
		switch r.kind {
		case textFault:
			r.a.texts = append(r.a.texts, text)
			return true, true
		case textSuccess:
			if text == "false" || text == "0" { // xs:boolean's two spellings of false
				r.a.refused = true
			}
		case textMessage:
			r.a.texts = append(r.a.texts, text)
		}
	}
	r.depth--
	switch {
	case r.depth == 2 && r.inChild:
		// The end of the Body's child: a fault without a faultstring has
		// no text, and a response without a Success false is no refusal.
		return true, r.a.fault || r.a.refused
	case r.depth == 1 && r.inBody:
		return true, false // an empty Body
	case r.depth == 1:
		r.inBody = false
	}
	return false, false
}
