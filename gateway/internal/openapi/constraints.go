package openapi

import (
	"fmt"
	"regexp"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
)

// Patterns of free text (platform/freetext): never blank, and which control characters
// (unicode.IsControl: U+0000-U+001F, U+007F-U+009F) pass. Written in the subset of regular
// expressions that ECMA-262 (the document's dialect) and RE2 read alike.
var textPatterns = map[optionsv1.Text]string{
	optionsv1.Text_TEXT_LINE:  `^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$`,
	optionsv1.Text_TEXT_LINES: `^[^\x00-\x09\x0b-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x09\x0b-\x1f\x7f-\x9f]*$`,
	optionsv1.Text_TEXT_ANY:   `[^\s]`,
}

// fieldRule is the constraints fd declares (mnv.options.v1.field), nil when none.
func fieldRule(fd protoreflect.FieldDescriptor) *optionsv1.Field {
	opts := fd.Options()
	if opts == nil || !proto.HasExtension(opts, optionsv1.E_Field) {
		return nil
	}
	r, _ := proto.GetExtension(opts, optionsv1.E_Field).(*optionsv1.Field)
	return r
}

// required reports whether a request must carry fd.
func required(fd protoreflect.FieldDescriptor) bool { return fieldRule(fd).GetRequired() }

// checkFieldRule refuses a declaration the document could not say, or would say wrong.
func checkFieldRule(fd protoreflect.FieldDescriptor, r *optionsv1.Field) error {
	if r == nil {
		return nil
	}
	name := string(fd.FullName())
	number := false
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		number = true
	}
	str := fd.Kind() == protoreflect.StringKind
	switch {
	case (r.Minimum != nil || r.Maximum != nil) && !number:
		return fmt.Errorf("%s: minimum and maximum bound integers", name)
	case (r.MinLength != nil || r.MaxLength != nil) && !str && !fd.IsList() && !fd.IsMap():
		return fmt.Errorf("%s: lengths bound strings, lists and maps", name)
	case (r.GetPattern() != "" || len(r.GetValues()) > 0 || r.GetFormat() != "" || r.GetText() != optionsv1.Text_TEXT_UNSPECIFIED) && !str:
		return fmt.Errorf("%s: pattern, values, format and text are for strings (a map's keys and entries have their own)", name)
	case r.GetPattern() != "" && r.GetText() != optionsv1.Text_TEXT_UNSPECIFIED:
		return fmt.Errorf("%s: a pattern or a text rule, not both", name)
	case r.Minimum != nil && r.Maximum != nil && r.GetMinimum() > r.GetMaximum(),
		r.MinLength != nil && r.MaxLength != nil && r.GetMinLength() > r.GetMaxLength():
		return fmt.Errorf("%s: the minimum is above the maximum", name)
	case (r.GetEntries() != nil || r.GetKeys() != nil) && !fd.IsMap():
		return fmt.Errorf("%s: entries and keys are a map's", name)
	}
	for _, p := range []string{r.GetPattern(), r.GetEntries().GetPattern(), r.GetKeys().GetPattern()} {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("%s: pattern: %w", name, err)
		}
	}
	for _, f := range []*optionsv1.Field{r, r.GetKeys(), r.GetEntries()} {
		if ex := f.GetExample(); ex != "" && f.GetPattern() != "" && !regexp.MustCompile(f.GetPattern()).MatchString(ex) {
			return fmt.Errorf("%s: the example %q does not match the pattern", name, ex)
		}
	}
	return nil
}

// constrainValue adds the constraints of r on one value (a string, a number, a list's item or
// a map's value) to its schema o. nullable: o admits null, which an enum must then list.
func constrainValue(o obj, r *optionsv1.Field, nullable bool) obj {
	if r == nil {
		return o
	}
	if r.Minimum != nil {
		o["minimum"] = r.GetMinimum()
	}
	if r.Maximum != nil {
		o["maximum"] = r.GetMaximum()
	}
	if r.MinLength != nil {
		o["minLength"] = r.GetMinLength()
	} else if r.GetRequired() && o["type"] != nil && isString(o) {
		// Required means carried and not empty.
		o["minLength"] = 1
	}
	if r.MaxLength != nil {
		o["maxLength"] = r.GetMaxLength()
	}
	if p := r.GetPattern(); p != "" {
		o["pattern"] = p
	}
	if p := textPatterns[r.GetText()]; p != "" {
		o["pattern"] = p
	}
	if f := r.GetFormat(); f != "" {
		o["format"] = f
	}
	if vs := r.GetValues(); len(vs) > 0 {
		enum := make([]any, 0, len(vs)+1)
		for _, v := range vs {
			enum = append(enum, v)
		}
		if nullable {
			enum = append(enum, nil)
		}
		o["enum"] = enum
	}
	if ex := r.GetExample(); ex != "" {
		o["examples"] = []any{ex}
	}
	return o
}

func isString(o obj) bool {
	switch t := o["type"].(type) {
	case string:
		return t == "string"
	case []any:
		return len(t) > 0 && t[0] == "string"
	}
	return false
}

// constrainCollection adds r's bounds on a list (how many items, and each item) or a map (how
// many entries, each key, each value).
func constrainCollection(o obj, fd protoreflect.FieldDescriptor, r *optionsv1.Field) obj {
	if r == nil {
		return o
	}
	if fd.IsList() {
		if r.MinLength != nil {
			o["minItems"] = r.GetMinLength()
		}
		if r.MaxLength != nil {
			o["maxItems"] = r.GetMaxLength()
		}
		item, _ := o["items"].(obj)
		o["items"] = constrainValue(item, &optionsv1.Field{Pattern: r.GetPattern(), Values: r.GetValues(),
			Format: r.GetFormat(), Example: r.GetExample(), Text: r.GetText()}, false)
		return o
	}
	if r.MinLength != nil {
		o["minProperties"] = r.GetMinLength()
	} else if r.GetRequired() {
		o["minProperties"] = 1
	}
	if r.MaxLength != nil {
		o["maxProperties"] = r.GetMaxLength()
	}
	if k := r.GetKeys(); k != nil {
		o["propertyNames"] = constrainValue(obj{"type": "string"}, k, false)
	}
	if e := r.GetEntries(); e != nil {
		value, _ := o["additionalProperties"].(obj)
		o["additionalProperties"] = constrainValue(value, e, false)
	}
	return o
}
