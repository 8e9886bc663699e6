package verify

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// LineRequest is a verification of the line whose capture session a CAMARA access token holds:
// against a number (E.164), against its SHA-256 (hexadecimal), or neither, to share the line's
// number (phoneNumberShare). The caller has checked the shapes.
type LineRequest struct {
	Blob         string
	Number       string
	NumberSHA256 string
	Share        bool
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
func (s *Service) VerifyLine(ctx context.Context, p identity.Principal, r LineRequest) (LineResult, error) {
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
	if claims.OperatorID != "" {
		if op, ok := s.ops.Get(claims.OperatorID); !ok || !op.Allows(operators.ClientOf(p), operators.MethodHeaderEnrichment) {
			return LineResult{}, fault.NotEnabled("", "operator %q is not available to this account", claims.OperatorID)
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
	var hash []byte
	if kept != "" {
		hash = s.vault.Hash(kept)
		if err := s.checkNumberLimit(ctx, p.ClientID, hash); err != nil {
			return LineResult{}, err
		}
	} else {
		hash = s.vault.Hash("")
	}

	outcome, reason := decideLine(claims.Number, r, !s.now().Before(claims.ExpiresAt))
	v := domain.Verification{
		ID: uuid.NewString(), ClientID: p.ClientID, SessionID: claims.SessionID, Outcome: outcome, Reason: reason,
		OperatorID: claims.OperatorID, ServiceType: string(operators.MethodHeaderEnrichment), Product: product,
		NumberHash: hash,
	}
	v.NumberSealed = s.vault.Seal(kept, "verifications", v.ID)
	v.Status = outcome
	if domain.Charged(outcome) {
		v.Status = domain.StatusPending
	}
	if v, err = s.run(ctx, p, v, phone.Mask(kept)); err != nil {
		return LineResult{}, err
	}
	out := LineResult{Verification: v}
	if r.Share && v.Status == domain.StatusVerified {
		out.LineNumber = claims.Number
	}
	return out, nil
}

// decideLine compares the line's number with what r gives.
func decideLine(line string, r LineRequest, expired bool) (outcome, reason string) {
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
