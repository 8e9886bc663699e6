// Package smpp speaks SMPP 3.4, the protocol of operators' SMS centres (SMSCs) and SMS
// aggregators, as an ESME: the PDU codec (this file's siblings pdu.go, status.go, tlv.go), the
// text of a short message (GSM 03.38 or UCS-2, split into concatenated parts: text.go), delivery
// receipts (receipt.go) and a client session (client.go) that binds as a transceiver, keeps a
// window of outstanding requests, answers the SMSC's own requests and rebinds when the
// connection is lost.
//
// It is written from the SMPP 3.4 specification because the Go module proxy we build from serves
// no SMPP library; it is proved against an independent implementation (npm's smpp, in
// tests/smsc). It knows no service: the verification service reaches it through its own provider
// port. Why it never resends on its own is docs/architecture.md#sms-over-smpp.
package smpp
