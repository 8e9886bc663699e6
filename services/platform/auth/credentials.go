package auth

// Metadata keys of the credentials, as the gateway forwards them and internal callers send them.
const (
	MDAPIKey        = "x-api-key"
	MDClientID      = "x-client-id"
	MDSDKToken      = "x-sdk-token"
	MDAuthorization = "authorization"
)

// Metadata the gateway sets on the capture routes only, for the verification service: the
// client address it resolved (behind its trusted proxies), each configured number header as
// MDHeaderPrefix + the lower-case header name, and the browser's Origin header.
const (
	MDClientIP     = "x-mnv-client-ip"
	MDHeaderPrefix = "x-mnv-hdr-"
	// MDOrigin is the Origin header of a browser capture, as the page's browser sent it.
	MDOrigin = "x-mnv-origin"
)
