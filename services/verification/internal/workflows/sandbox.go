package workflows

import (
	"context"
	"slices"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// SandboxInbox is the sandbox SMS centre of `make run` (platform/testkit/sandboxsmsc, plugged in
// by cmd/mnv): what it was sent, oldest first. Nil everywhere else.
type SandboxInbox interface {
	Sent() []SandboxMessage
}

// SandboxMessage is one message the sandbox SMS centre took.
type SandboxMessage struct {
	ProviderIDs []string // one per part
	From, Text  string
	At          time.Time
}

// MessageRef is what a provider's message id belongs to.
type MessageRef struct {
	WorkflowID, StepID, Masked string
}

// SandboxSMS is one sandbox message of a client's workflow.
type SandboxSMS struct {
	MessageRef
	From, Text string
	At         time.Time
}

// WithSandbox lets clients read the sandbox SMS centre's messages of their workflows.
func (s *Service) WithSandbox(inbox SandboxInbox) *Service {
	s.sandbox = inbox
	return s
}

// SandboxSMS is the sandbox SMS centre's messages of the client's workflows, newest first:
// fault.ErrNotFound where the SMS centre is not the sandbox's.
func (s *Service) SandboxSMS(ctx context.Context, clientID string) ([]SandboxSMS, error) {
	if s.sandbox == nil {
		return nil, fault.ErrNotFound
	}
	sent := s.sandbox.Sent()
	var ids []string
	for _, m := range sent {
		ids = append(ids, m.ProviderIDs...)
	}
	if len(ids) == 0 {
		return []SandboxSMS{}, nil
	}
	refs, err := s.st.ClientMessages(ctx, clientID, ids)
	if err != nil {
		return nil, err
	}
	out := []SandboxSMS{}
	for _, m := range slices.Backward(sent) {
		for _, id := range m.ProviderIDs {
			if ref, ok := refs[id]; ok {
				out = append(out, SandboxSMS{MessageRef: ref, From: m.From, Text: m.Text, At: m.At})
				break
			}
		}
	}
	return out, nil
}
