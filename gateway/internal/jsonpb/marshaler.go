package jsonpb

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"
)

// Marshaler is the grpc-gateway marshaler of the API. Proto messages get this package's
// representation; anything else (the envelope) goes through encoding/json.
type Marshaler struct {
	// MaxBody bounds a request body it reads (the gateway's body limit applies before it).
	MaxBody int64
}

var _ runtime.Marshaler = (*Marshaler)(nil)

// Marshal encodes v. JSON that is already finished (json.RawMessage, the envelope) is written
// as it is.
func (m *Marshaler) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return x, nil
	case proto.Message:
		return AppendMessage(make([]byte, 0, 512), x.ProtoReflect()), nil
	}
	return json.Marshal(v)
}

// Unmarshal decodes data into v, which must be a proto message.
func (m *Marshaler) Unmarshal(data []byte, v any) error {
	pm, ok := v.(proto.Message)
	if !ok {
		return errors.New("jsonpb: can only decode into proto messages")
	}
	return Unmarshal(data, pm)
}

// NewDecoder returns a decoder of one request body. An empty body decodes as io.EOF, which the
// generated handlers take as "no fields".
func (m *Marshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		limit := m.MaxBody
		if limit <= 0 {
			limit = 1 << 20
		}
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return err
		}
		if int64(len(data)) > limit {
			return errors.New("request body too large")
		}
		if len(data) == 0 {
			return io.EOF
		}
		return m.Unmarshal(data, v)
	})
}

// NewEncoder returns an encoder writing to w.
func (m *Marshaler) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}

// ContentType is always JSON.
func (m *Marshaler) ContentType(any) string { return "application/json" }
