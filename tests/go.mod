module github.com/mnvhq/mnv/tests

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mnvhq/mnv/proto/gen v0.0.0
	github.com/mnvhq/mnv/services/platform v0.0.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.32.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261012220534-4341edf3f941 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/mnvhq/mnv/proto/gen => ../proto/gen
	github.com/mnvhq/mnv/services/platform => ../services/platform
)
