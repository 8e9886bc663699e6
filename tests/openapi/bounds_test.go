package openapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestSchemaValuesAreTheServersBounds sends, for every operation whose request declares
// constraints, requests made from the document alone: each constrained property at each of its
// bounds (minimum, maximum, shortest, longest, every allowed value, the example) must be
// accepted — no 400 the schema did not predict, no 5xx — and one past each bound must be
// refused with 400, which the document must predict too (kin-openapi refuses the request).
// Every answer must be one the operation documents. So the document's constraints and the
// services' checks cannot drift apart in either direction.
func TestSchemaValuesAreTheServersBounds(t *testing.T) {
	v := newValidator(t)
	_, raw := get(t, "/v1/api/openapi.json")
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, "VERIFY,CONNECT,STUCK_PLUS,SANDBOX")
	key := keyOf(c)
	// Each rotation gets a client of its own: it replaces the key it calls with.
	rotations := map[string]harness.Client{}
	for _, id := range []string{"RotateApiKey", "RotateOwnApiKey", "RotateClientApiKey"} {
		rotations[id] = newClient(t, "VERIFY")
	}

	// Resources the paths name, made with the schema's own examples.
	var env struct {
		Data map[string]any `json:"data"`
	}
	create := func(path, body string) string {
		t.Helper()
		_, resp, out := v.send(t, "POST", path, key, body, "application/json")
		if resp.StatusCode != 200 || json.Unmarshal(out, &env) != nil {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
		}
		return fmt.Sprint(env.Data["id"])
	}
	unknown := "9b2f0c52-7b8e-4a57-9d3c-2f1a9b7c6d5e"
	pathValues := map[string]string{
		"profileId":     create("/v1/api/me/connect/profiles", `{"mobileNumber":"+971501234571"}`),
		"integrationId": create("/v1/api/me/connect/integrations", `{"displayName":"CRM","integrationType":"WEBHOOK","endpointUrl":"https://crm.example/hook","httpMethod":"POST","triggerEvent":"MANUAL","fieldMappings":{"mobileNumber":"phone"}}`),
		"webhookId":     create("/v1/api/me/webhooks", `{"url":"https://hooks.example/bounds"}`),
		"sessionId":     unknown, "verificationId": unknown, "transactionId": unknown, "jobId": unknown,
		"keyId": unknown, "tokenId": unknown, "deliveryId": unknown,
	}
	_, resp, out := v.send(t, "POST", "/v1/api/workflows", key, `{"mobileNumber":"+971501234573"}`, "application/json")
	if resp.StatusCode != 200 || json.Unmarshal(out, &env) != nil {
		t.Fatalf("POST /v1/api/workflows: %d %s", resp.StatusCode, out)
	}
	pathValues["workflowId"] = fmt.Sprint(env.Data["workflowId"])
	_, _, out = v.send(t, "POST", "/v1/api/me/sdk-tokens", key, `{"label":"bounds"}`, "application/json")
	if json.Unmarshal(out, &env) != nil {
		t.Fatalf("sdk token: %s", out)
	}
	sdk := map[string]string{"X-Sdk-Token": fmt.Sprint(env.Data["sdkToken"]), "X-Client-Id": c.ID, sandboxHeader: "+971501234572"}

	// Operations whose requests the schema cannot make valid on its own: their bodies name
	// state (a sealed number, a one-time code, a pending authorization), the browser's routes
	// take an origin and capture once, and the upload is a file.
	skip := map[string]string{
		"Verify": "a sealed session", "CompleteWebTransaction": "a one-time code", "CompleteSessionAuthorization": "a pending authorization",
		"CaptureTransaction": "captures once, from an origin", "UploadImport": "a CSV file", "GenerateFirstApiKey": "a client without keys",
		"FinishSsoSignIn":      "a provider's redirect back, answered with a redirect (tests/browser follows one)",
		"SubmitWorkflowSilent": "a sealed session",
		"CheckWebWorkflowCode": "from an origin, a transaction with a workflow",
	}
	components := doc["components"].(map[string]any)["schemas"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if r, ok := s["$ref"].(string); ok {
			return components[strings.TrimPrefix(r, "#/components/schemas/")].(map[string]any)
		}
		return s
	}

	probes, accepted, refused := 0, 0, 0
	for _, path := range sortedKeysOf(doc["paths"].(map[string]any)) {
		item := doc["paths"].(map[string]any)[path].(map[string]any)
		for _, method := range sortedKeysOf(item) {
			op := item[method].(map[string]any)
			id := op["operationId"].(string)
			if skip[id] != "" || sessionOnly(op) {
				// A session needs a passkey: tests/browser signs a person in and walks those.
				continue
			}
			headers := key
			rot, rotation := rotations[id]
			switch {
			case id == "CreateSdkSession":
				headers = sdk
			case rotation:
				headers = keyOf(rot)
			}
			target := strings.ReplaceAll(path, "{clientId}", rot.ID)
			for name, val := range pathValues {
				target = strings.ReplaceAll(target, "{"+name+"}", val)
			}
			if strings.Contains(target, "{") {
				t.Errorf("%s: no value for a parameter of %s", id, path)
				continue
			}

			// The body: the required properties at a valid value, then each property at its
			// bounds; the query: each parameter at its bounds.
			var body map[string]any
			var bodyProps map[string]any
			if rb, ok := op["requestBody"].(map[string]any); ok {
				content := rb["content"].(map[string]any)["application/json"]
				if content == nil {
					continue
				}
				schema := resolve(content.(map[string]any)["schema"].(map[string]any))
				bodyProps, _ = schema["properties"].(map[string]any)
				body = map[string]any{}
				req, _ := schema["required"].([]any)
				for _, name := range req {
					p := resolve(bodyProps[name.(string)].(map[string]any))
					val, ok := validValue(p, resolve)
					if !ok {
						t.Fatalf("%s: no valid value for the required %s", id, name)
					}
					body[name.(string)] = val
				}
				if rotation {
					body["secretKey"] = rot.Secret
				}
			}
			type variant struct {
				field string
				label string
				query url.Values
				body  map[string]any
				valid bool
			}
			var variants []variant
			for _, name := range sortedKeysOf(bodyProps) {
				for _, b := range bounds(resolve(bodyProps[name].(map[string]any)), resolve) {
					next := map[string]any{}
					for k, val := range body {
						next[k] = val
					}
					next[name] = b.value
					variants = append(variants, variant{name, fmt.Sprintf("%s=%s", name, b.label), nil, next, b.valid})
				}
			}
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p := p.(map[string]any)
				if p["in"] != "query" {
					continue
				}
				for _, b := range bounds(p["schema"].(map[string]any), resolve) {
					if _, list := b.value.([]any); list {
						continue
					}
					variants = append(variants, variant{p["name"].(string), fmt.Sprintf("%s=%s", p["name"], b.label),
						url.Values{p["name"].(string): {fmt.Sprint(b.value)}}, body, b.valid})
				}
			}
			// The refusals first, then the bounds from the last: a rotation at the shortest
			// grace (0) ends the key the rest would call with; at the longest it lives on.
			slices.SortStableFunc(variants, func(a, b variant) int {
				switch {
				case a.valid == b.valid:
					return 0
				case !a.valid:
					return -1
				}
				return 1
			})
			if n := slices.IndexFunc(variants, func(v variant) bool { return v.valid }); n >= 0 {
				slices.Reverse(variants[n:])
			}
			for _, vr := range variants {
				probes++
				u := target
				if vr.query != nil {
					u += "?" + vr.query.Encode()
				}
				payload, ctype := "", ""
				if vr.body != nil {
					b, _ := json.Marshal(vr.body)
					payload, ctype = string(b), "application/json"
				}
				req, resp, answer := v.send(t, strings.ToUpper(method), u, headers, payload, ctype)
				name := fmt.Sprintf("%s %s [%s]", id, vr.label, payload)
				if err := v.check(req, resp, answer); err != nil {
					t.Errorf("%s: the answer %d is not the document's: %v", name, resp.StatusCode, err)
				}
				predicted := v.checkRequest(req, payload)
				switch {
				case resp.StatusCode >= 500:
					t.Errorf("%s: %d %s", name, resp.StatusCode, answer)
				case vr.valid && predicted != nil:
					t.Errorf("%s: the document refuses a value made from it: %v", name, predicted)
				case vr.valid && resp.StatusCode == http.StatusBadRequest:
					t.Errorf("%s: schema-valid, refused: %s", name, answer)
				case !vr.valid && predicted == nil:
					t.Errorf("%s: one past a bound, the document does not refuse it", name)
				case !vr.valid && credentialFields[vr.field] && resp.StatusCode == http.StatusUnauthorized:
					refused++ // a credential in the body is refused as a credential
				case !vr.valid && resp.StatusCode != http.StatusBadRequest:
					t.Errorf("%s: one past a bound, answered %d %s", name, resp.StatusCode, answer)
				case vr.valid:
					accepted++
				default:
					refused++
				}
			}
		}
	}
	t.Logf("%d requests: %d at a bound accepted, %d past one refused", probes, accepted, refused)
	if accepted < 100 || refused < 40 {
		t.Errorf("too few probes: %d accepted, %d refused", accepted, refused)
	}
}

// credentialFields are body fields that are credentials: a malformed one is 401, like a
// malformed credential header, never a 400 that would tell it apart from a wrong one.
var credentialFields = map[string]bool{"secretKey": true}

type bound struct {
	label string
	value any
	valid bool
}

// bounds are the values of a schema's constraints: each bound and one past it.
func bounds(s map[string]any, resolve func(map[string]any) map[string]any) []bound {
	s = resolve(s)
	if anyOf, ok := s["anyOf"].([]any); ok {
		// An enum field: every name it accepts, with and without its type's prefix.
		var out []bound
		for _, branch := range anyOf {
			for _, e := range enumOf(resolve(branch.(map[string]any))) {
				out = append(out, bound{fmt.Sprint(e), e, true})
			}
		}
		return append(out, bound{"unknown", "NOT_A_VALUE", false})
	}
	var out []bound
	switch typeOf(s) {
	case "integer":
		if m, ok := s["minimum"].(float64); ok {
			out = append(out, bound{"minimum", int64(m), true}, bound{"minimum-1", int64(m) - 1, false})
		}
		if m, ok := s["maximum"].(float64); ok {
			out = append(out, bound{"maximum", int64(m), true}, bound{"maximum+1", int64(m) + 1, false})
		}
	case "string":
		if e := enumOf(s); len(e) > 0 {
			for _, val := range e {
				out = append(out, bound{fmt.Sprint(val), val, true})
			}
			return append(out, bound{"unknown", "NOT_A_VALUE", false})
		}
		for _, ex := range examplesOf(s) {
			out = append(out, bound{"example", ex, true})
		}
		if s["format"] != nil {
			return out // a URI or an address: the length alone makes no valid one
		}
		pattern, _ := s["pattern"].(string)
		fits := func(v string) bool { return pattern == "" || regexp.MustCompile(pattern).MatchString(v) }
		if m, ok := s["minLength"].(float64); ok && m > 0 {
			if v := strings.Repeat("a", int(m)); fits(v) {
				out = append(out, bound{"minLength", v, true})
			}
			out = append(out, bound{"minLength-1", strings.Repeat("a", int(m)-1), false})
		}
		if m, ok := s["maxLength"].(float64); ok {
			if v := strings.Repeat("a", int(m)); fits(v) {
				out = append(out, bound{"maxLength", v, true}, bound{"maxLength+1", v + "a", false})
			}
		}
	case "object":
		// A map: a key at each bound, a value at each bound, the most entries.
		names, _ := s["propertyNames"].(map[string]any)
		if names == nil {
			names = map[string]any{}
		}
		values, _ := s["additionalProperties"].(map[string]any)
		val, ok := validValue(values, resolve)
		if !ok {
			return nil
		}
		key, ok := validValue(names, resolve)
		if !ok {
			key = "k"
		}
		for _, b := range bounds(names, resolve) {
			out = append(out, bound{"key " + b.label, map[string]any{fmt.Sprint(b.value): val}, b.valid})
		}
		for _, b := range bounds(values, resolve) {
			out = append(out, bound{"value " + b.label, map[string]any{fmt.Sprint(key): b.value}, b.valid})
		}
		pattern, _ := names["pattern"].(string)
		if m, ok := s["maxProperties"].(float64); ok && (pattern == "" || regexp.MustCompile(pattern).MatchString("k1")) {
			most := map[string]any{}
			for i := range int(m) {
				most[fmt.Sprintf("k%d", i+1)] = val
			}
			out = append(out, bound{"maxProperties", most, true})
			more := map[string]any{"k0": val}
			for k, v := range most {
				more[k] = v
			}
			out = append(out, bound{"maxProperties+1", more, false})
		}
	case "array":
		// Each allowed item alone.
		for _, b := range bounds(s["items"].(map[string]any), resolve) {
			if b.valid {
				out = append(out, bound{"[" + b.label + "]", []any{b.value}, true})
			}
		}
	}
	return out
}

// validValue is a value the schema accepts, made from it alone.
func validValue(s map[string]any, resolve func(map[string]any) map[string]any) (any, bool) {
	s = resolve(s)
	if anyOf, ok := s["anyOf"].([]any); ok {
		if e := enumOf(resolve(anyOf[0].(map[string]any))); len(e) > 0 {
			return e[0], true
		}
		return nil, false
	}
	switch typeOf(s) {
	case "string":
		if e := enumOf(s); len(e) > 0 {
			return e[0], true
		}
		if ex := examplesOf(s); len(ex) > 0 {
			return ex[0], true
		}
		n := 1
		if m, ok := s["minLength"].(float64); ok {
			n = int(m)
		}
		return strings.Repeat("a", n), true
	case "integer":
		if m, ok := s["minimum"].(float64); ok {
			return int64(m), true
		}
		return 1, true
	case "object":
		if props, ok := s["properties"].(map[string]any); ok {
			// A message: its required properties, each at a valid value.
			out := map[string]any{}
			req, _ := s["required"].([]any)
			for _, name := range req {
				p, _ := props[name.(string)].(map[string]any)
				val, ok := validValue(p, resolve)
				if !ok {
					return nil, false
				}
				out[name.(string)] = val
			}
			return out, true
		}
		names, _ := s["propertyNames"].(map[string]any)
		k := "k"
		if names != nil {
			ex := examplesOf(names)
			if len(ex) == 0 {
				return nil, false
			}
			k = fmt.Sprint(ex[0])
		}
		val, ok := validValue(s["additionalProperties"].(map[string]any), resolve)
		return map[string]any{k: val}, ok
	}
	return nil, false
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		return fmt.Sprint(t[0])
	}
	return ""
}

func enumOf(s map[string]any) []any {
	e, _ := s["enum"].([]any)
	return slices.DeleteFunc(slices.Clone(e), func(v any) bool { return v == nil })
}

func examplesOf(s map[string]any) []any {
	e, _ := s["examples"].([]any)
	return e
}

func sortedKeysOf(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sessionOnly reports whether op takes a person's console session and no API key.
func sessionOnly(op map[string]any) bool {
	sec, _ := op["security"].([]any)
	if len(sec) == 0 {
		return false
	}
	for _, req := range sec {
		if _, ok := req.(map[string]any)["ConsoleSession"]; !ok {
			return false
		}
	}
	return true
}
