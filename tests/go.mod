module github.com/mnvhq/mnv/tests

go 1.26.0

require github.com/mnvhq/mnv/services/platform v0.0.0

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace (
	github.com/mnvhq/mnv/proto/gen => ../proto/gen
	github.com/mnvhq/mnv/services/platform => ../services/platform
)
