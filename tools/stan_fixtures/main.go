// Command stan_fixtures prints NATS Streaming protocol messages as encoded by stan.go's own `pb` package (the
// gogo-protobuf code the server and the Go client share), for tests/unit/test_stan_protocol.py to decode and to
// compare its encodings with. Run it with `go run .` in this folder (Go module proxy) and paste its output into
// the test's FIXTURES.
package main

import (
	"encoding/hex"
	"fmt"

	"github.com/nats-io/stan.go/pb"
)

type marshaler interface{ Marshal() ([]byte, error) }

func main() {
	messages := []struct {
		name string
		msg  marshaler
	}{
		{"ConnectRequest", &pb.ConnectRequest{ClientID: "client-1", HeartbeatInbox: "_INBOX.hb", Protocol: 1,
			ConnID: []byte("conn-1"), PingInterval: 5, PingMaxOut: 88}},
		{"ConnectResponse", &pb.ConnectResponse{PubPrefix: "_STAN.pub.X", SubRequests: "_STAN.sub.X",
			UnsubRequests: "_STAN.unsub.X", CloseRequests: "_STAN.close.X", SubCloseRequests: "_STAN.subclose.X",
			PingRequests: "_STAN.ping.X", PingInterval: 5, PingMaxOut: 88, Protocol: 1}},
		{"PubMsg", &pb.PubMsg{ClientID: "client-1", Guid: "guid-1", Subject: "sixnines.a", Data: []byte{0, 1, 2, 255},
			ConnID: []byte("conn-1")}},
		{"PubAck", &pb.PubAck{Guid: "guid-1", Error: "bad"}},
		{"MsgProto", &pb.MsgProto{Sequence: 300, Subject: "sixnines.a", Data: []byte{9, 8, 7},
			Timestamp: 1700000000123456789, Redelivered: true, RedeliveryCount: 2}},
		{"Ack", &pb.Ack{Subject: "sixnines.a", Sequence: 300}},
		{"SubscriptionRequest", &pb.SubscriptionRequest{ClientID: "client-1", Subject: "sixnines.a", QGroup: "g",
			Inbox: "_INBOX.s", MaxInFlight: 1024, AckWaitInSecs: 30, DurableName: "d",
			StartPosition: pb.StartPosition_SequenceStart, StartSequence: 42}},
		{"SubscriptionResponse", &pb.SubscriptionResponse{AckInbox: "_STAN.ack.X", Error: ""}},
		{"UnsubscribeRequest", &pb.UnsubscribeRequest{ClientID: "client-1", Subject: "sixnines.a",
			Inbox: "_STAN.ack.X", DurableName: "d"}},
		{"CloseRequest", &pb.CloseRequest{ClientID: "client-1"}},
		{"CloseResponse", &pb.CloseResponse{Error: "unknown clientID"}},
		{"Ping", &pb.Ping{ConnID: []byte("conn-1")}},
		{"PingResponse", &pb.PingResponse{Error: "client has been replaced"}},
	}
	for _, m := range messages {
		b, err := m.msg.Marshal()
		if err != nil {
			panic(err)
		}
		fmt.Printf("    %q: %q,\n", m.name, hex.EncodeToString(b))
	}
}
