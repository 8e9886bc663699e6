package server

import (
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// methods are those of the service the verification server registers, each with the rule its
// proto declares (mnv.options.v1.rule): credential, callers, role, product, Idempotency-Key.
var methods = rpcrule.MustServices(&verificationv1.VerificationService_ServiceDesc)

// Policy is the access rule of every method, as the methods declare it.
func Policy() auth.Policy { return auth.PolicyOf(methods) }

// IdempotentMethods are the methods that declare Idempotency-Key applies.
func IdempotentMethods() []string { return rpcrule.Idempotent(methods) }
