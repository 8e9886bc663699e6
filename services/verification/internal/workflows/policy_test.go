package workflows_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

func ptr(v int) *int { return &v }

func str(v string) *string { return &v }

func TestPolicyValidate(t *testing.T) {
	cases := []struct {
		name      string
		json      string
		wantField string // "" = valid
	}{
		{"empty: all defaults", `{}`, ""},
		{"full", `{"channels":["SMS_OTP"],"silentTimeoutSeconds":30,"smsTimeoutSeconds":900,"codeLength":8,"codeTtlSeconds":120,"maxAttempts":3,"resendCooldownSeconds":60,"maxResends":1,"simSwap":{"mode":"BLOCK","maxAgeHours":72},"countries":{"GB":{"channels":["SILENT","SMS_OTP"],"codeLength":4}}}`, ""},
		{"code length 3", `{"codeLength":3}`, "codeLength"},
		{"code length 11", `{"codeLength":11}`, "codeLength"},
		{"code length 10", `{"codeLength":10}`, ""},
		{"no attempts", `{"maxAttempts":0}`, "maxAttempts"},
		{"too many attempts", `{"maxAttempts":11}`, "maxAttempts"},
		{"ttl too short", `{"codeTtlSeconds":59}`, "codeTtlSeconds"},
		{"ttl too long", `{"codeTtlSeconds":1801}`, "codeTtlSeconds"},
		{"negative cooldown", `{"resendCooldownSeconds":-1}`, "resendCooldownSeconds"},
		{"resends", `{"maxResends":6}`, "maxResends"},
		{"silent timeout", `{"silentTimeoutSeconds":4}`, "silentTimeoutSeconds"},
		{"sms timeout", `{"smsTimeoutSeconds":3601}`, "smsTimeoutSeconds"},
		{"no channel", `{"channels":[]}`, "channels"},
		{"unknown channel", `{"channels":["SILENT","VOICE"]}`, "channels[1]"},
		{"channel twice", `{"channels":["SMS_OTP","SMS_OTP"]}`, "channels[1]"},
		{"sim swap mode", `{"simSwap":{"mode":"MAYBE"}}`, "simSwap.mode"},
		{"sim swap age", `{"simSwap":{"maxAgeHours":0}}`, "simSwap.maxAgeHours"},
		{"device swap", `{"deviceSwap":{"mode":"FALLBACK","maxAgeHours":2400},"countries":{"GB":{"deviceSwap":{"mode":"BLOCK"}}}}`, ""},
		{"device swap mode", `{"deviceSwap":{"mode":"ON"}}`, "deviceSwap.mode"},
		{"device swap age 0", `{"deviceSwap":{"maxAgeHours":0}}`, "deviceSwap.maxAgeHours"},
		{"device swap age 2401", `{"deviceSwap":{"mode":"REPORT","maxAgeHours":2401}}`, "deviceSwap.maxAgeHours"},
		{"country's device swap", `{"countries":{"FR":{"deviceSwap":{"mode":"block"}}}}`, "countries.FR.deviceSwap.mode"},
		{"unknown country", `{"countries":{"XX":{"codeLength":6}}}`, "countries"},
		{"lower-case country", `{"countries":{"gb":{"codeLength":6}}}`, "countries"},
		{"country's value", `{"countries":{"GB":{"codeLength":12}}}`, "countries.GB.codeLength"},
		{"country's channels", `{"countries":{"AE":{"channels":["SILENT","SILENT"]}}}`, "countries.AE.channels[1]"},
		{"sms countries and cap", `{"smsCountries":["GB","FR"],"dailySmsCap":500}`, ""},
		{"sms countries empty", `{"smsCountries":[]}`, ""},
		{"sms country unknown", `{"smsCountries":["GB","XX"]}`, "smsCountries[1]"},
		{"sms country lower case", `{"smsCountries":["gb"]}`, "smsCountries[0]"},
		{"sms country twice", `{"smsCountries":["FR","GB","FR"]}`, "smsCountries[2]"},
		{"cap zero", `{"dailySmsCap":0}`, "dailySmsCap"},
		{"cap too high", `{"dailySmsCap":1000000001}`, "dailySmsCap"},
		{"allow-list is not a country's", `{"countries":{"GB":{"smsCountries":["GB"]}}}`, "parse"},
		{"app name", `{"appName":"Acme Shop"}`, ""},
		{"app name of 20, GSM letters", `{"appName":"Ñandù & Søn ¿Ça? 123"}`, ""},
		{"app name per country", `{"countries":{"DE":{"appName":"Acme DE"}}}`, ""},
		{"app name empty", `{"appName":""}`, "appName"},
		{"app name of 21", `{"appName":"ABCDEFGHIJKLMNOPQRSTU"}`, "appName"},
		{"app name with a line break", `{"appName":"Acme\nPay now"}`, "appName"},
		{"app name with an extension character", `{"appName":"Acme {Shop}"}`, "appName"},
		{"app name with the euro sign", `{"appName":"Acme €"}`, "appName"},
		{"app name outside GSM", `{"appName":"Acme ☎"}`, "appName"},
		{"app name with a trailing space", `{"appName":"Acme "}`, "appName"},
		{"country's app name", `{"countries":{"FR":{"appName":"Acme ~"}}}`, "countries.FR.appName"},
	}
	for _, tc := range cases {
		p, err := workflows.ParsePolicy([]byte(tc.json))
		if tc.wantField == "parse" {
			if err == nil {
				t.Errorf("%s: parsed", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = p.Validate()
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.wantField != "":
			f := fault.Find(err, fault.InvalidArgument)
			if f == nil || f.Field != tc.wantField {
				t.Errorf("%s: Validate = %v, want 400 on %s", tc.name, err, tc.wantField)
			}
		}
	}
}

func TestParsePolicyRefusesUnknownFields(t *testing.T) {
	for _, j := range []string{`{"codeLen":6}`, `{"countries":{"GB":{"countries":{}}}}`, `{"simSwap":{"maxAge":3}}`, `{"deviceSwap":{"maxAge":3}}`, `[]`, `{"codeLength":"6"}`} {
		if _, err := workflows.ParsePolicy([]byte(j)); fault.Find(err, fault.InvalidArgument) == nil {
			t.Errorf("ParsePolicy(%s) = %v, want 400", j, err)
		}
	}
}

func TestPolicyResolve(t *testing.T) {
	p := workflows.Policy{
		Settings: workflows.Settings{CodeLength: ptr(8), MaxAttempts: ptr(3), SIMSwap: &workflows.Swap{Mode: workflows.SwapReport},
			DeviceSwap: &workflows.Swap{Mode: workflows.SwapBlock}, AppName: str("Acme")},
		Countries: map[string]workflows.Settings{
			"GB": {Channels: []workflows.Channel{workflows.SMSOTP}, CodeLength: ptr(4), SIMSwap: &workflows.Swap{MaxAgeHours: ptr(24)},
				DeviceSwap: &workflows.Swap{MaxAgeHours: ptr(48)}, AppName: str("Acme UK")},
		},
	}
	gb := p.Resolve("GB")
	want := workflows.DefaultPolicy
	want.Channels = []workflows.Channel{workflows.SMSOTP}
	want.CodeLength, want.MaxAttempts = 4, 3 // the country's, then the default part's
	want.SIMSwapMode, want.SIMSwapMaxAge = workflows.SwapReport, 24*time.Hour
	want.DeviceSwapMode, want.DeviceSwapMaxAge = workflows.SwapBlock, 48*time.Hour
	want.AppName = "Acme UK"
	if !reflect.DeepEqual(gb, want) {
		t.Errorf("GB resolved to %+v, want %+v", gb, want)
	}
	ae := p.Resolve("AE")
	if ae.CodeLength != 8 || ae.MaxAttempts != 3 || !reflect.DeepEqual(ae.Channels, workflows.DefaultPolicy.Channels) || ae.SIMSwapMaxAge != 240*time.Hour || ae.AppName != "Acme" ||
		ae.DeviceSwapMode != workflows.SwapBlock || ae.DeviceSwapMaxAge != 240*time.Hour {
		t.Errorf("AE resolved to %+v", ae)
	}
	if got := (workflows.Policy{}).Resolve(""); !reflect.DeepEqual(got, workflows.DefaultPolicy) {
		t.Errorf("no policy resolved to %+v", got)
	}
	// Resolving never shares the default's slice: changing one resolved policy changes no other.
	got := (workflows.Policy{}).Resolve("GB")
	got.Channels[0] = "X"
	if workflows.DefaultPolicy.Channels[0] != workflows.Silent {
		t.Fatal("Resolve handed out DefaultPolicy's channels")
	}
	if r := gb.Code(); r.Length != 4 || r.MaxAttempts != 3 || r.TTL != 5*time.Minute || r.MaxResends != 3 {
		t.Errorf("code rules %+v", r)
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	in := `{"channels":["SMS_OTP"],"codeLength":7,"simSwap":{"mode":"FALLBACK"},"countries":{"GB":{"maxAttempts":2}}}`
	p, err := workflows.ParsePolicy([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("round trip:\n%s\n%s", in, out)
	}
}
