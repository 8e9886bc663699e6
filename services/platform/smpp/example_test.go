package smpp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
)

// A sender binds once, submits each message by its own id, and decides on failures: a refusal
// is final, a retryable failure goes back to its queue under the same id.
func Example() {
	smsc, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv", Password: "sandbox"})
	if err != nil {
		panic(err)
	}
	defer smsc.Close()

	// The handler only enqueues; the receipt is acknowledged once it is recorded, and a full
	// queue asks the SMSC to send it again later.
	type receipt struct {
		smpp.Receipt
		ack smpp.Ack
	}
	receipts := make(chan receipt, 16)
	client, err := smpp.Dial(context.Background(), smpp.Config{
		Addr: smsc.Addr(), SystemID: "mnv", Password: "sandbox",
		OnReceipt: func(r smpp.Receipt, ack smpp.Ack) {
			select {
			case receipts <- receipt{r, ack}:
			default:
				ack(false)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ids, err := client.Submit(context.Background(), smpp.Message{
		From: "mnv", To: "+447700900123", Text: "Your code is 123456", RegisteredDelivery: true,
	})
	var refused smpp.Status
	switch {
	case err == nil:
		fmt.Println("parts:", len(ids))
	case errors.As(err, &refused) && !smpp.Retryable(err):
		fmt.Println("refused for good:", refused)
	case smpp.Retryable(err):
		fmt.Println("send again later, by the message's own id; uncertain:", smpp.Uncertain(err))
	}
	r := <-receipts
	// ... recorded where a crash cannot lose it, then:
	r.ack(true)
	fmt.Println("receipt:", r.State, r.MessageID == ids[0])
	fmt.Println("the handset reads:", smsc.Messages("447700900123")[0].Text)
	// Output:
	// parts: 1
	// receipt: DELIVERED true
	// the handset reads: Your code is 123456
}
