module github.com/mnvhq/mnv/gateway

go 1.26.0
