module github.com/mnvhq/mnv/cmd

go 1.26.0
