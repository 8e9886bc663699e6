package auth

// MDAuthorization carries the services' own credentials (internal callers', the operator's) as
// bearer tokens. The client credentials' keys are their kinds' (principal.Kind.MD).
const MDAuthorization = "authorization"

// Metadata the gateway sets on the capture routes only, for the verification service: the
// client address it resolved (behind its trusted proxies), each configured number header as
// MDHeaderPrefix + the lower-case header name, and the browser's Origin header.
const (
	MDClientIP     = "x-mnv-client-ip"
	MDHeaderPrefix = "x-mnv-hdr-"
	// MDOrigin is the Origin header of a browser capture, as the page's browser sent it.
	MDOrigin = "x-mnv-origin"
)
