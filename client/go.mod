module github.com/hongbao/hongbao/client

go 1.26.8

require (
	connectrpc.com/connect v1.21.1
	github.com/golang-jwt/jwt/v5 v5.3.1
	google.golang.org/protobuf v1.36.12
)
