package server

import (
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// methods are those of the services the accounts server registers, each with the rule its
// proto declares (mnv.options.v1.rule): credential, callers, role, Idempotency-Key.
var methods = rpcrule.MustServices(&accountsv1.AccountsService_ServiceDesc,
	&accountsv1.AccountsInternalService_ServiceDesc, &accountsv1.AccountsAdminService_ServiceDesc,
	&accountsv1.PeopleService_ServiceDesc)

// Policy is the access rule of every method, as the methods declare it.
func Policy() auth.Policy { return auth.PolicyOf(methods) }

// IdempotentMethods are the methods that declare Idempotency-Key applies.
func IdempotentMethods() []string { return rpcrule.Idempotent(methods) }
