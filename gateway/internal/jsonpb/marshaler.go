package jsonpb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/services/platform/apijson"
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
		return apijson.AppendMessage(make([]byte, 0, 512), x.ProtoReflect()), nil
	}
	return MarshalJSON(v)
}

// MarshalJSON is json.Marshal without the HTML escaping, like AppendString.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Unmarshal decodes data into v, which must be a proto message, or the address of a message
// field (a **T): what grpc-gateway passes when a route's body is one field of the request.
func (m *Marshaler) Unmarshal(data []byte, v any) error {
	pm, ok := v.(proto.Message)
	if !ok {
		pm, ok = fieldMessage(v)
	}
	if !ok {
		return errors.New("jsonpb: can only decode into proto messages")
	}
	return Unmarshal(data, pm)
}

// fieldMessage returns the message a **T points to, allocating it when the field is nil.
func fieldMessage(v any) (proto.Message, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Pointer {
		return nil, false
	}
	field := rv.Elem()
	if !field.Type().Implements(messageType) {
		return nil, false
	}
	if field.IsNil() {
		field.Set(reflect.New(field.Type().Elem()))
	}
	return field.Interface().(proto.Message), true
}

var messageType = reflect.TypeFor[proto.Message]()

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
