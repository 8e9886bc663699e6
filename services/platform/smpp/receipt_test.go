package smpp

import (
	"errors"
	"testing"
	"time"
)

func TestParseReceipt(t *testing.T) {
	tests := []struct {
		name  string
		m     ShortMessage
		want  Receipt
		isErr bool
	}{
		{
			name: "text only",
			m:    ShortMessage{ESMClass: ESMClassReceipt, Source: "447700900123", Short: []byte("id:0123456789 sub:001 dlvrd:001 submit date:2611291200 done date:2611291201 stat:DELIVRD err:000 text:Your code")},
			want: Receipt{MessageID: "0123456789", State: StateDelivered, Stat: "DELIVRD", Submitted: 1, Delivered: 1,
				SubmitDate: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), DoneDate: time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC), Err: "000", Dest: "447700900123",
				Text: "Your code"},
		},
		{
			name: "Text with capital and seconds",
			m:    ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("id:ab sub:001 dlvrd:000 submit date:261129120005 done date:261129120107 stat:UNDELIV err:001 Text:id:zz")},
			want: Receipt{MessageID: "ab", State: StateUndeliverable, Stat: "UNDELIV", Submitted: 1, Err: "001", Text: "id:zz",
				SubmitDate: time.Date(2026, 11, 29, 12, 0, 5, 0, time.UTC), DoneDate: time.Date(2026, 11, 29, 12, 1, 7, 0, time.UTC)},
		},
		{
			name: "parameters win",
			m: ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("id:255 stat:DELIVRD"),
				TLVs: TLVs{{Tag: TagReceiptedMessageID, Value: []byte("ff\x00")}, {Tag: TagMessageState, Value: []byte{byte(StateExpired)}}}},
			want: Receipt{MessageID: "ff", State: StateExpired, Stat: "DELIVRD"},
		},
		{
			name: "user_message_reference echoed",
			m: ShortMessage{ESMClass: ESMClassReceipt, Source: "447700900123", Short: []byte("id:m2 stat:DELIVRD text:123456 is your verif"),
				TLVs: TLVs{{Tag: TagUserMessageReference, Value: []byte{0xAB, 0xCD}}}},
			want: Receipt{MessageID: "m2", State: StateDelivered, Stat: "DELIVRD", Dest: "447700900123", Reference: 0xABCD, HasReference: true, Text: "123456 is your verif"},
		},
		{
			name: "user_message_reference of the wrong length is none",
			m: ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("id:m3 stat:DELIVRD"),
				TLVs: TLVs{{Tag: TagUserMessageReference, Value: []byte{0xAB}}}},
			want: Receipt{MessageID: "m3", State: StateDelivered, Stat: "DELIVRD"},
		},
		{
			name: "parameters only, message_payload",
			m: ShortMessage{ESMClass: ESMClassReceipt,
				TLVs: TLVs{{Tag: TagReceiptedMessageID, Value: []byte("m1")}, {Tag: TagMessageState, Value: []byte{byte(StateRejected)}}}},
			want: Receipt{MessageID: "m1", State: StateRejected},
		},
		{name: "not a receipt", m: ShortMessage{Short: []byte("id:1 stat:DELIVRD")}, isErr: true},
		{name: "no id", m: ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("stat:DELIVRD")}, isErr: true},
		{name: "no state", m: ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("id:1 stat:WHATEVER")}, isErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseReceipt(&tt.m)
			if tt.isErr {
				if err == nil {
					t.Fatalf("no error; got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
	if _, err := ParseReceipt(&ShortMessage{}); !errors.Is(err, ErrNotReceipt) {
		t.Fatal(err)
	}
}

func TestFormatReceiptParses(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	r := Receipt{MessageID: "42", State: StateUndeliverable, Submitted: 1, SubmitDate: at, DoneDate: at, Err: "000"}
	got, err := ParseReceipt(&ShortMessage{ESMClass: ESMClassReceipt, Short: []byte(FormatReceipt(r, "hello"))})
	if err != nil {
		t.Fatal(err)
	}
	r.Stat, r.Text = "UNDELIV", "hello"
	if got != r {
		t.Fatalf("got %+v want %+v", got, r)
	}
}

// TestReceiptTextNotASCII: a text whose lower case is longer than itself (İ) is read at the
// right offsets.
func TestReceiptTextNotASCII(t *testing.T) {
	got, err := ParseReceipt(&ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("İİİİİİ id:x1 stat:DELIVRD err:000 text:İ")})
	if err != nil || got.MessageID != "x1" || got.State != StateDelivered || got.Err != "000" {
		t.Fatalf("%+v %v", got, err)
	}
}
