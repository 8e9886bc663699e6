// Package server is the gRPC edge of the accounts service: thin handlers that parse requests,
// call the domain and convert answers, and the access policy of every method. Errors are
// answered by grpcserver.Status, the one mapping of every service.
package server
