// Package render turns profiles into the records an integration delivers, through its field
// mappings. A record carries only the fields mapped; the full number only when mobileNumber is.
package render

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
)

const attributePrefix = "attributes."

// fields are the profile fields a mapping may name, besides attributes.<name>.
var fields = []string{
	"id", "externalId", "firstName", "lastName", "email", "mobileNumber", "mobileNumberMasked", "countryCode",
	"matched", "matchedAt", "source", "createdAt", "updatedAt",
	"enrichment.carrier", "enrichment.lineType", "enrichment.region", "enrichment.valid", "enrichment.lastVerifiedAt",
}

// Fields lists the mappable fields (attributes.<name> too).
func Fields() []string { return append(slices.Clone(fields), attributePrefix+"<name>") }

// KnownField reports whether a mapping may name field.
func KnownField(f string) bool {
	if name, ok := strings.CutPrefix(f, attributePrefix); ok {
		return name != ""
	}
	return slices.Contains(fields, f)
}

// Records renders profiles as a JSON array of mapped records. number returns a profile's full
// number; it is called only when the mapping has mobileNumber.
func Records(profiles []domain.Profile, mappings map[string]string, number func(domain.Profile) (string, error)) ([]byte, error) {
	out := make([]map[string]any, 0, len(profiles))
	for _, p := range profiles {
		rec := make(map[string]any, len(mappings))
		for src, dst := range mappings {
			v, err := value(p, src, number)
			if err != nil {
				return nil, err
			}
			rec[dst] = v
		}
		out = append(out, rec)
	}
	return json.Marshal(out)
}

func value(p domain.Profile, field string, number func(domain.Profile) (string, error)) (any, error) {
	if name, ok := strings.CutPrefix(field, attributePrefix); ok {
		if v, ok := p.Attributes[name]; ok {
			return v, nil
		}
		return nil, nil
	}
	e := p.Enrichment
	switch field {
	case "id":
		return p.ID, nil
	case "externalId":
		return p.ExternalID, nil
	case "firstName":
		return p.FirstName, nil
	case "lastName":
		return p.LastName, nil
	case "email":
		return p.Email, nil
	case "mobileNumber":
		return number(p)
	case "mobileNumberMasked":
		return p.NumberMasked, nil
	case "countryCode":
		return p.CountryCode, nil
	case "matched":
		return p.MatchedAt != nil, nil
	case "matchedAt":
		return stamp(p.MatchedAt), nil
	case "source":
		return p.Source, nil
	case "createdAt":
		return stamp(&p.CreatedAt), nil
	case "updatedAt":
		return stamp(&p.UpdatedAt), nil
	case "enrichment.carrier":
		if e != nil {
			return e.Carrier, nil
		}
	case "enrichment.lineType":
		if e != nil {
			return e.LineType, nil
		}
	case "enrichment.region":
		if e != nil {
			return e.Region, nil
		}
	case "enrichment.valid":
		if e != nil {
			return e.Valid, nil
		}
	case "enrichment.lastVerifiedAt":
		if e != nil {
			return stamp(e.LastVerifiedAt), nil
		}
	}
	return nil, nil
}

// stamp writes times as the API does: UTC, exactly milliseconds.
func stamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}
