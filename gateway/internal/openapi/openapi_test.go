package openapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/proto/gen/openapi"
)

// fixture is a small hand-written document in the generator's style that exercises every rule.
const fixture = `{
  "swagger": "2.0",
  "info": {"title": "x/y.proto", "version": "version not set"},
  "tags": [{"name": "AccountsService"}, {"name": "AccountsAdminService"}],
  "consumes": ["application/json"],
  "produces": ["application/json"],
  "paths": {
    "/v1/api/clients": {
      "get": {
        "operationId": "GetClient",
        "responses": {
          "200": {"description": "", "schema": {"$ref": "#/definitions/v1Client"}},
          "default": {"description": "An unexpected error response.", "schema": {"$ref": "#/definitions/rpcStatus"}}
        },
        "parameters": [
          {"name": "since", "in": "query", "required": false, "type": "string", "format": "date-time"},
          {"name": "minBalance", "in": "query", "required": false, "type": "string", "format": "int64"},
          {"name": "role", "in": "query", "required": false, "type": "string",
           "enum": ["ROLE_UNSPECIFIED", "ROLE_ADMIN", "ROLE_MEMBER"], "default": "ROLE_UNSPECIFIED"}
        ],
        "tags": ["AccountsService"]
      }
    },
    "/v1/api/clients/{clientId}/rotate-key": {
      "post": {
        "operationId": "RotateClientApiKey",
        "responses": {
          "200": {"description": "A successful response.", "schema": {"type": "object", "properties": {"newApiKey": {"type": "string"}}}}
        },
        "parameters": [
          {"name": "clientId", "in": "path", "required": true, "type": "string"},
          {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/v1Body"}}
        ],
        "tags": ["AccountsService"]
      }
    },
    "/v1/api/me/api-key/generate": {
      "post": {
        "operationId": "GenerateFirstApiKey",
        "responses": {"200": {"description": "A successful response.", "schema": {"$ref": "#/definitions/v1Body"}}},
        "tags": ["AccountsService"]
      }
    },
    "/v1/api/me/ledger": {
      "get": {
        "operationId": "ListLedger",
        "responses": {"200": {"description": "A successful response.", "schema": {"$ref": "#/definitions/v1Body"}}},
        "tags": ["AccountsService"]
      }
    },
    "/v1/api/sdk/session": {
      "post": {
        "operationId": "CreateSession",
        "responses": {"200": {"description": "A successful response.", "schema": {"$ref": "#/definitions/v1Body"}}},
        "tags": ["AccountsService"]
      }
    },
    "/v1/api/web/transactions/{transactionId}/capture": {
      "post": {
        "operationId": "Capture",
        "responses": {"200": {"description": "A successful response.", "schema": {"$ref": "#/definitions/v1Body"}}},
        "tags": ["AccountsService"]
      }
    }
  },
  "definitions": {
    "v1Client": {
      "type": "object",
      "properties": {
        "balance": {"type": "string", "format": "int64", "description": "Prepaid balance."},
        "counter": {"type": "string", "format": "uint64"},
        "samples": {"type": "array", "items": {"type": "string", "format": "int64"}},
        "createdAt": {"type": "string", "format": "date-time"},
        "expiresAt": {"type": "string", "format": "date-time", "description": "Unset when it never expires."},
        "role": {"$ref": "#/definitions/v1Role"},
        "status": {"$ref": "#/definitions/v1ClientStatus"},
        "properties": {"type": "string", "format": "int64"}
      }
    },
    "v1Body": {"type": "object", "properties": {"secretKey": {"type": "string"}}},
    "v1Role": {
      "type": "string",
      "enum": ["ROLE_UNSPECIFIED", "ROLE_ADMIN", "ROLE_MEMBER"],
      "default": "ROLE_UNSPECIFIED",
      "description": "Role of a key.\n\n - ROLE_ADMIN: may manage keys."
    },
    "v1ClientStatus": {
      "type": "string",
      "enum": ["CLIENT_STATUS_UNSPECIFIED", "CLIENT_STATUS_ACTIVE", "CLIENT_STATUS_SUSPENDED"],
      "default": "CLIENT_STATUS_UNSPECIFIED"
    },
    "v1Mixed": {"type": "string", "enum": ["RED", "GREEN_UNSPECIFIED", "GREEN_DARK"]},
    "rpcStatus": {
      "type": "object",
      "properties": {
        "code": {"type": "integer", "format": "int32"},
        "details": {"type": "array", "items": {"type": "object", "$ref": "#/definitions/protobufAny"}}
      }
    },
    "protobufAny": {"type": "object", "properties": {"@type": {"type": "string"}}, "additionalProperties": {}}
  }
}`

// errorStatuses are the error responses every operation must describe.
var errorStatuses = []string{"400", "401", "403", "404", "409", "413", "422", "429", "500", "503"}

type doc = map[string]any

func document(t *testing.T, raw []byte) doc {
	t.Helper()
	out, err := Document(raw)
	if err != nil {
		t.Fatalf("Document: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("Document wrote invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var d doc
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decode output: %v", err)
	}
	return d
}

// get follows a path of map keys and array indexes (as strings) into d.
func get(t *testing.T, d any, path ...string) any {
	t.Helper()
	cur := d
	for i, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				t.Fatalf("no %q at %s", p, strings.Join(path[:i], "/"))
			}
			cur = v
		default:
			t.Fatalf("%s is %T, not an object", strings.Join(path[:i], "/"), cur)
		}
	}
	return cur
}

func has(d any, path ...string) bool {
	cur := d
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// operations calls f for every operation of d.
func operations(t *testing.T, d doc, f func(path, method string, op map[string]any)) {
	t.Helper()
	n := 0
	for path, item := range get(t, d, "paths").(map[string]any) {
		for _, method := range methods {
			if op, ok := item.(map[string]any)[method].(map[string]any); ok {
				f(path, method, op)
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no operations")
	}
}

// walkAll calls f for every object in v.
func walkAll(v any, f func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		f(t)
		for _, c := range t {
			walkAll(c, f)
		}
	case []any:
		for _, c := range t {
			walkAll(c, f)
		}
	}
}

var inputs = []struct {
	name string
	raw  []byte
}{
	{"generated", openapi.JSON},
	{"fixture", []byte(fixture)},
}

func TestValidAndDeterministic(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			first, err := Document(in.raw)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(first) {
				t.Fatal("invalid JSON")
			}
			for i := 0; i < 5; i++ {
				again, err := Document(in.raw)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(first, again) {
					t.Fatalf("run %d differs from the first", i+2)
				}
			}
		})
	}
}

func TestRejectsNonSwagger(t *testing.T) {
	for _, raw := range []string{``, `[]`, `null`, `{"openapi":"3.0.0"}`, `{"swagger":"2.0"} {}`, `{"swagger":"2.0"`} {
		if _, err := Document([]byte(raw)); err == nil {
			t.Errorf("Document(%q): no error", raw)
		}
	}
}

func TestInfo(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			if got := get(t, d, "info", "title"); got != "mnv API" {
				t.Errorf("title = %v", got)
			}
			if got := get(t, d, "info", "version"); got != "1.0" {
				t.Errorf("version = %v", got)
			}
			desc, _ := get(t, d, "info", "description").(string)
			for _, want := range []string{"envelope", "X-API-KEY", "X-CLIENT-ID"} {
				if !strings.Contains(desc, want) {
					t.Errorf("description does not mention %s", want)
				}
			}
			if has(d, "host") || has(d, "basePath") {
				t.Error("host or basePath added")
			}
		})
	}
}

func TestPathsUnderV1API(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			for path := range get(t, d, "paths").(map[string]any) {
				if !strings.HasPrefix(path, "/v1/api/") {
					t.Errorf("path %s is not under /v1/api/", path)
				}
			}
		})
	}
}

func TestInt64AsNumbers(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			walkAll(d, func(m map[string]any) {
				if m["type"] == "string" && (m["format"] == "int64" || m["format"] == "uint64") {
					t.Errorf("64-bit integer typed as string: %s", toJSON(t, m))
				}
			})
		})
	}

	d := document(t, []byte(fixture))
	props := get(t, d, "definitions", "v1Client", "properties")
	for _, tc := range []struct {
		path   []string
		format string
	}{
		{[]string{"balance"}, "int64"},
		{[]string{"counter"}, "uint64"},
		{[]string{"samples", "items"}, "int64"},
		{[]string{"properties"}, "int64"}, // a property named "properties"
	} {
		m := get(t, props, tc.path...).(map[string]any)
		if m["type"] != "integer" || m["format"] != tc.format {
			t.Errorf("%v = %s, want integer/%s", tc.path, toJSON(t, m), tc.format)
		}
	}
	if got := get(t, props, "balance", "description"); got != "Prepaid balance." {
		t.Errorf("balance description = %v", got)
	}
	param := findParam(t, d, "/v1/api/clients", "get", "minBalance")
	if param["type"] != "integer" || param["format"] != "int64" {
		t.Errorf("minBalance parameter = %s", toJSON(t, param))
	}

	g := document(t, openapi.JSON)
	if m := get(t, g, "definitions", "v1Client", "properties", "balance").(map[string]any); m["type"] != "integer" {
		t.Errorf("Client.balance = %s", toJSON(t, m))
	}
}

func TestTimestamps(t *testing.T) {
	const note = "ISO 8601 UTC with exactly three fractional digits, e.g. 2026-12-31T23:59:59.000Z"
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			n := 0
			walkAll(d, func(m map[string]any) {
				if m["format"] != "date-time" {
					return
				}
				n++
				if desc, _ := m["description"].(string); strings.Count(desc, note) != 1 {
					t.Errorf("timestamp description %q does not note the format once", desc)
				}
			})
			if n == 0 {
				t.Fatal("no timestamps")
			}
		})
	}

	d := document(t, []byte(fixture))
	created := get(t, d, "definitions", "v1Client", "properties", "createdAt").(map[string]any)
	if created["x-nullable"] != true {
		t.Errorf("createdAt not nullable: %s", toJSON(t, created))
	}
	expires := get(t, d, "definitions", "v1Client", "properties", "expiresAt", "description").(string)
	if !strings.HasPrefix(expires, "Unset when it never expires.") || !strings.Contains(expires, note) {
		t.Errorf("expiresAt description = %q, want the original text then the note", expires)
	}
	since := findParam(t, d, "/v1/api/clients", "get", "since")
	if desc, _ := since["description"].(string); !strings.Contains(desc, note) {
		t.Errorf("since parameter description = %q", desc)
	}
	if _, ok := since["x-nullable"]; ok {
		t.Error("a query parameter is marked nullable")
	}

	g := document(t, openapi.JSON)
	if desc, _ := get(t, g, "definitions", "v1ApiKey", "properties", "lastUsedAt", "description").(string); !strings.HasPrefix(desc, "Updated at most once a minute.") {
		t.Errorf("ApiKey.lastUsedAt lost its description: %q", desc)
	}
}

func TestEnums(t *testing.T) {
	g := document(t, openapi.JSON)
	for _, tc := range []struct {
		def  string
		want []any
	}{
		{"v1Role", []any{"ADMIN", "MEMBER"}},
		{"v1ClientStatus", []any{"ACTIVE", "SUSPENDED"}},
		{"v1Feature", []any{"VERIFY", "CONNECT", "STUCK_PLUS", "SANDBOX"}},
		{"v1LedgerKind", []any{"TOP_UP", "VERIFICATION", "CONNECT_ENRICHMENT", "STUCK_PLUS_REVEAL", "REFUND", "ADJUSTMENT"}},
	} {
		def := get(t, g, "definitions", tc.def).(map[string]any)
		if !reflect.DeepEqual(def["enum"], tc.want) {
			t.Errorf("%s enum = %v, want %v", tc.def, def["enum"], tc.want)
		}
		if _, ok := def["default"]; ok {
			t.Errorf("%s still has a default", tc.def)
		}
		if def["x-nullable"] != true {
			t.Errorf("%s is not nullable", tc.def)
		}
	}
	desc := get(t, g, "definitions", "v1ClientStatus", "description").(string)
	if strings.Contains(desc, "CLIENT_STATUS_ACTIVE") || !strings.Contains(desc, " - ACTIVE:") {
		t.Errorf("ClientStatus description keeps prefixed names: %q", desc)
	}
	walkAll(g, func(m map[string]any) {
		if vals, ok := m["enum"].([]any); ok {
			for _, v := range vals {
				if s, _ := v.(string); strings.HasSuffix(s, "UNSPECIFIED") {
					t.Errorf("enum still has %s", s)
				}
			}
		}
	})

	d := document(t, []byte(fixture))
	if got := get(t, d, "definitions", "v1Role", "enum"); !reflect.DeepEqual(got, []any{"ADMIN", "MEMBER"}) {
		t.Errorf("fixture Role enum = %v", got)
	}
	if got := get(t, d, "definitions", "v1Role", "description").(string); !strings.Contains(got, " - ADMIN: may manage keys.") {
		t.Errorf("fixture Role description = %q", got)
	}
	role := findParam(t, d, "/v1/api/clients", "get", "role")
	if !reflect.DeepEqual(role["enum"], []any{"ADMIN", "MEMBER"}) {
		t.Errorf("inline enum parameter = %s", toJSON(t, role))
	}
	if _, ok := role["default"]; ok {
		t.Error("inline enum parameter keeps its default")
	}
	// Values that do not all share the UNSPECIFIED value's prefix are left alone.
	if got := get(t, d, "definitions", "v1Mixed", "enum"); !reflect.DeepEqual(got, []any{"RED", "GREEN_UNSPECIFIED", "GREEN_DARK"}) {
		t.Errorf("v1Mixed enum = %v", got)
	}
}

func TestEnvelope(t *testing.T) {
	g := document(t, openapi.JSON)
	schema := get(t, g, "paths", "/v1/api/clients", "get", "responses", "200", "schema")
	want := map[string]any{"allOf": []any{
		map[string]any{"$ref": "#/definitions/Envelope"},
		map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"$ref": "#/definitions/v1Client"}}},
	}}
	if !reflect.DeepEqual(schema, want) {
		t.Errorf("GET /v1/api/clients 200 schema = %s", toJSON(t, schema))
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			for _, def := range []string{"Envelope", "Message", "ErrorEnvelope", "ErrorMessage"} {
				if !has(d, "definitions", def) {
					t.Errorf("no %s definition", def)
				}
			}
			if got := get(t, d, "definitions", "ErrorMessage", "properties", "field", "x-nullable"); got != true {
				t.Errorf("ErrorMessage.field x-nullable = %v", got)
			}
			operations(t, d, func(path, method string, op map[string]any) {
				s := get(t, op, "responses", "200", "schema").(map[string]any)
				all, _ := s["allOf"].([]any)
				if len(all) != 2 || !reflect.DeepEqual(all[0], map[string]any{"$ref": "#/definitions/Envelope"}) ||
					!has(all[1], "properties", "data") {
					t.Errorf("%s %s: 200 not in the envelope: %s", method, path, toJSON(t, s))
				}
				if d, _ := get(t, op, "responses", "200", "description").(string); d == "" {
					t.Errorf("%s %s: empty 200 description", method, path)
				}
			})
		})
	}

	d := document(t, []byte(fixture))
	inline := get(t, d, "paths", "/v1/api/clients/{clientId}/rotate-key", "post", "responses", "200", "schema", "allOf").([]any)
	if got := get(t, inline[1], "properties", "data", "properties", "newApiKey", "type"); got != "string" {
		t.Errorf("inline 200 schema not wrapped as data: %s", toJSON(t, inline))
	}
}

func TestErrorResponses(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			operations(t, d, func(path, method string, op map[string]any) {
				responses := get(t, op, "responses").(map[string]any)
				if _, ok := responses["default"]; ok {
					t.Errorf("%s %s: default response left", method, path)
				}
				for _, status := range errorStatuses {
					r, ok := responses[status].(map[string]any)
					if !ok {
						t.Errorf("%s %s: no %s response", method, path, status)
						continue
					}
					if !reflect.DeepEqual(r["schema"], map[string]any{"$ref": "#/definitions/ErrorEnvelope"}) {
						t.Errorf("%s %s %s: schema %s", method, path, status, toJSON(t, r["schema"]))
					}
					if desc, _ := r["description"].(string); desc == "" || strings.Contains(desc, "\n") {
						t.Errorf("%s %s %s: description %q is not one line", method, path, status, desc)
					}
				}
				for status, r := range responses {
					if !has(r, "headers", "X-Request-Id") {
						t.Errorf("%s %s %s: no X-Request-Id header", method, path, status)
					}
				}
				if !has(responses, "429", "headers", "Retry-After") {
					t.Errorf("%s %s: 429 without Retry-After", method, path)
				}
			})
			if has(d, "definitions", "rpcStatus") || has(d, "definitions", "protobufAny") {
				t.Error("rpcStatus or protobufAny left without references")
			}
		})
	}
}

func TestStatusDefinitionsKeptWhenReferenced(t *testing.T) {
	var d map[string]any
	if err := json.Unmarshal([]byte(fixture), &d); err != nil {
		t.Fatal(err)
	}
	defs := d["definitions"].(map[string]any)
	defs["v1Wrapper"] = map[string]any{"type": "object", "properties": map[string]any{
		"any": map[string]any{"$ref": "#/definitions/protobufAny"},
	}}
	raw, _ := json.Marshal(d)
	out := document(t, raw)
	if !has(out, "definitions", "protobufAny") {
		t.Error("protobufAny removed although v1Wrapper refers to it")
	}
	if has(out, "definitions", "rpcStatus") {
		t.Error("rpcStatus kept although nothing refers to it")
	}
}

func TestSecurity(t *testing.T) {
	both := []any{map[string]any{"ApiKey": []any{}, "ClientId": []any{}}}
	keyOnly := []any{map[string]any{"ApiKey": []any{}}}
	clientOnly := []any{map[string]any{"ClientId": []any{}}}

	g := document(t, openapi.JSON)
	for name, header := range map[string]string{"ApiKey": "X-API-KEY", "ClientId": "X-CLIENT-ID"} {
		def := get(t, g, "securityDefinitions", name).(map[string]any)
		if def["type"] != "apiKey" || def["in"] != "header" || def["name"] != header {
			t.Errorf("securityDefinitions.%s = %s", name, toJSON(t, def))
		}
	}
	if got := get(t, g, "security"); !reflect.DeepEqual(got, both) {
		t.Errorf("top-level security = %s", toJSON(t, got))
	}
	for _, tc := range []struct {
		path, method string
		want         []any
	}{
		{"/v1/api/clients", "get", both},
		{"/v1/api/clients/rotate-key", "post", both},
		{"/v1/api/clients/{clientId}/rotate-key", "post", keyOnly},
		{"/v1/api/me/api-keys", "get", keyOnly},
		{"/v1/api/me/api-keys/{keyId}", "delete", keyOnly},
		{"/v1/api/me/api-key/rotate", "post", keyOnly},
		{"/v1/api/me/api-key/generate", "post", clientOnly},
		{"/v1/api/sdk/session", "post", []any{map[string]any{"SdkToken": []any{}, "ClientId": []any{}}}},
		{"/v1/api/web/transactions/{transactionId}/capture", "post", []any{}},
	} {
		if got := get(t, g, "paths", tc.path, tc.method, "security"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s security = %s, want %s", tc.method, tc.path, toJSON(t, got), toJSON(t, tc.want))
		}
	}
	if !has(g, "securityDefinitions", "SdkToken") {
		t.Error("SdkToken not defined although the SDK session takes it")
	}
	operations(t, g, func(path, method string, op map[string]any) {
		if _, ok := op["security"]; !ok {
			t.Errorf("%s %s: no security", method, path)
		}
	})

	d := document(t, []byte(fixture))
	for _, tc := range []struct {
		path, method string
		want         []any
	}{
		{"/v1/api/clients", "get", both},
		{"/v1/api/clients/{clientId}/rotate-key", "post", keyOnly},
		{"/v1/api/me/ledger", "get", keyOnly},
		{"/v1/api/me/api-key/generate", "post", clientOnly},
		{"/v1/api/sdk/session", "post", []any{map[string]any{"SdkToken": []any{}, "ClientId": []any{}}}},
		{"/v1/api/web/transactions/{transactionId}/capture", "post", []any{}},
	} {
		if got := get(t, d, "paths", tc.path, tc.method, "security"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("fixture %s %s security = %s, want %s", tc.method, tc.path, toJSON(t, got), toJSON(t, tc.want))
		}
	}
	if got := get(t, d, "securityDefinitions", "SdkToken", "name"); got != "X-SDK-TOKEN" {
		t.Errorf("SdkToken header = %v", got)
	}
}

func TestGatewayPattern(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/api/clients":                        "/v1/api/clients",
		"/v1/api/clients/{clientId}/rotate-key":  "/v1/api/clients/{client_id=*}/rotate-key",
		"/v1/api/clients/{client_id}/rotate-key": "/v1/api/clients/{client_id=*}/rotate-key",
		"/v1/api/a/{aId}/b/{bigId}":              "/v1/api/a/{a_id=*}/b/{big_id=*}",
		"/v1/api/x/{name=items/*}":               "/v1/api/x/{name=items/*}",
	} {
		if got := gatewayPattern(in); got != want {
			t.Errorf("gatewayPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func findParam(t *testing.T, d doc, path, method, name string) map[string]any {
	t.Helper()
	params, _ := get(t, d, "paths", path, method, "parameters").([]any)
	for _, p := range params {
		if pm, ok := p.(map[string]any); ok && pm["name"] == name {
			return pm
		}
	}
	t.Fatalf("%s %s: no parameter %s", method, path, name)
	return nil
}

func TestHeaderParameters(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			operations(t, d, func(path, method string, op map[string]any) {
				count := map[string]int{}
				params, _ := op["parameters"].([]any)
				for _, p := range params {
					pm := p.(map[string]any)
					if pm["in"] == "header" {
						// Only the browser routes' Origin is required: it binds them to the
						// account's web origins.
						required := pm["name"] == "Origin"
						if pm["required"] != required || pm["type"] != "string" {
							t.Errorf("%s %s: header %v = %s", method, path, pm["name"], toJSON(t, pm))
						}
						count[pm["name"].(string)]++
					}
				}
				wantOrigin := 0
				if strings.HasPrefix(path, "/v1/api/web/") {
					wantOrigin = 1
				}
				if count["Origin"] != wantOrigin {
					t.Errorf("%s %s: %d Origin parameters, want %d", method, path, count["Origin"], wantOrigin)
				}
				if count["X-Request-Id"] != 1 {
					t.Errorf("%s %s: %d X-Request-Id parameters", method, path, count["X-Request-Id"])
				}
				wantIdem := 0
				if method == "post" {
					wantIdem = 1
				}
				if count["Idempotency-Key"] != wantIdem {
					t.Errorf("%s %s: %d Idempotency-Key parameters, want %d", method, path, count["Idempotency-Key"], wantIdem)
				}
			})
		})
	}
}

func TestUnusedTagsDropped(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := document(t, in.raw)
			tags, _ := get(t, d, "tags").([]any)
			var names []string
			for _, tag := range tags {
				names = append(names, get(t, tag, "name").(string))
			}
			want := []string{"AccountsService", "ConnectService", "VerificationService"}
			if in.name != "generated" {
				want = want[:1]
			}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("tags = %v, want %v (no internal or admin service)", names, want)
			}
		})
	}
}

// TestIdempotent: the output, fed back in, comes out unchanged (nothing is applied twice).
func TestIdempotent(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			once, err := Document(in.raw)
			if err != nil {
				t.Fatal(err)
			}
			twice, err := Document(once)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(once, twice) {
				t.Error("Document(Document(x)) != Document(x)")
			}
		})
	}
}
