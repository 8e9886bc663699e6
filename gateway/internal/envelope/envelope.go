// Package envelope writes every JSON response of the API in its envelope
// (docs/api-decisions.md#envelope), and maps errors to HTTP once: the reason an error carries
// decides the status, its code and its message.
package envelope

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/gateway/internal/jsonpb"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/apijson"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/requestid"
)

// Envelope is the body of every JSON response.
type Envelope struct {
	Success  bool            `json:"success"`
	Messages []Message       `json:"messages"`
	Data     json.RawMessage `json:"data"`
}

// Message is one success message of an envelope.
type Message struct {
	Type       string `json:"type"`
	Message    string `json:"message"`
	HTTPStatus string `json:"httpStatus"`
	Technical  bool   `json:"technical"`
}

// errorMessage is one error message: it always has code and field (null when there is no
// field), so clients see one shape.
type errorMessage struct {
	Type       string  `json:"type"`
	Code       string  `json:"code"`
	Message    string  `json:"message"`
	HTTPStatus string  `json:"httpStatus"`
	Technical  bool    `json:"technical"`
	Field      *string `json:"field"`
}

type errorEnvelope struct {
	Success  bool           `json:"success"`
	Messages []errorMessage `json:"messages"`
	Data     *struct{}      `json:"data"`
}

var null = json.RawMessage("null")

var statusNames = func() map[int]string {
	m := map[int]string{}
	r := strings.NewReplacer(" ", "_", "-", "_", "'", "")
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = strings.ToUpper(r.Replace(text))
		}
	}
	m[http.StatusRequestEntityTooLarge] = "PAYLOAD_TOO_LARGE"
	m[http.StatusUnprocessableEntity] = "UNPROCESSABLE_ENTITY"
	return m
}()

// StatusName is the upper-case name of an HTTP status: 402 is PAYMENT_REQUIRED.
func StatusName(code int) string {
	if name, ok := statusNames[code]; ok {
		return name
	}
	return strconv.Itoa(code)
}

// Success wraps data (already JSON) in a success envelope.
func Success(status int, message string, data []byte) Envelope {
	if data == nil {
		data = null
	}
	return Envelope{
		Success:  true,
		Messages: []Message{{Type: "SUCCESS", Message: message, HTTPStatus: StatusName(status)}},
		Data:     data,
	}
}

// WriteSuccess writes a success envelope with data (already JSON).
func WriteSuccess(w http.ResponseWriter, status int, message string, data []byte) {
	write(w, status, Success(status, message, data))
}

// statusOfReason is the one mapping of error reasons to HTTP statuses
// (docs/api-decisions.md#envelope). The OpenAPI document lists each status's codes from it
// (ErrorCodes).
var statusOfReason = map[fault.Reason]int{
	fault.InvalidArgument:     http.StatusBadRequest,
	fault.FeatureNotEnabled:   http.StatusBadRequest,
	fault.Unauthenticated:     http.StatusUnauthorized,
	fault.InsufficientBalance: http.StatusPaymentRequired,
	fault.BalanceExpired:      http.StatusPaymentRequired,
	fault.PermissionDenied:    http.StatusForbidden,
	fault.StepUpRequired:      http.StatusForbidden,
	fault.NotFound:            http.StatusNotFound,
	fault.Conflict:            http.StatusConflict,
	fault.AlreadyUsed:         http.StatusConflict,
	fault.IdempotencyMismatch: http.StatusUnprocessableEntity,
	fault.PayloadTooLarge:     http.StatusRequestEntityTooLarge,
	fault.RateLimited:         http.StatusTooManyRequests,
	fault.Unavailable:         http.StatusServiceUnavailable,
	fault.Internal:            http.StatusInternalServerError,
}

func httpStatus(reason fault.Reason, code codes.Code) int {
	if s, ok := statusOfReason[reason]; ok {
		return s
	}
	// A reason this gateway does not know yet (a newer service): fall back on the gRPC code.
	return runtime.HTTPStatusFromCode(code)
}

// ErrorCodes are the codes an operation's errors may carry, by HTTP status, each list sorted.
func ErrorCodes() map[int][]string {
	out := map[int][]string{}
	for r, s := range statusOfReason {
		out[s] = append(out[s], string(r))
	}
	for _, c := range out {
		slices.Sort(c)
	}
	return out
}

// Error is an error as the gateway answers it.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// FromErr reads an error (a gRPC status from a service, or one the gateway made) into an Error.
// 5xx messages never carry internals: only a fixed text and the request id.
func FromErr(ctx context.Context, err error) Error {
	d := apierr.Parse(err)
	e := Error{Status: httpStatus(d.Reason, d.Code), Code: string(d.Reason), Message: d.Message, Field: d.Field}
	if d.Code == codes.InvalidArgument && d.Reason == fault.InvalidArgument && e.Field == "" {
		e.Message, e.Field = describeDecodeError(d.Message)
	}
	if e.Status >= 500 {
		e.Message = "the service could not complete the request"
		if e.Status == http.StatusServiceUnavailable {
			e.Message = "the service is temporarily unavailable, try again"
		}
		if id := requestid.From(ctx); id != "" {
			e.Message += " (request id " + id + ")"
		}
	}
	return e
}

var (
	// A value jsonpb refuses for its field: the message already says what the field takes.
	// Anchored and first: the message quotes a piece of the value, which may read like the
	// errors below.
	badValue     = regexp.MustCompile(`^invalid value for field ("(?:[^"\\]|\\.)*"): `)
	unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)
	// A key given twice, found by jsonpb at any depth (or by protojson, as JSON and proto names
	// of one field): the name is quoted with Go's escapes.
	duplicateField = regexp.MustCompile(`duplicate field ("(?:[^"\\]|\\.)*")`)
	invalidValue   = regexp.MustCompile(`invalid value for [a-z0-9]+ field ([A-Za-z0-9_]+): (.*)$`)
	badQuery       = regexp.MustCompile(`^parsing field "([A-Za-z0-9_.]+)"`)
	// protojson writes "proto:" with a space or, at random per build, a no-break space.
	decodeNoise = regexp.MustCompile(`^(proto:[\s\x{a0}]*)?(\(line \d+:\d+\):\s*)?(malformed JSON:\s*)?`)
)

// describeDecodeError turns a decoding error into a message for people, and names the field
// when it can.
func describeDecodeError(msg string) (string, string) {
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if name, err := strconv.Unquote(m[1]); err == nil {
			return msg, name
		}
	}
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		return "unknown field " + strconv.Quote(m[1]), m[1]
	}
	if m := duplicateField.FindStringSubmatch(msg); m != nil {
		if name, err := strconv.Unquote(m[1]); err == nil {
			return "duplicate field " + m[1], name
		}
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		// protojson repeats the whole value (a base64 or timestamp string): a piece of it is enough.
		value := m[2]
		if len(value) > 40 {
			value = strings.ToValidUTF8(value[:40], "") + "…"
		}
		return "invalid value " + value + " for field " + m[1], m[1]
	}
	if m := badQuery.FindStringSubmatch(msg); m != nil {
		return "invalid value for query parameter " + m[1], m[1]
	}
	if strings.HasPrefix(msg, "proto:") || strings.HasPrefix(msg, "malformed JSON") {
		return "malformed JSON body: " + decodeNoise.ReplaceAllString(msg, ""), ""
	}
	return msg, ""
}

// Internal is the error of a fault in the gateway itself.
func Internal(ctx context.Context) Error {
	return FromErr(ctx, apierr.New(codes.Internal, fault.Internal, "internal error"))
}

// WriteError writes e in an error envelope.
func WriteError(w http.ResponseWriter, e Error) { WriteErrors(w, []Error{e}) }

// WriteErrors writes one error envelope with a message per problem
// (docs/api-decisions.md#envelope); the first error's status is the answer's. es must not be empty.
func WriteErrors(w http.ResponseWriter, es []Error) {
	msgs := make([]errorMessage, len(es))
	for i, e := range es {
		msgs[i] = errorMessage{
			Type: "ERROR", Code: e.Code, Message: e.Message, HTTPStatus: StatusName(e.Status),
			Technical: e.Status >= 500,
		}
		if e.Field != "" {
			msgs[i].Field = &es[i].Field
		}
	}
	status := es[0].Status
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `ApiKey realm="mnv"`)
	}
	write(w, status, errorEnvelope{Messages: msgs})
}

func write(w http.ResponseWriter, status int, body any) {
	b, err := jsonpb.MarshalJSON(body)
	if err != nil {
		// Only reachable with a broken envelope type: answer something well-formed anyway.
		status = http.StatusInternalServerError
		b = []byte(`{"success":false,"messages":[{"type":"ERROR","code":"INTERNAL","message":"the service could not complete the request","httpStatus":"INTERNAL_SERVER_ERROR","technical":true,"field":null}],"data":null}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ResponseRewriter wraps every successful gRPC answer in the envelope. messages gives the
// success text per RPC (full method name); others get "OK". It returns the finished JSON
// (json.RawMessage), which the marshaler writes as it is: this is the hot path of every
// request, so the envelope is appended directly rather than built by encoding/json.
func ResponseRewriter(messages map[string]string) runtime.ForwardResponseRewriter {
	return func(ctx context.Context, resp proto.Message) (any, error) {
		body := resp
		if rb, ok := resp.(interface{ XXX_ResponseBody() any }); ok {
			if m, ok := rb.XXX_ResponseBody().(proto.Message); ok {
				body = m
			}
		}
		msg := "OK"
		if method, ok := runtime.RPCMethod(ctx); ok {
			if m, ok := messages[method]; ok {
				msg = m
			}
		}
		b := make([]byte, 0, 1024)
		b = append(b, `{"success":true,"messages":[{"type":"SUCCESS","message":`...)
		b = apijson.AppendString(b, msg)
		b = append(b, `,"httpStatus":"OK","technical":false}],"data":`...)
		b = apijson.AppendMessage(b, body.ProtoReflect())
		return json.RawMessage(append(b, '}')), nil
	}
}

// ErrorHandler writes gRPC and gateway errors in the envelope; it also passes on the headers a
// service set (Retry-After) through the mux's outgoing header matcher.
func ErrorHandler(log *zap.Logger, outgoing runtime.HeaderMatcherFunc) runtime.ErrorHandlerFunc {
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
		var hse *runtime.HTTPStatusError
		e := FromErr(ctx, err)
		if errors.As(err, &hse) && hse.HTTPStatus == http.StatusBadRequest {
			e = Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument), Message: "malformed request path"}
		}
		if md, ok := runtime.ServerMetadataFromContext(ctx); ok {
			for k, vs := range md.HeaderMD {
				if h, ok := outgoing(k); ok {
					for _, v := range vs {
						w.Header().Add(h, v)
					}
				}
			}
		}
		if e.Status >= 500 {
			// The route's pattern, never the path: a path holds ids, and the transaction id of a
			// browser flow is the capability to capture it.
			route := "unmatched"
			if p, ok := runtime.HTTPPattern(r.Context()); ok {
				route = p.String()
			}
			log.Warn("request failed", logging.Request(r.Context()),
				zap.String("route", route), zap.String("grpc_code", apierr.Parse(err).Code.String()))
		}
		WriteError(w, e)
	}
}

// RoutingErrorHandler answers unknown paths (404) and wrong methods (405) in the envelope. A
// 405 carries Allow: the methods allowed gives for the path.
func RoutingErrorHandler(allowed func(path string) []string) runtime.RoutingErrorHandlerFunc {
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, status int) {
		if status == http.StatusMethodNotAllowed {
			if methods := allowed(r.URL.Path); len(methods) > 0 {
				w.Header().Set("Allow", strings.Join(methods, ", "))
			}
		}
		WriteError(w, RoutingError(status))
	}
}

// RoutingError is the error of an unknown path or method.
func RoutingError(status int) Error {
	switch status {
	case http.StatusMethodNotAllowed:
		return Error{Status: status, Code: "METHOD_NOT_ALLOWED", Message: "this path does not support that method"}
	case http.StatusNotFound:
		return Error{Status: status, Code: string(fault.NotFound), Message: "no such path"}
	}
	return Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument), Message: "malformed request path"}
}
