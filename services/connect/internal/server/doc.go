// Package server is the gRPC edge of the connect service: thin handlers and the access policy of
// every method. Errors are answered by grpcserver.Status, the one mapping of every service.
package server
