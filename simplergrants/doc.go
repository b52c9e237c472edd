// Package simplergrants reads the answers of the Simpler Grants.gov REST
// API (api.simpler.grants.gov) and of the AWS API Gateway in front of it,
// for the grantretry Transport.
//
// The gateway answers before the API does, and tells its limits apart
// only by a header: a 429 with x-amzn-ErrorType TooManyRequestsException
// is its throttle (10 requests a second, bursts of 15), one with
// LimitExceededException is the monthly quota, which no retry within a
// call can outlast. Its 403 {"message":"Forbidden"} is a missing or
// invalid X-API-Key, and its 504 {"message":"Endpoint request timed out"}
// comes at 29 s while the API may still finish the work. The API itself
// answers a resent submit of an application it holds as submitted with an
// undocumented 403 whose error type is not_in_progress, a submit after
// the competition closed with 422 competition_not_open, and scheduled
// maintenance with a 503 and a Retry-After, even to a call that carries
// no credentials. [ClassifyFault] reads these against a table of rules,
// each with the file and line of HHS/simpler-grants-gov, or the page of
// AWS's documentation, that publishes it, and is meant for
// [grantretry.WithClassifier]:
//
//	grantretry.New(inner, grantretry.ForHost("api.simpler.grants.gov",
//		grantretry.WithClassifier(simplergrants.ClassifyFault)))
//
// The API honours no idempotency key: a start sent again is a second
// application. A [Reconciler] finds out after an ambiguous start or submit
// whether the API applied it, and is meant for [grantretry.WithReconciler]:
// a submit by the application's own record, a start by its
// application_name, which the pipeline sets to the submission id it gives
// [grantretry.WithSubmissionID]:
//
//	rec := simplergrants.NewReconciler("https://api.simpler.grants.gov", creds).ForUser(userID)
//	grantretry.New(inner, grantretry.ForHost("api.simpler.grants.gov",
//		grantretry.WithClassifier(simplergrants.ClassifyFault),
//		grantretry.WithReconciler(rec.Reconcile)))
//
// [Profile] gives the host the classifier, the reconciler and a budget,
// attempt timeout and breaker sized for the gateway:
//
//	grantretry.New(inner, simplergrants.Profile("api.simpler.grants.gov", rec))
//
// A competition's closing time is each call's, not the host's: [ClosingTime]
// reads a closing date as the API does, in US Eastern time, and
// [Reconciler.CompetitionClosing] reads it from the competition's record,
// for [grantretry.WithClosingTime]. A call the API refuses
// competition_not_open ends failed_terminal, its Reason
// "terminal:422;simplergrants:competition_not_open".
//
// The rules' sources, row for row, are in rules.go; testdata holds a
// sample of each answer with a note saying what of it was captured and
// what assembled, and from where.
package simplergrants
