package verify

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/rowid"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// LineRequest is a verification of the line whose capture session a CAMARA access token holds:
// against a number (E.164), against its SHA-256 (hexadecimal), or neither, to share the line's
// number (phoneNumberShare). The caller has checked the shapes.
type LineRequest struct {
	Blob         string
	Number       string
	NumberSHA256 string
	Share        bool
	// Correlator is the caller's x-correlator, passed on to an operator's API (NETWORK_API);
	// empty: the request id.
	Correlator string
}

// LineResult is a decided line verification and, for a VERIFIED share, the line's number.
type LineResult struct {
	Verification domain.Verification
	LineNumber   string
}

// VerifyLine decides r for the client of p like Verify: recorded with its session consumed,
// limited per number, charged (VERIFIED and NOT_VERIFIED; a share is charged as the
// VERIFICATION variant NUMBER_SHARE) and completed with its event. A session the network did
// not identify is UNDETERMINED and free. The number kept is the one given, else the line's.
//
// A NETWORK_API session (the facade sent the device to the operator's own authorization) is
// decided by the operator's API with the session's single-use token, as Verify decides one
// (askOperator): the client must have enabled that method of the operator, and the operation
// must be one mnv uses there (a hashed number needs an operator that accepts hashedPhoneNumber;
// a share, one whose phoneNumberShare scope mnv asks for), else nothing is asked nor recorded.
func (s *Service) VerifyLine(ctx context.Context, p principal.Principal, r LineRequest) (LineResult, error) {
	product, feature := domain.ProductVerify, domain.FeatureVerify
	if r.Share {
		product, feature = domain.ProductNumberShare, domain.FeatureNumberShare
	}
	if !p.Has(feature) {
		return LineResult{}, fault.NotEnabled("", "%s is not enabled for this account", feature)
	}
	claims, err := s.sealer.Open(r.Blob)
	if err != nil || claims.ClientID != p.ClientID {
		return LineResult{}, fault.Invalid("", "the access token's session is not this account's")
	}
	netSess, err := s.lineSession(ctx, p.ClientID, claims)
	if err != nil {
		return LineResult{}, err
	}
	method := operators.MethodHeaderEnrichment
	if netSess != nil {
		method = operators.MethodNetworkAPI
	}
	if claims.OperatorID != "" {
		if op, ok := s.ops.Get(claims.OperatorID); !ok || !op.Allows(operators.ClientOf(p), method) {
			return LineResult{}, fault.NotEnabled("", "operator %q is not available to this account", claims.OperatorID)
		}
	}
	if netSess != nil {
		switch {
		case r.Share && !s.network.Shares(claims.OperatorID):
			return LineResult{}, fault.NotEnabled("", "phoneNumberShare is not offered through operator %q", claims.OperatorID)
		case r.NumberSHA256 != "" && !s.network.TakesHash(claims.OperatorID):
			return LineResult{}, fault.NotEnabled("", "operator %q does not take hashedPhoneNumber", claims.OperatorID)
		}
	}
	kept := claims.Number
	if r.Number != "" {
		kept = r.Number
		if n, err := phone.Parse(r.Number); err == nil {
			kept = n.E164
		}
		r.Number = kept
	}
	if kept != "" {
		if err := s.checkNumberLimit(ctx, p.ClientID, s.vault.Hash(kept)); err != nil {
			return LineResult{}, err
		}
	}

	var (
		outcome domain.Status
		reason  string
	)
	if netSess != nil {
		var ans operatorapi.Answer
		correlator := r.Correlator
		if correlator == "" {
			correlator = requestid.From(ctx)
		}
		if ans, outcome, reason, err = s.askOperator(ctx, *netSess, claims, nil, correlator, s.lineAsk(claims.OperatorID, r)); err != nil {
			return LineResult{}, err
		}
		if r.Share && ans.Status == 200 {
			// The operator told the line's number: it is kept, as a header-enriched share keeps it.
			outcome, reason, kept, claims.Number = domain.StatusVerified, domain.ReasonNumberShared, ans.Number, ans.Number
		}
	} else {
		outcome, reason = decideLine(claims.Number, r, !s.now().Before(claims.ExpiresAt))
	}
	v := domain.Verification{
		ID: rowid.New(), ClientID: p.ClientID, SessionID: claims.SessionID, Outcome: outcome, Reason: reason,
		OperatorID: claims.OperatorID, ServiceType: string(method), Product: product,
		NumberHash: s.vault.Hash(kept),
	}
	v.NumberSealed = s.vault.Seal(kept, "verifications", v.ID)
	v.Status = outcome
	if domain.Charged(outcome) {
		v.Status = domain.StatusPending
	}
	// The number's limit was asked above, before any operator call.
	if v, err = s.run(ctx, p, v, phone.Mask(kept), false); err != nil {
		return LineResult{}, err
	}
	out := LineResult{Verification: v}
	if r.Share && v.Status == domain.StatusVerified {
		out.LineNumber = claims.Number
	}
	return out, nil
}

// lineSession is the NETWORK_API session of a line without a number, nil for any other (a
// header-enriched session, or no network API configured).
func (s *Service) lineSession(ctx context.Context, clientID string, c seal.Claims) (*domain.Session, error) {
	if c.Number != "" || c.OperatorID == "" || s.sessions == nil || s.network == nil {
		return nil, nil
	}
	sess, err := s.sessions.GetSession(ctx, clientID, c.SessionID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		return nil, nil // the record says the session is unknown
	case err != nil:
		return nil, err
	case sess.Method != string(operators.MethodNetworkAPI):
		return nil, nil
	}
	return &sess, nil
}

// lineAsk is the operator's API call that decides r: /device-phone-number for a share, else
// /verify with the number or its hash.
func (s *Service) lineAsk(operatorID string, r LineRequest) askFunc {
	return func(ctx context.Context, token, correlator string) (operatorapi.Answer, error) {
		switch {
		case r.Share:
			return s.network.ShareNumber(ctx, operatorID, token, correlator)
		case r.NumberSHA256 != "":
			return s.network.VerifyHash(ctx, operatorID, token, r.NumberSHA256, correlator)
		}
		return s.network.VerifyNumber(ctx, operatorID, token, r.Number, correlator)
	}
}

// decideLine compares the line's number with what r gives.
func decideLine(line string, r LineRequest, expired bool) (outcome domain.Status, reason string) {
	switch {
	case expired:
		return domain.StatusExpired, domain.ReasonSessionExpired
	case line == "":
		return domain.StatusUndetermined, domain.ReasonNoNetworkIdentity
	case r.Share:
		return domain.StatusVerified, domain.ReasonNumberShared
	case r.NumberSHA256 != "":
		sum := sha256.Sum256([]byte(line))
		if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(strings.ToLower(r.NumberSHA256))) == 1 {
			return domain.StatusVerified, domain.ReasonMatch
		}
	case r.Number == line:
		return domain.StatusVerified, domain.ReasonMatch
	}
	return domain.StatusNotVerified, domain.ReasonMismatch
}
