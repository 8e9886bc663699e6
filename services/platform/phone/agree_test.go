package phone

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// TestParseAsWrittenAgrees holds the fast path to the library's parser: over the example
// number of every type of every region and non-geographic code, and over random variations of
// each (a digit changed, added or dropped), whatever parseAsWritten accepts, parseLibrary
// must accept the same way. (What it declines goes to parseLibrary anyway.)
func TestParseAsWrittenAgrees(t *testing.T) {
	types := []phonenumbers.PhoneNumberType{
		phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE, phonenumbers.PREMIUM_RATE,
		phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER, phonenumbers.PAGER,
		phonenumbers.UAN, phonenumbers.VOICEMAIL,
	}
	var examples []string
	add := func(n *phonenumbers.PhoneNumber) {
		if n != nil {
			examples = append(examples, phonenumbers.Format(n, phonenumbers.E164))
		}
	}
	for region := range phonenumbers.GetSupportedRegions() {
		for _, typ := range types {
			add(phonenumbers.GetExampleNumberForType(region, typ))
		}
	}
	for cc := range phonenumbers.GetSupportedGlobalNetworkCallingCodes() {
		add(phonenumbers.GetExampleNumberForNonGeoEntity(cc))
	}
	slices.Sort(examples) // the regions come from a map: fix the order, so the variations are the same every run
	if len(examples) < 1000 {
		t.Fatalf("only %d example numbers", len(examples))
	}

	r := rand.New(rand.NewPCG(7, 11))
	inputs := append([]string(nil), examples...)
	for _, e := range examples {
		for range 20 {
			d := []byte(e[1:])
			switch i := r.IntN(len(d)); r.IntN(3) {
			case 0:
				d[i] = byte('0' + r.IntN(10))
			case 1:
				d = append(d[:i+1], d[i:]...)
				d[i] = byte('0' + r.IntN(10))
			default:
				d = append(d[:i], d[i+1:]...)
			}
			inputs = append(inputs, "+"+string(d))
		}
	}
	fast, checked := 0, 0
	for _, in := range inputs {
		if !IsE164Shape(in) {
			continue
		}
		checked++
		got, ok := parseAsWritten(in)
		if !ok {
			continue
		}
		fast++
		want, err := parseLibrary(in)
		if err != nil || got != want {
			t.Errorf("%s: as written %+v, library %+v (%v)", in, got, want, err)
		}
	}
	t.Logf("%d inputs, %d taken by the fast path", checked, fast)
	if fast < checked/10 {
		t.Fatalf("the fast path took only %d of %d inputs", fast, checked)
	}
}

func BenchmarkParse(b *testing.B) {
	numbers := make([]string, 1000)
	for i := range numbers {
		numbers[i] = "+97150" + strconv.Itoa(1000000+i)
	}
	b.Run("as written", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := Parse(numbers[i%len(numbers)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := parseLibrary(numbers[i%len(numbers)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
