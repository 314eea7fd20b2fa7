module sixnines/tools/stan_fixtures

go 1.20

require github.com/nats-io/stan.go v0.10.4

require github.com/gogo/protobuf v1.3.2 // indirect
