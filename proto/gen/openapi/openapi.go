// Package openapi holds the generated description of the public API (make generate, by
// protoc-gen-mnv-openapi from the protos, proto/gateway.yaml and the RPCs' rules): the OpenAPI
// 3.1 document the gateway serves, and the routes it describes, each with its RPC.
package openapi

import _ "embed"

// JSON is the OpenAPI 3.1 document of /v1/api.
//
//go:embed mnv.openapi.json
var JSON []byte

// Route is one HTTP route of the API.
type Route struct {
	// Method is the HTTP method: GET, POST...
	Method string
	// Pattern is the path as grpc-gateway's runtime.Pattern.String writes it, the form the
	// gateway's mux hands its middlewares: "/v1/api/me/api-keys/{key_id=*}".
	Pattern string
	// RPC is the full gRPC method name the route calls: "/mnv.accounts.v1.AccountsService/RevokeApiKey".
	RPC string
}
