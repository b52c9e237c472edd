// Package grantsgov reads the answers of Grants.gov's system-to-system (S2S)
// SOAP service for the grantretry Transport.
//
// Grants.gov answers every fault with HTTP 500 and the fault code
// soap:Server, whatever the cause, inside an MTOM/XOP multipart body; some
// refusals are not faults but an operation's response with a Success of
// false. The fault code cannot tell a refusal from an outage there; the
// text can. ClassifyFault reads that text against a table of the texts the
// service is publicly known to send, each with its source, and is meant
// for grantretry.WithClassifier:
//
//	grantretry.New(inner, grantretry.ForHost("ws07.grants.gov",
//		grantretry.WithClassifier(grantsgov.ClassifyFault)))
//
// SubmitApplication takes no id of the client's and ignores
// Idempotency-Key, so a resend after an ambiguous attempt would be a
// second application. A Reconciler finds the application with
// GetApplicationList by its SubmissionTitle, which is the submission id,
// and Profile gives an S2S host the classifier, the reconciler and a
// budget and breaker sized for it:
//
//	rec, err := grantsgov.NewReconciler(lookup, grantsgov.DefaultClockSkew)
//	...
//	grantretry.New(inner, grantsgov.Profile("ws07.grants.gov", rec))
//
// docs/grantsgov.md lists the rules and their sources, says how the
// reconciler tells a submission's application from another under its
// title and why each value of the profile, and says where the package
// stops.
package grantsgov
