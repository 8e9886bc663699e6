package jsonpb_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mnvhq/mnv/gateway/internal/jsonpb"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/apijson"
)

func TestEncode(t *testing.T) {
	days := int32(29)
	desc := "a <note> & \"quote\"\n"
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{
			name: "client with nulls",
			msg: &accountsv1.Client{
				Id: "c1", ClientStatus: accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE, Balance: 9007199254740993,
			},
			want: `{"id":"c1","clientName":"","contactPersonName":"","contactPersonEmail":"","contactPhoneNumber":"","clientStatus":"ACTIVE","balance":9007199254740993,"balanceExpiryDate":null,"balanceValid":false,"daysUntilBalanceExpiry":null,"enabledFeatures":[]}`,
		},
		{
			name: "client with expiry and features",
			msg: &accountsv1.Client{
				ClientStatus:           accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED,
				BalanceExpiryDate:      timestamppb.New(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)),
				DaysUntilBalanceExpiry: &days,
				EnabledFeatures:        []accountsv1.Feature{accountsv1.Feature_FEATURE_STUCK_PLUS, accountsv1.Feature_FEATURE_SANDBOX},
			},
			want: `{"id":"","clientName":"","contactPersonName":"","contactPersonEmail":"","contactPhoneNumber":"","clientStatus":"SUSPENDED","balance":0,"balanceExpiryDate":"2026-12-31T23:59:59.000Z","balanceValid":false,"daysUntilBalanceExpiry":29,"enabledFeatures":["STUCK_PLUS","SANDBOX"]}`,
		},
		{
			name: "milliseconds are truncated to exactly three digits",
			msg: &accountsv1.SdkToken{
				CreatedAt: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 678912345, time.UTC)),
			},
			want: `{"id":"","label":"","hint":"","createdAt":"2026-01-02T03:04:05.678Z","expiresAt":null}`,
		},
		{
			name: "negative amounts, optional strings and escaping",
			msg: &accountsv1.LedgerEntry{
				Kind: accountsv1.LedgerKind_LEDGER_KIND_STUCK_PLUS_REVEAL, Amount: -5, BalanceAfter: 0, Description: &desc,
			},
			want: `{"id":"","kind":"STUCK_PLUS_REVEAL","amount":-5,"balanceAfter":0,"reference":"","description":"a <note> & \"quote\"\n","createdAt":null}`,
		},
		{
			name: "unspecified enum is null",
			msg:  &accountsv1.ApiKey{},
			want: `{"id":"","name":"","role":null,"hint":"","createdAt":null,"lastUsedAt":null,"expiresAt":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(apijson.AppendMessage(nil, tt.msg.ProtoReflect()))
			if got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatal("not valid JSON")
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		msg     proto.Message
		want    proto.Message
		wantErr string
	}{
		{name: "short enum", body: `{"name":"ci","role":"MEMBER"}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "ci", Role: accountsv1.Role_ROLE_MEMBER}},
		{name: "full enum", body: `{"name":"ci","role":"ROLE_ADMIN"}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "ci", Role: accountsv1.Role_ROLE_ADMIN}},
		{name: "int64 as number", body: `{"label":"x","ttlSeconds":3600}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(3600)}},
		{name: "optional int32", body: `{"secretKey":"s","oldKeyGraceSeconds":60}`, msg: &accountsv1.RotateApiKeyRequest{},
			want: &accountsv1.RotateApiKeyRequest{SecretKey: "s", OldKeyGraceSeconds: proto.Int32(60)}},
		{name: "unknown field", body: `{"secretKey":"s","clientId":"x"}`, msg: &accountsv1.RotateApiKeyRequest{}, wantErr: `unknown field "clientId"`},
		{name: "unknown field with enums", body: `{"name":"x","role":"ADMIN","extra":1}`, msg: &accountsv1.CreateApiKeyRequest{}, wantErr: `unknown field "extra"`},
		{name: "unknown enum value", body: `{"role":"OWNER"}`, msg: &accountsv1.CreateApiKeyRequest{}, wantErr: "expected one of ADMIN, MEMBER"},
		{name: "wrong type", body: `{"secretKey":5}`, msg: &accountsv1.RotateApiKeyRequest{}, wantErr: `field "secretKey": expected a string`},
		{name: "malformed", body: `{"secretKey":`, msg: &accountsv1.RotateApiKeyRequest{}, wantErr: "unexpected"},
		{name: "malformed with enums", body: `{"role":`, msg: &accountsv1.CreateApiKeyRequest{}, wantErr: "unexpected EOF"},
		{name: "two values", body: `{"role":"ADMIN"} {}`, msg: &accountsv1.CreateApiKeyRequest{}, wantErr: "unexpected token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonpb.Unmarshal([]byte(tt.body), tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tt.msg, tt.want) {
				t.Fatalf("got %v, want %v", tt.msg, tt.want)
			}
		})
	}
}

// TestDuplicateKeys: a body that names a key twice, at any depth and however the key is
// spelled in JSON, is refused with the key's path, whether the message has enums (rewritten
// before protojson) or not.
func TestDuplicateKeys(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		msg     proto.Message
		wantErr string // "" to accept
	}{
		{"role twice", `{"name":"ci","role":"MEMBER","role":"ADMIN"}`, &accountsv1.CreateApiKeyRequest{}, `duplicate field "role"`},
		{"same value twice", `{"name":"ci","name":"ci","role":"MEMBER"}`, &accountsv1.CreateApiKeyRequest{}, `duplicate field "name"`},
		{"escaped spelling of the same key", `{"role":"MEMBER","r\u006fle":"ADMIN"}`, &accountsv1.CreateApiKeyRequest{}, `duplicate field "role"`},
		{"message without enums", `{"secretKey":"a","secretKey":"b"}`, &accountsv1.RotateApiKeyRequest{}, `duplicate field "secretKey"`},
		{"key of a map", `{"displayName":"x","fieldMappings":{"email":"mail","email":"e"}}`, &connectv1.CreateIntegrationRequest{}, `duplicate field "fieldMappings.email"`},
		{"attribute of a profile", `{"mobileNumber":"+971501234567","attributes":{"tier":"gold","tier":"free"}}`, &connectv1.CreateProfileRequest{}, `duplicate field "attributes.tier"`},
		{"inside an array", `{"name":"x","items":[{"a":1},{"b":1,"b":2}]}`, &accountsv1.CreateApiKeyRequest{}, `duplicate field "items[1].b"`},
		{"JSON and proto names of one field", `{"secretKey":"a","secret_key":"b"}`, &accountsv1.RotateApiKeyRequest{}, `duplicate field "secret_key"`},
		{"a key again in a nested object is no duplicate", `{"displayName":"x","fieldMappings":{"displayName":"name"}}`, &connectv1.CreateIntegrationRequest{}, ""},
		{"the same key in sibling objects is no duplicate", `{"name":"x","items":[{"a":1},{"a":2}]}`, &accountsv1.CreateApiKeyRequest{}, `unknown field "items"`},
		{"malformed JSON is still reported as such", `{"name":"x","role":`, &accountsv1.CreateApiKeyRequest{}, "unexpected EOF"},
		{"nesting too deep to follow", `{"unknown":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, &accountsv1.CreateApiKeyRequest{}, "malformed JSON"},
		{"long key is not echoed whole", `{"displayName":"x","fieldMappings":{"` + strings.Repeat("k", 5000) + `":"a","` + strings.Repeat("k", 5000) + `":"b"}}`, &connectv1.CreateIntegrationRequest{}, `duplicate field "fieldMappings.` + strings.Repeat("k", 64) + `…"`},
		{"many keys, the last a duplicate", `{` + strings.Repeat(`"name":"x",`, 1) + manyKeys(5000) + `"name":"y"}`, &accountsv1.CreateApiKeyRequest{}, `duplicate field "name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonpb.Unmarshal([]byte(tt.body), tt.msg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want it to contain %q (decoded %v)", err, tt.wantErr, tt.msg)
			}
		})
	}
}

// manyKeys is n distinct members of an object, each followed by a comma.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	return b.String()
}

// TestEnumPrefixes checks EnumPrefix against every enum of every generated file: each value
// must start with it, or the encoder would write the full names.
func TestEnumPrefixes(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "mnv.") {
			return true
		}
		for i := 0; i < fd.Enums().Len(); i++ {
			ed := fd.Enums().Get(i)
			prefix := apijson.EnumPrefix(ed)
			for j := 0; j < ed.Values().Len(); j++ {
				n++
				if name := string(ed.Values().Get(j).Name()); !strings.HasPrefix(name, prefix) {
					t.Errorf("%s: value %s lacks prefix %q", ed.FullName(), name, prefix)
				}
			}
		}
		return true
	})
	if n == 0 {
		t.Fatal("no enums found: is the generated code linked in?")
	}
}

// FuzzUnmarshalVerify is FuzzUnmarshal for the body of POST /v1/api/verify.
func FuzzUnmarshalVerify(f *testing.F) {
	for _, seed := range []string{
		`{"mobileNumber":"+971501234567","encryptedMobileNumber":"AQJ2","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`,
		`{"mobileNumber":1}`, `{"serviceType":null}`, `{"mobile_number":"+1"}`, `{"operatorId":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req verificationv1.VerifyRequest
		if err := jsonpb.Unmarshal(body, &req); err != nil {
			return
		}
		out := apijson.AppendMessage(nil, req.ProtoReflect())
		var again verificationv1.VerifyRequest
		if err := jsonpb.Unmarshal(out, &again); err != nil || !proto.Equal(&req, &again) {
			t.Fatalf("round trip of %s: %v", out, err)
		}
	})
}

// FuzzUnmarshal feeds arbitrary bodies to the request decoder: it must never panic, and what it
// accepts must survive a round trip through the encoder.
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"name":"ci","role":"MEMBER"}`, `{"role":"ROLE_ADMIN"}`, `{"name":"\u0000"}`, `{}`, `[]`, `null`,
		`{"name":"x","role":1}`, `{"role":{"a":1}}`, `{"name":"` + strings.Repeat("a", 300) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req accountsv1.CreateApiKeyRequest
		if err := jsonpb.Unmarshal(body, &req); err != nil {
			return
		}
		out := apijson.AppendMessage(nil, req.ProtoReflect())
		if !json.Valid(out) {
			t.Fatalf("encoder wrote invalid JSON %q", out)
		}
		var again accountsv1.CreateApiKeyRequest
		if err := jsonpb.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if !proto.Equal(&req, &again) {
			t.Fatalf("round trip changed %v into %v", &req, &again)
		}
	})
}

// TestDecodeBodyField: a route whose body is one field of the request (the integration PATCH,
// `body: patch`) decodes into that field, which grpc-gateway passes by address: a **T.
func TestDecodeBodyField(t *testing.T) {
	m := &jsonpb.Marshaler{}
	var req connectv1.UpdateIntegrationRequest
	if err := m.NewDecoder(strings.NewReader(`{"endpointUrl":"https://crm.example.com/hook","batchSize":5}`)).Decode(&req.Patch); err != nil {
		t.Fatal(err)
	}
	want := &connectv1.IntegrationPatch{EndpointUrl: proto.String("https://crm.example.com/hook"), BatchSize: proto.Int32(5)}
	if !proto.Equal(req.Patch, want) {
		t.Fatalf("patch %v, want %v", req.Patch, want)
	}
	if err := m.NewDecoder(strings.NewReader(`{"endpointUrl":"x","extra":1}`)).Decode(&req.Patch); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown field in a body field: %v", err)
	}
	var s string
	if err := m.Unmarshal([]byte(`"x"`), &s); err == nil {
		t.Fatal("decoded into a string")
	}
}

// BenchmarkUnmarshal decodes request bodies: the hottest route's, and one with an enum to
// rewrite.
func BenchmarkUnmarshal(b *testing.B) {
	for _, bm := range []struct {
		name string
		body string
		msg  func() proto.Message
	}{
		{"verify", `{"mobileNumber":"+971501234567","encryptedMobileNumber":"AQJ2c2FuZGJveA","operatorId":"sandbox"}`, func() proto.Message { return &verificationv1.VerifyRequest{} }},
		{"api key", `{"name":"ci","role":"MEMBER"}`, func() proto.Message { return &accountsv1.CreateApiKeyRequest{} }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := jsonpb.Unmarshal([]byte(bm.body), bm.msg()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
