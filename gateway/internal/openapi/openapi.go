// Package openapi turns the OpenAPI (Swagger 2.0) document that protoc-gen-openapiv2 generates
// from the protos into the description of /v1/api as the gateway really serves it:
//
//   - 64-bit integers are JSON numbers, not quoted strings (jsonpb);
//   - timestamps are ISO 8601 UTC with exactly three fractional digits, null when unset;
//   - enum values are written without their type prefix, and the *_UNSPECIFIED zero value is
//     null rather than a value;
//   - every answer is wrapped in the envelope (contract section 2), errors in the error
//     envelope, with the statuses of the contract's table;
//   - the credential headers follow headerauth's route rules (contract section 3);
//   - X-Request-Id is accepted and echoed everywhere, Idempotency-Key on every POST.
//
// The generated document is decoded generically and rewritten; the same input always gives
// byte-identical output.
package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mnvhq/mnv/gateway/internal/headerauth"
)

// Names of what Document adds to the document.
const (
	defEnvelope      = "Envelope"
	defMessage       = "Message"
	defErrorEnvelope = "ErrorEnvelope"
	defErrorMessage  = "ErrorMessage"

	secAPIKey   = "ApiKey"
	secClientID = "ClientId"
	secSDKToken = "SdkToken"

	headerRequestID   = "X-Request-Id"
	headerIdempotency = "Idempotency-Key"
	headerReplayed    = "Idempotent-Replayed"

	refPrefix = "#/definitions/"
)

// timestampNote is appended to the description of every timestamp.
const timestampNote = "ISO 8601 UTC with exactly three fractional digits, e.g. 2026-12-31T23:59:59.000Z."

const infoDescription = "The mnv mobile-number verification API.\n\n" +
	"Every JSON response is wrapped in an envelope: `{success, messages, data}`. On success, " +
	"`success` is true, `messages` holds one message of type SUCCESS and `data` is the payload " +
	"described per operation. On error, `success` is false, `data` is null and each message " +
	"carries a stable machine-readable `code`, the HTTP status name in `httpStatus` and, where " +
	"one request field is at fault, its name in `field`.\n\n" +
	"Every call sends X-API-KEY and X-CLIENT-ID, except: under /v1/api/me/ and on " +
	"POST /v1/api/clients/{clientId}/rotate-key X-API-KEY alone suffices (X-CLIENT-ID, if sent, " +
	"must match the key); POST /v1/api/me/api-key/generate takes X-CLIENT-ID and the client " +
	"secret in the body. A missing, malformed, repeated or mismatched credential header is 401.\n\n" +
	"Integers are JSON numbers; timestamps are ISO 8601 UTC with exactly three fractional " +
	"digits (2026-12-31T23:59:59.000Z); absent optional values are null; enum values carry no " +
	"type prefix; unknown request fields are rejected (400)."

// methods are the operation keys of a Swagger 2.0 path item.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch"}

// errorResponses are the error statuses every operation may answer, with their description
// (contract section 2).
var errorResponses = []struct {
	status      string
	description string
	headers     map[string]any
}{
	{"400", "INVALID_ARGUMENT: malformed JSON, unknown field, bad value or length out of bounds; or FEATURE_NOT_ENABLED: the product, operator or serviceType is not enabled for the account.", nil},
	{"401", "UNAUTHENTICATED: a credential header is missing, malformed, invalid, revoked or does not match the other.", map[string]any{
		"WWW-Authenticate": map[string]any{"type": "string", "description": `Always ApiKey realm="mnv".`},
	}},
	{"403", "PERMISSION_DENIED: authenticated, but the key's role may not do this, or the account is SUSPENDED.", nil},
	{"404", "NOT_FOUND: unknown id, or an id that belongs to another client.", nil},
	{"409", "CONFLICT or ALREADY_USED: the resource already exists or was already used, or a request with the same Idempotency-Key is still in progress.", nil},
	{"413", "PAYLOAD_TOO_LARGE: the request body is over the size limit (1 MiB by default).", nil},
	{"422", "IDEMPOTENCY_MISMATCH: the Idempotency-Key was used with a different request.", nil},
	{"429", "RATE_LIMITED: a per-client or per-number limit was hit; retry after Retry-After seconds.", map[string]any{
		"Retry-After": map[string]any{"type": "integer", "description": "Seconds to wait before retrying."},
	}},
	{"500", "INTERNAL: server fault; the message carries the request id.", nil},
	{"503", "UNAVAILABLE: a backend service is down; try again.", nil},
}

// Document returns the OpenAPI document of /v1/api as the gateway really serves it.
func Document(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("openapi: decode: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("openapi: decode: more than one JSON value")
	}
	if doc == nil {
		return nil, errors.New("openapi: decode: not a JSON object")
	}
	if v, _ := doc["swagger"].(string); v != "2.0" {
		return nil, fmt.Errorf("openapi: not a Swagger 2.0 document (swagger %q)", v)
	}

	setInfo(doc)
	walk(doc, kindNode, false)
	usesSDKToken := rewriteOperations(doc)
	addDefinitions(doc)
	pruneStatusDefinitions(doc)
	pruneTags(doc)
	setSecurityDefinitions(doc, usesSDKToken)

	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return append(out, '\n'), nil
}

func setInfo(doc map[string]any) {
	info, _ := doc["info"].(map[string]any)
	if info == nil {
		info = map[string]any{}
		doc["info"] = info
	}
	info["title"] = "mnv API"
	info["version"] = "1.0"
	info["description"] = infoDescription
}

// walkKind says what a JSON value of the document is, as far as the rewrite cares.
type walkKind int

const (
	kindNode     walkKind = iota // any object: a schema, a parameter, a path item...
	kindProperty                 // the schema of one property of an object schema
	kindProps                    // a "properties" map: property name -> schema
)

// walk applies the schema rules (64-bit integers, timestamps, enums) to every object of the
// document. Each rule only looks at one object, so the order of the walk does not matter.
// inParam is true inside a (non-body) parameter, whose values are never null.
func walk(v any, kind walkKind, inParam bool) {
	switch t := v.(type) {
	case map[string]any:
		if kind != kindProps {
			if _, ok := t["in"].(string); ok {
				inParam = true
			}
			fixInt64(t)
			fixTimestamp(t, kind == kindProperty && !inParam)
			fixEnum(t, !inParam)
		}
		for k, c := range t {
			switch {
			case kind == kindProps:
				walk(c, kindProperty, inParam)
			case k == "properties":
				walk(c, kindProps, inParam)
			case k == "schema":
				// A body parameter's schema is a JSON body like any other.
				walk(c, kindNode, false)
			default:
				walk(c, kindNode, inParam)
			}
		}
	case []any:
		for _, c := range t {
			walk(c, kindNode, inParam)
		}
	}
}

// fixInt64 types 64-bit integers as the numbers jsonpb writes, not protojson's strings.
func fixInt64(m map[string]any) {
	if m["type"] != "string" {
		return
	}
	format, _ := m["format"].(string)
	if format != "int64" && format != "uint64" {
		return
	}
	m["type"] = "integer"
	for _, k := range []string{"default", "example"} {
		if s, ok := m[k].(string); ok {
			if _, err := strconv.ParseInt(s, 10, 64); err == nil {
				m[k] = json.Number(s)
			} else if _, err := strconv.ParseUint(s, 10, 64); err == nil {
				m[k] = json.Number(s)
			}
		}
	}
}

// fixTimestamp documents the one timestamp format of the API. A timestamp property is a message
// field, null when unset.
func fixTimestamp(m map[string]any, property bool) {
	if m["format"] != "date-time" {
		return
	}
	appendDescription(m, timestampNote)
	if property {
		m["x-nullable"] = true
	}
}

func appendDescription(m map[string]any, note string) {
	desc, _ := m["description"].(string)
	switch {
	case strings.Contains(desc, note):
	case strings.TrimSpace(desc) == "":
		m["description"] = note
	default:
		m["description"] = strings.TrimRight(desc, " \n") + "\n\n" + note
	}
}

// fixEnum drops the type prefix and the *_UNSPECIFIED value of an enum (ROLE_UNSPECIFIED,
// ROLE_ADMIN, ROLE_MEMBER -> ADMIN, MEMBER), as jsonpb writes them. In a JSON body (not a
// parameter) the zero value is written as null.
func fixEnum(m map[string]any, body bool) {
	values, ok := m["enum"].([]any)
	if !ok || len(values) == 0 {
		return
	}
	names := make([]string, 0, len(values))
	for _, v := range values {
		s, ok := v.(string)
		if !ok {
			return
		}
		names = append(names, s)
	}
	unspecified := ""
	for _, s := range names {
		if strings.HasSuffix(s, "_UNSPECIFIED") {
			unspecified = s
			break
		}
	}
	if unspecified == "" {
		return
	}
	prefix := strings.TrimSuffix(unspecified, "UNSPECIFIED")
	for _, s := range names {
		if !strings.HasPrefix(s, prefix) || s == prefix {
			return
		}
	}
	out := make([]any, 0, len(names))
	for _, s := range names {
		if s != unspecified {
			out = append(out, strings.TrimPrefix(s, prefix))
		}
	}
	m["enum"] = out
	delete(m, "default")

	// The generator copies the value names into the description (" - ROLE_ADMIN: ..."): name
	// them as the wire does, longest first so no name is cut inside a longer one.
	if desc, ok := m["description"].(string); ok {
		byLength := slices.Clone(names)
		slices.SortFunc(byLength, func(a, b string) int {
			if len(a) != len(b) {
				return len(b) - len(a)
			}
			return strings.Compare(a, b)
		})
		pairs := make([]string, 0, 2*len(byLength))
		for _, s := range byLength {
			if s != unspecified {
				pairs = append(pairs, s, strings.TrimPrefix(s, prefix))
			}
		}
		m["description"] = strings.NewReplacer(pairs...).Replace(desc)
	}
	if body {
		m["x-nullable"] = true
		appendDescription(m, "Written without the "+prefix+" prefix (also accepted with it in request bodies); null when unset.")
	}
}

// rewriteOperations applies the envelope, error, header and security rules to every operation.
// It reports whether an operation takes the SDK token.
func rewriteOperations(doc map[string]any) bool {
	paths, _ := doc["paths"].(map[string]any)
	usesSDKToken := false
	for path, item := range paths {
		pathItem, ok := item.(map[string]any)
		if !ok {
			continue
		}
		kind := headerauth.Classify(gatewayPattern(path))
		for _, method := range methods {
			op, ok := pathItem[method].(map[string]any)
			if !ok {
				continue
			}
			rewriteResponses(op, method)
			addHeaderParameters(op, method)
			if strings.HasPrefix(path, "/v1/api/web/") {
				addOriginParameter(op)
			}
			op["security"] = security(kind)
			if kind == headerauth.SDKSession {
				usesSDKToken = true
			}
		}
	}
	return usesSDKToken
}

// gatewayPattern writes a Swagger path the way grpc-gateway's Pattern.String does, which is
// what headerauth.Classify matches: "/v1/api/clients/{clientId}/rotate-key" becomes
// "/v1/api/clients/{client_id=*}/rotate-key". Swagger names path parameters by their JSON
// (camelCase) names; the gateway by their proto (snake_case) names.
func gatewayPattern(path string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(path[open:], '}')
		if end < 0 {
			break
		}
		end += open
		b.WriteString(path[:open+1])
		name := path[open+1 : end]
		if i := strings.IndexByte(name, '='); i >= 0 {
			b.WriteString(snakeCase(name[:i]) + name[i:])
		} else {
			b.WriteString(snakeCase(name) + "=*")
		}
		b.WriteByte('}')
		path = path[end+1:]
	}
	b.WriteString(path)
	return b.String()
}

func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if 'A' <= r && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func security(kind headerauth.Kind) []any {
	req := func(names ...string) map[string]any {
		m := map[string]any{}
		for _, n := range names {
			m[n] = []any{}
		}
		return m
	}
	switch kind {
	case headerauth.KeyOnly:
		return []any{req(secAPIKey)}
	case headerauth.Bootstrap:
		return []any{req(secClientID)}
	case headerauth.SDKSession:
		return []any{req(secSDKToken, secClientID)}
	case headerauth.Public:
		return []any{}
	}
	return []any{req(secAPIKey, secClientID)}
}

func ref(name string) map[string]any { return map[string]any{"$ref": refPrefix + name} }

// isStatusRef reports whether a schema refers to the gRPC status the generator describes errors
// with (which the gateway never writes).
func isStatusRef(schema any) bool {
	m, _ := schema.(map[string]any)
	r, _ := m["$ref"].(string)
	return r == refPrefix+"rpcStatus" || r == refPrefix+"googleRpcStatus"
}

func rewriteResponses(op map[string]any, method string) {
	responses, _ := op["responses"].(map[string]any)
	if responses == nil {
		responses = map[string]any{}
		op["responses"] = responses
	}
	if d, ok := responses["default"].(map[string]any); ok && isStatusRef(d["schema"]) {
		delete(responses, "default")
	}
	for code, r := range responses {
		resp, ok := r.(map[string]any)
		if !ok {
			continue
		}
		status, err := strconv.Atoi(code)
		switch {
		case err != nil:
		case status >= 200 && status < 300:
			if s, ok := resp["schema"]; ok {
				resp["schema"] = wrapEnvelope(s)
			} else {
				resp["schema"] = ref(defEnvelope)
			}
			if d, _ := resp["description"].(string); strings.TrimSpace(d) == "" {
				resp["description"] = "A successful response."
			}
			if method == "post" {
				addHeader(resp, headerReplayed, map[string]any{
					"type": "string", "enum": []any{"true"},
					"description": "Set when the answer is the replay of an earlier request with the same Idempotency-Key.",
				})
			}
		case status >= 400:
			// The gateway writes every error in the error envelope.
			resp["schema"] = ref(defErrorEnvelope)
		}
	}
	for _, e := range errorResponses {
		resp := map[string]any{"description": e.description, "schema": ref(defErrorEnvelope)}
		for name, h := range e.headers {
			addHeader(resp, name, h)
		}
		responses[e.status] = resp
	}
	for _, r := range responses {
		if resp, ok := r.(map[string]any); ok {
			addHeader(resp, headerRequestID, map[string]any{
				"type": "string", "description": "The request id: the caller's X-Request-Id when it was valid, else a new one.",
			})
		}
	}
}

// wrapEnvelope puts a payload schema in the success envelope, once.
func wrapEnvelope(s any) any {
	if m, ok := s.(map[string]any); ok {
		if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
			if first, ok := all[0].(map[string]any); ok && first["$ref"] == refPrefix+defEnvelope {
				return s
			}
		}
	}
	return map[string]any{"allOf": []any{
		ref(defEnvelope),
		map[string]any{"type": "object", "properties": map[string]any{"data": s}},
	}}
}

func addHeader(resp map[string]any, name string, h any) {
	headers, _ := resp["headers"].(map[string]any)
	if headers == nil {
		headers = map[string]any{}
		resp["headers"] = headers
	}
	if _, ok := headers[name]; !ok {
		headers[name] = h
	}
}

func addHeaderParameters(op map[string]any, method string) {
	params, _ := op["parameters"].([]any)
	has := func(name string) bool {
		for _, p := range params {
			pm, _ := p.(map[string]any)
			n, _ := pm["name"].(string)
			if pm["in"] == "header" && strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	if method == "post" && !has(headerIdempotency) {
		params = append(params, map[string]any{
			"name": headerIdempotency, "in": "header", "required": false, "type": "string",
			"minLength": 1, "maxLength": 255,
			"description": "1 to 255 printable ASCII characters. The same key with the same request within 24 hours returns the first answer (Idempotent-Replayed: true) and runs the operation once; with another request it is 422; while the first is still running, 409.",
		})
	}
	if !has(headerRequestID) {
		params = append(params, map[string]any{
			"name": headerRequestID, "in": "header", "required": false, "type": "string",
			"minLength": 1, "maxLength": 128,
			"description": "An id for the request, 1 to 128 visible ASCII characters, echoed on the response; an invalid one is replaced by a new id.",
		})
	}
	op["parameters"] = params
}

// addOriginParameter documents the Origin header that binds a browser route to the web
// origins of the transaction's client (the browser sets it; a page cannot).
func addOriginParameter(op map[string]any) {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if pm, _ := p.(map[string]any); pm["in"] == "header" && pm["name"] == "Origin" {
			return
		}
	}
	op["parameters"] = append(params, map[string]any{
		"name": "Origin", "in": "header", "required": true, "type": "string",
		"description": "The calling page's origin, set by the browser. It must be one of the web origins of the transaction's account (PUT /v1/api/me/web-origins); any other origin, or none, is 403 and captures nothing. CORS is answered for those origins only.",
	})
}

func addDefinitions(doc map[string]any) {
	defs, _ := doc["definitions"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
		doc["definitions"] = defs
	}
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	defs[defMessage] = map[string]any{
		"type":     "object",
		"required": []any{"type", "message", "httpStatus", "technical"},
		"properties": map[string]any{
			"type":       map[string]any{"type": "string", "enum": []any{"SUCCESS"}},
			"message":    str("Human-readable text."),
			"httpStatus": str("The HTTP status's upper-case name, e.g. OK."),
			"technical":  map[string]any{"type": "boolean", "description": "False for a normal outcome."},
		},
		"description": "One message of a success envelope.",
	}
	defs[defEnvelope] = map[string]any{
		"type":     "object",
		"required": []any{"success", "messages", "data"},
		"properties": map[string]any{
			"success":  map[string]any{"type": "boolean", "enum": []any{true}},
			"messages": map[string]any{"type": "array", "items": ref(defMessage)},
			"data":     map[string]any{"type": "object", "description": "The payload of the operation."},
		},
		"description": "The envelope of every successful JSON response.",
	}
	defs[defErrorMessage] = map[string]any{
		"type":     "object",
		"required": []any{"type", "code", "message", "httpStatus", "technical", "field"},
		"properties": map[string]any{
			"type": map[string]any{"type": "string", "enum": []any{"ERROR"}},
			"code": str("Stable machine-readable code: INVALID_ARGUMENT, FEATURE_NOT_ENABLED, UNAUTHENTICATED, " +
				"INSUFFICIENT_BALANCE, BALANCE_EXPIRED, PERMISSION_DENIED, NOT_FOUND, METHOD_NOT_ALLOWED, CONFLICT, " +
				"ALREADY_USED, IDEMPOTENCY_MISMATCH, PAYLOAD_TOO_LARGE, RATE_LIMITED, INTERNAL, UNAVAILABLE."),
			"message":    str("Human-readable text; for 5xx a fixed text with the request id, never internals."),
			"httpStatus": str("The HTTP status's upper-case name, e.g. BAD_REQUEST."),
			"technical":  map[string]any{"type": "boolean", "description": "True only for 5xx."},
			"field": map[string]any{
				"type": "string", "x-nullable": true,
				"description": "The request field (or header) at fault; null when there is none.",
			},
		},
		"description": "One problem of an error envelope.",
	}
	defs[defErrorEnvelope] = map[string]any{
		"type":     "object",
		"required": []any{"success", "messages", "data"},
		"properties": map[string]any{
			"success":  map[string]any{"type": "boolean", "enum": []any{false}},
			"messages": map[string]any{"type": "array", "items": ref(defErrorMessage)},
			"data":     map[string]any{"type": "object", "x-nullable": true, "description": "Always null."},
		},
		"description": "The envelope of every error response.",
	}
}

// pruneStatusDefinitions removes the gRPC status definitions (and protobufAny, which only they
// use) once nothing refers to them.
func pruneStatusDefinitions(doc map[string]any) {
	defs, _ := doc["definitions"].(map[string]any)
	for changed := true; changed; {
		changed = false
		for _, name := range []string{"rpcStatus", "googleRpcStatus", "protobufAny"} {
			def, ok := defs[name]
			if !ok {
				continue
			}
			delete(defs, name)
			if refersTo(doc, refPrefix+name) {
				defs[name] = def
				continue
			}
			changed = true
		}
	}
}

func refersTo(v any, target string) bool {
	switch t := v.(type) {
	case map[string]any:
		if r, ok := t["$ref"].(string); ok && r == target {
			return true
		}
		for _, c := range t {
			if refersTo(c, target) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if refersTo(c, target) {
				return true
			}
		}
	}
	return false
}

// pruneTags drops the tags of services no operation belongs to: the generator describes the
// admin and internal gRPC services, which the gateway does not serve.
func pruneTags(doc map[string]any) {
	tags, ok := doc["tags"].([]any)
	if !ok {
		return
	}
	used := map[string]bool{}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		pathItem, _ := item.(map[string]any)
		for _, method := range methods {
			op, _ := pathItem[method].(map[string]any)
			opTags, _ := op["tags"].([]any)
			for _, t := range opTags {
				if s, ok := t.(string); ok {
					used[s] = true
				}
			}
		}
	}
	kept := []any{}
	for _, t := range tags {
		tm, _ := t.(map[string]any)
		if name, _ := tm["name"].(string); used[name] {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		delete(doc, "tags")
		return
	}
	doc["tags"] = kept
}

func setSecurityDefinitions(doc map[string]any, withSDKToken bool) {
	defs := map[string]any{
		secAPIKey: map[string]any{
			"type": "apiKey", "in": "header", "name": "X-API-KEY",
			"description": "The API key: mnv_ followed by at least 32 base62 characters, with no quotes or spaces.",
		},
		secClientID: map[string]any{
			"type": "apiKey", "in": "header", "name": "X-CLIENT-ID",
			"description": "The client id (a UUID). Where X-API-KEY alone suffices, an X-CLIENT-ID that is sent must match the key.",
		},
	}
	if withSDKToken {
		defs[secSDKToken] = map[string]any{
			"type": "apiKey", "in": "header", "name": "X-SDK-TOKEN",
			"description": "An SDK token, accepted on POST /v1/api/sdk/session only.",
		}
	}
	doc["securityDefinitions"] = defs
	doc["security"] = security(headerauth.KeyAndClient)
}
