// Package auth decides who a caller is: the metadata that carries credentials (their shapes are
// platform/credential's), and a gRPC interceptor that enforces a per-method policy and puts the
// client's principal (platform/identity) in the context.
// Health checks and server reflection need no credential; every other method needs the one its
// rule names, and a method without a rule is refused, so a new RPC is closed until someone
// decides otherwise.
package auth
