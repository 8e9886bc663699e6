// Package auth decides who a caller is, in a service: a gRPC interceptor that enforces a
// per-method policy, believes the principal the gateway asserted or resolves the client's
// credential (kinds, shapes and principals are platform/principal's), and puts the client's
// principal in the context.
// Health checks and server reflection need no credential; every other method needs the one its
// rule names, and a method without a rule is refused, so a new RPC is closed until someone
// decides otherwise.
package auth
