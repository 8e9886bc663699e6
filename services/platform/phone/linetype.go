package phone

import "github.com/nyaruka/phonenumbers"

// LineType is the kind of line a number belongs to, by the numbering plan's metadata (the
// ranges each country assigns to mobile, fixed, premium-rate… lines).
type LineType string

// The line types. FixedOrMobile is the metadata's answer where a country's plan does not tell
// the two apart (the North American plan among others); Unknown is a valid number of a range
// the metadata does not classify.
const (
	LineMobile        LineType = "MOBILE"
	LineFixedOrMobile LineType = "FIXED_LINE_OR_MOBILE"
	LineFixed         LineType = "FIXED_LINE"
	LinePremiumRate   LineType = "PREMIUM_RATE"
	LineTollFree      LineType = "TOLL_FREE"
	LineSharedCost    LineType = "SHARED_COST"
	LineVoIP          LineType = "VOIP"
	LinePersonal      LineType = "PERSONAL_NUMBER"
	LinePager         LineType = "PAGER"
	LineUAN           LineType = "UAN"
	LineVoicemail     LineType = "VOICEMAIL"
	LineUnknown       LineType = "UNKNOWN"
)

var lineTypes = map[phonenumbers.PhoneNumberType]LineType{
	phonenumbers.MOBILE:               LineMobile,
	phonenumbers.FIXED_LINE_OR_MOBILE: LineFixedOrMobile,
	phonenumbers.FIXED_LINE:           LineFixed,
	phonenumbers.PREMIUM_RATE:         LinePremiumRate,
	phonenumbers.TOLL_FREE:            LineTollFree,
	phonenumbers.SHARED_COST:          LineSharedCost,
	phonenumbers.VOIP:                 LineVoIP,
	phonenumbers.PERSONAL_NUMBER:      LinePersonal,
	phonenumbers.PAGER:                LinePager,
	phonenumbers.UAN:                  LineUAN,
	phonenumbers.VOICEMAIL:            LineVoicemail,
}

// LineType returns the number's line type from the library's parsing metadata (no carrier
// lookup: the line type needs only the ranges, which Parse already loaded).
func (n Number) LineType() LineType {
	p, err := phonenumbers.Parse(n.E164, "")
	if err != nil {
		return LineUnknown
	}
	if t, ok := lineTypes[phonenumbers.GetNumberType(p)]; ok {
		return t
	}
	return LineUnknown
}
