// Package webhook is what Connect's delivery worker uses to push a batch of mapped records to a
// client's CRM endpoint (contract section 8, "Integration" and "Delivery").
//
// The endpoint URL is chosen by a client, so every request is a request our network makes on a
// stranger's behalf. The package therefore guards against server-side request forgery twice:
//
//   - Policy.CheckURL validates an endpoint when an integration is created or updated, so the
//     client gets a clear 400 early;
//   - NewClient returns an *http.Client that re-checks the scheme on every request and checks
//     the address actually being connected to, inside the dialer, after DNS resolution. That is
//     the check that matters: a host name that passed CheckURL may later resolve to 10.0.0.5 or
//     169.254.169.254 (DNS rebinding), and only the dial-time check sees the real address.
//
// Deliver sends one batch (signed with Sign, verifiable with Verify) and classifies the outcome
// as success, retryable failure or permanent failure; Backoff spaces the retries.
package webhook
