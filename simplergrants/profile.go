package simplergrants

import (
	"time"

	"github.com/grantretry/grantretry"
)

// The retry policy Profile gives the API's host, sized for the gateway in
// front of it (HHS/simpler-grants-gov infra/modules/service/api_gateway.tf):
// a usage plan of 10 requests a second in bursts of 15, per key, and an
// integration timeout of 29 s.
const (
	// ProfileBackoffBase and ProfileBackoffCap are the profile's backoff
	// ([grantretry.WithBackoff]): the throttle's bucket refills a request
	// every 100 ms and is full again after 1.5 s, so a second's wait finds
	// it refilled; the cap keeps a run of 504s from hammering an API that
	// is struggling.
	ProfileBackoffBase = time.Second
	ProfileBackoffCap  = 30 * time.Second
	// ProfileMaxRetries and ProfileDeadline are its budget
	// ([grantretry.WithBudget]): room for a few 29 s timeouts and the
	// reconciler's questions after them. A quota or maintenance ends the
	// call owed at once, whatever the budget.
	ProfileMaxRetries = 4
	ProfileDeadline   = 5 * time.Minute
	// ProfileAttemptTimeout bounds one attempt ([grantretry.WithAttemptTimeout])
	// past the gateway's 29 s, so that the gateway's 504, which says what
	// happened, arrives before the Transport gives up on its own.
	ProfileAttemptTimeout = 35 * time.Second
	// ProfileBreakerThreshold, ProfileBreakerCooldown and
	// ProfileBreakerProbe are its breaker ([grantretry.WithBreaker],
	// [grantretry.WithBreakerProbe]).
	ProfileBreakerThreshold = 5
	ProfileBreakerCooldown  = 2 * time.Minute
	ProfileBreakerProbe     = 10 * time.Second
)

// Profile returns the retry policy for calls to the Simpler Grants.gov
// API's host (as [grantretry.ForHost] takes it: api.simpler.grants.gov),
// built with grantretry.ForHost:
//
//   - [grantretry.WithClassifier]([ClassifyFault]): the gateway's throttle
//     and timeout are retried, its quota and the API's maintenance end the
//     call owed, a refusal ends it after one attempt;
//   - [grantretry.WithReconciler](r.Reconcile): an ambiguous start or
//     submit is asked about before it is sent again (see [Reconciler]);
//   - the backoff, budget, attempt timeout and breaker of the Profile
//     constants.
//
// opts, policy options too, apply after these and so override them. A nil
// r makes the Transport invalid ([grantretry.ErrInvalidOption], as
// WithReconciler(nil) does): without its reconciler the profile would send
// an ambiguous start again, which the API records as a second application.
func Profile(host string, r *Reconciler, opts ...grantretry.Option) grantretry.Option {
	reconcile := grantretry.ReconcileFunc(nil)
	if r != nil {
		reconcile = r.Reconcile
	}
	policy := []grantretry.Option{
		grantretry.WithClassifier(ClassifyFault),
		grantretry.WithReconciler(reconcile),
		grantretry.WithBackoff(ProfileBackoffBase, ProfileBackoffCap),
		grantretry.WithBudget(ProfileMaxRetries, ProfileDeadline),
		grantretry.WithAttemptTimeout(ProfileAttemptTimeout),
		grantretry.WithBreaker(ProfileBreakerThreshold, ProfileBreakerCooldown),
		grantretry.WithBreakerProbe(ProfileBreakerProbe),
	}
	return grantretry.ForHost(host, append(policy, opts...)...)
}
