module github.com/mnvhq/mnv/gateway

go 1.26.0

require (
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.32.0
	github.com/mnvhq/mnv/proto/gen v0.0.0
	github.com/mnvhq/mnv/services/platform v0.0.0
	github.com/prometheus/client_golang v1.25.0
	go.uber.org/zap v1.28.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261012220534-4341edf3f941 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e // indirect
)

replace (
	github.com/mnvhq/mnv/proto/gen => ../proto/gen
	github.com/mnvhq/mnv/services/platform => ../services/platform
)

require github.com/mnvhq/mnv/services/verification v0.0.0

replace github.com/mnvhq/mnv/services/verification => ../services/verification

require github.com/mnvhq/mnv/services/connect v0.0.0

replace github.com/mnvhq/mnv/services/connect => ../services/connect
