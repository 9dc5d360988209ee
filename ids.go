package hongbao

import "github.com/hongbao/hongbao/internal/random"

// MaxIDLen is the longest campaign, user or account id.
const MaxIDLen = 64

// validID checks an id for use inside Redis keys, hash tags and ledger
// accounts: 1 to 64 bytes of A-Z a-z 0-9 and the given extra characters.
func validID(kind, id, extra string) error {
	if id == "" {
		return &IDError{Kind: kind, ID: id, Reason: "empty"}
	}
	if len(id) > MaxIDLen {
		return &IDError{Kind: kind, ID: id[:MaxIDLen] + "...", Reason: "longer than 64 bytes"}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		ok := false
		for j := 0; j < len(extra); j++ {
			if c == extra[j] {
				ok = true
				break
			}
		}
		if !ok {
			return &IDError{Kind: kind, ID: id, Reason: "allowed are A-Z a-z 0-9 and " + extra}
		}
	}
	return nil
}

// ValidateCampaignID checks a campaign id: 1 to 64 of A-Z a-z 0-9 _ -.
func ValidateCampaignID(id string) error { return validID("campaign", id, "_-") }

// ValidateUserID checks a user id: 1 to 64 of A-Z a-z 0-9 _ - . : @.
func ValidateUserID(id string) error { return validID("user", id, "_-.:@") }

// ValidateAccountID checks a funding account id, with the user id rules.
func ValidateAccountID(id string) error { return validID("account", id, "_-.:@") }

// MaxOwnerLen is the longest owner identity (Config.Owner).
const MaxOwnerLen = 256

// ValidateOwner checks the identity of a campaign's owner, the ledger or
// sink it settles into: 1 to 256 printable ASCII bytes, no space. A
// ledger's identity ("ledger-" and 32 hex digits) and a webhook sink's
// name are such.
func ValidateOwner(owner string) error {
	if owner == "" {
		return &IDError{Kind: "owner", ID: owner, Reason: "empty"}
	}
	if len(owner) > MaxOwnerLen {
		return &IDError{Kind: "owner", ID: owner[:64] + "...", Reason: "longer than 256 bytes"}
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c <= ' ' || c > '~' {
			return &IDError{Kind: "owner", ID: owner, Reason: "allowed are printable ASCII bytes but space"}
		}
	}
	return nil
}

func newCampaignID() string { return "c" + random.Hex(8) }

func newToken() string { return random.Hex(12) }
