package jsonpb

import "github.com/mnvhq/mnv/services/platform/apijson"

// The encoder lives in platform/apijson, shared with mnvctl; these names keep the gateway's
// callers as they were.
var (
	AppendMessage = apijson.AppendMessage
	AppendString  = apijson.AppendString
	EnumPrefix    = apijson.EnumPrefix
	enumPrefix    = apijson.EnumPrefix
)

// TimeLayout is the layout of every timestamp the API writes.
const TimeLayout = apijson.TimeLayout
