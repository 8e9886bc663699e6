// Package idemkey names the gRPC metadata of the Idempotency-Key header
// (docs/api-decisions.md#idempotency). It lives apart from idempotency, which keeps the keys in
// PostgreSQL, so the gateway passes the header on without linking a database driver.
package idemkey

const (
	// MD carries the request's Idempotency-Key.
	MD = "idempotency-key"
	// MDReplayed marks an answer replayed from an earlier request: the Idempotent-Replayed
	// header.
	MDReplayed = "idempotent-replayed"
)
