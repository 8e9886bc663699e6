// Command protoc-gen-mnv-openapi is the protoc plugin that writes the OpenAPI 3.1 document of
// /v1/api and the gateway's table of routes (gateway/internal/openapi), run by make generate
// with buf.gen.openapi.yaml. Its one option, grpc_api_configuration, names proto/gateway.yaml,
// as for protoc-gen-grpc-gateway. Run it with strategy all: it describes every file at once.
package main

import (
	"errors"
	"flag"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/mnvhq/mnv/gateway/internal/openapi"
)

func main() {
	var flags flag.FlagSet
	config := flags.String("grpc_api_configuration", "", "the google.api.Service YAML with the HTTP rules")
	protogen.Options{ParamFunc: flags.Set}.Run(func(gen *protogen.Plugin) error {
		gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		if *config == "" {
			return errors.New("protoc-gen-mnv-openapi: the grpc_api_configuration option is required")
		}
		return openapi.Generate(gen, *config)
	})
}
