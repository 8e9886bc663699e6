// Package outbound is every HTTP request Connect makes to a URL a client chose: the CRM pushes
// of crm/push and the event webhooks of eventhooks/delivery go through it alike, so both share
// one SSRF guard, one signature scheme and one retry schedule (docs/api-decisions.md#crm-delivery).
//
// Each URL is chosen by a client, so every request is a request our network makes on a
// stranger's behalf. The package therefore guards against server-side request forgery twice:
//
//   - Policy.CheckURL validates a URL when an integration or an event endpoint is saved, so the
//     client gets a clear 400 early;
//   - NewClient returns an *http.Client that re-checks the scheme on every request and checks
//     the address actually being connected to, inside the dialer, after DNS resolution. That is
//     the check that matters: a host name that passed CheckURL may later resolve to 10.0.0.5 or
//     169.254.169.254 (DNS rebinding), and only the dial-time check sees the real address.
//
// Deliver sends one body (a CRM batch or an event, signed with Sign or SignStandard) and
// classifies the outcome as success, retryable failure or permanent failure; Backoff spaces
// the retries.
package outbound
