package server

import (
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// methods are those of the services the connect server registers, each with the rule its proto
// declares (mnv.options.v1.rule): credential, callers, role, the CONNECT product (enforced
// before every handler by the feature gate), Idempotency-Key.
var methods = rpcrule.MustServices(&connectv1.ConnectService_ServiceDesc, &connectv1.ConnectInternalService_ServiceDesc,
	&connectv1.WebhookService_ServiceDesc, &connectv1.WebhookAdminService_ServiceDesc)

// Policy is the access rule of every method, as the methods declare it.
func Policy() auth.Policy { return auth.PolicyOf(methods) }

// IdempotentMethods are the methods that declare Idempotency-Key applies.
func IdempotentMethods() []string { return rpcrule.Idempotent(methods) }
