module github.com/mnvhq/mnv/tests/e2e

go 1.26.0
