package apispec

// info is the document's info object.
var info = obj{
	"title":       "hongbao",
	"version":     "1",
	"description": "Red packet rains and random instant discounts over HTTP. Amounts are integer cents (*_cents) or decimal strings with two decimals; never floats. Every error answers {\"error\":{\"code\":\"...\",\"message\":\"...\"}} with a stable code.",
}

// securitySchemes are the credentials a route may take.
var securitySchemes = obj{
	"user": obj{
		"type":         "http",
		"scheme":       "bearer",
		"bearerFormat": "JWT",
		"description":  "HS256 JWT signed by the platform; sub is the user id (1 to 64 of A-Z a-z 0-9 _ - . : @); exp is required; iat, when given, is not in the future; exp - iat (or exp - now without iat) is at most the server's maximum token age (24h by default); iss and aud must match when the server checks them; kid chooses among the configured secrets.",
	},
	"admin": obj{
		"type":        "http",
		"scheme":      "bearer",
		"description": "an admin key (an operator): campaigns, the console, /metrics; it also does what a payment key does",
	},
	"payment": obj{
		"type":        "http",
		"scheme":      "bearer",
		"description": "a payment system key (serve --payment-key-file): reserves, confirms and cancels discounts for the user named in the body. A user token there answers 403 forbidden.",
	},
	"gateway": obj{
		"type":        "http",
		"scheme":      "bearer",
		"description": "a gateway key (serve --gateway-key-file): a platform's access layer, which vouches for the users it already authenticated, grabs for them in batches. A user token there answers 403 forbidden.",
	},
	"metrics": obj{
		"type":        "http",
		"scheme":      "bearer",
		"description": "a metrics key (serve --metrics-key-file): reads /metrics on the API address; an admin key may too",
	},
}

// parameters are the parameters routes share by reference.
var parameters = obj{
	"Offset": obj{
		"name":        "offset",
		"in":          "query",
		"required":    false,
		"description": "where the page starts in the list: 0 (the default) is the first; the next page starts at offset + limit",
		"schema": obj{
			"type":    "integer",
			"minimum": 0,
			"maximum": 1073741824,
			"default": 0,
		},
	},
	"ListLimit": obj{
		"name":        "limit",
		"in":          "query",
		"required":    false,
		"description": "the most campaigns the page holds",
		"schema": obj{
			"type":    "integer",
			"minimum": 1,
			"maximum": 200,
			"default": 200,
		},
	},
	"BlockedLimit": obj{
		"name":        "limit",
		"in":          "query",
		"required":    false,
		"description": "the most users the page holds",
		"schema": obj{
			"type":    "integer",
			"minimum": 1,
			"maximum": 1000,
			"default": 1000,
		},
	},
}

// schemas are the bodies of requests and answers. The outcome enums of Grab and
// Reservation and the outcome counts of LiveView are filled in from
// hongbao.OutcomeTable (Document).
var schemas = map[string]obj{
	"Error": obj{
		"type":     "object",
		"required": arr{"error"},
		"properties": obj{
			"error": obj{
				"type":     "object",
				"required": arr{"code", "message"},
				"properties": obj{
					"code": obj{
						"type": "string",
						"enum": arr{
							"unauthorized",
							"forbidden",
							"not_found",
							"no_grant",
							"invalid_json",
							"invalid_request",
							"invalid_id",
							"body_too_large",
							"rate_limited",
							"busy",
							"outcome_unknown",
							"in_progress",
							"idempotency_mismatch",
							"not_ready",
							"unavailable",
							"internal",
							"no_reservation",
							"expired",
							"cancelled",
							"confirmed",
							"order_mismatch",
							"misdirected",
							"no_commitment",
							"not_closed",
							"draw_log_expired",
						},
					},
					"message": obj{
						"type": "string",
					},
				},
			},
		},
	},
	"CreateCampaign": obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             arr{"count"},
		"description":          "Give total or total_cents (not both); likewise min/min_cents and max/max_cents.",
		"properties": obj{
			"total": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "the amount to hand out, as in \"100.00\"",
			},
			"total_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "the amount to hand out in cents",
			},
			"count": obj{
				"type":        "integer",
				"minimum":     1,
				"description": "number of packets: at most the server's cap (serve --max-count, 1,000,000 by default; 400 past it)",
			},
			"split": obj{
				"type":    "string",
				"enum":    arr{"double-average", "line-cut", "fixed"},
				"default": "double-average",
			},
			"min": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "smallest packet",
			},
			"min_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "smallest packet in cents (default 1)",
			},
			"max": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "largest packet",
			},
			"max_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "largest packet in cents (default: none)",
			},
			"opens_at": obj{
				"type":        "string",
				"format":      "date-time",
				"description": "RFC 3339; default: now",
			},
			"closes_at": obj{
				"type":        "string",
				"format":      "date-time",
				"description": "RFC 3339; default: 24 h after opening",
			},
			"funding_account": obj{
				"type":    "string",
				"default": "platform",
			},
			"seed": obj{
				"type":        "integer",
				"format":      "uint64",
				"description": "reproduces the split; default random",
			},
			"shards": obj{
				"type":        "integer",
				"minimum":     1,
				"maximum":     256,
				"default":     1,
				"description": "spread the campaign over this many groups of Redis keys (hash tags), so one campaign uses several Redis Cluster masters; at most count",
			},
		},
	},
	"Campaign": obj{
		"type": "object",
		"required": arr{
			"id",
			"state",
			"opens_at",
			"closes_at",
			"total",
			"total_cents",
			"count",
			"split",
			"min",
			"min_cents",
			"funding_account",
			"seed",
			"shards",
		},
		"properties": obj{
			"id": obj{
				"type": "string",
			},
			"state": obj{
				"type": "string",
				"enum": arr{"scheduled", "open", "closed", "settled"},
			},
			"opens_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"closes_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"total": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "",
			},
			"total_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "",
			},
			"count": obj{
				"type": "integer",
			},
			"split": obj{
				"type": "string",
			},
			"min": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "",
			},
			"min_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "",
			},
			"max": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "absent when unbounded",
			},
			"max_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "absent when unbounded",
			},
			"funding_account": obj{
				"type": "string",
			},
			"owner": obj{
				"type":        "string",
				"description": "the identity of the ledger or webhook wallet the campaign settles into (docs/operations.md, Sharing a Redis); absent when it records none",
			},
			"seed": obj{
				"type":        "string",
				"description": "the split's seed as a decimal string (admins only)",
			},
			"shards": obj{
				"type":    "integer",
				"minimum": 1,
				"maximum": 256,
			},
		},
	},
	"CampaignStatus": obj{
		"allOf": arr{
			ref("schemas", "Campaign"),
			obj{
				"type": "object",
				"required": arr{
					"granted_count",
					"granted",
					"granted_cents",
					"remaining_count",
					"remaining",
					"remaining_cents",
					"refunded",
					"refunded_cents",
					"settlement",
					"now",
					"in_flight",
					"paused",
					"paused_shards",
					"blocked_users",
				},
				"properties": obj{
					"close_reason": obj{
						"type": "string",
						"enum": arr{"sold_out", "time", "operator", "cancelled"},
					},
					"granted_count": obj{
						"type": "integer",
					},
					"granted": obj{
						"type":        "string",
						"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
						"description": "",
					},
					"granted_cents": obj{
						"type":        "integer",
						"format":      "int64",
						"minimum":     0,
						"description": "",
					},
					"remaining_count": obj{
						"type": "integer",
					},
					"remaining": obj{
						"type":        "string",
						"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
						"description": "",
					},
					"remaining_cents": obj{
						"type":        "integer",
						"format":      "int64",
						"minimum":     0,
						"description": "",
					},
					"refunded": obj{
						"type":        "string",
						"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
						"description": "",
					},
					"refunded_cents": obj{
						"type":        "integer",
						"format":      "int64",
						"minimum":     0,
						"description": "",
					},
					"settlement": obj{
						"type":     "object",
						"required": arr{"lag_entries", "pending_entries", "dead_entries"},
						"properties": obj{
							"lag_entries": obj{
								"type":        "integer",
								"description": "grant entries not yet delivered to a settlement worker",
							},
							"pending_entries": obj{
								"type":        "integer",
								"description": "delivered, not yet in the ledger",
							},
							"dead_entries": obj{
								"type":        "integer",
								"description": "grants that failed settlement, waiting for an operator",
							},
						},
					},
					"now": obj{
						"type":        "string",
						"format":      "date-time",
						"description": "the Redis clock at the read",
					},
					"in_flight": obj{
						"type":        "integer",
						"description": "packets on their way between shards (counted in remaining_count)",
					},
					"paused": obj{
						"type":        "boolean",
						"description": "an operator paused the campaign (its root shard's flag, written after every other shard's by a pause and cleared first by a resume)",
					},
					"paused_shards": obj{
						"type":        "integer",
						"minimum":     0,
						"description": "shards paused: all of them once a pause answered, 0 once a resume did; anything between says a pause or resume was cut short (call it again)",
					},
					"overtaken": obj{
						"type":        "boolean",
						"description": "only on the answer of a pause or resume, and only when true: a pause or resume that started later wrote a shard before this call could, and the campaign is as that call wants (paused says which), not as this one asked; paused_shards may disagree with paused while that call is still writing",
					},
					"blocked_users": obj{
						"type":        "integer",
						"minimum":     0,
						"description": "users blocked on the campaign",
					},
				},
			},
		},
	},
	"Grab": obj{
		"type":     "object",
		"required": arr{"campaign", "outcome"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
			"outcome": obj{
				"type":        "string",
				"description": "paused: an operator paused the campaign (its window still runs); blocked: an operator blocked this user on the campaign. A user who holds a packet is answered already_granted either way.",
			},
			"packet_id": obj{
				"type":        "string",
				"description": "<campaign>/<seq>; with granted and already_granted",
			},
			"amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "with granted and already_granted",
			},
			"amount_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "with granted and already_granted",
			},
			"receipt": obj{
				"type":        "string",
				"description": "the grant's signed receipt (JWS compact, EdDSA), when the grab asked for it with ?receipt=true and the answer carries a packet",
			},
		},
	},
	"GrabBatchRequest": obj{
		"type":                 "object",
		"required":             arr{"users"},
		"additionalProperties": false,
		"properties": obj{
			"users": obj{
				"type":     "array",
				"minItems": 1,
				"maxItems": 1000,
				"items": obj{
					"type":    "string",
					"pattern": "^[A-Za-z0-9_.:@-]{1,64}$",
				},
				"description": "the users to grab for, repeats allowed",
			},
		},
	},
	"GrabBatch": obj{
		"type":     "object",
		"required": arr{"results"},
		"properties": obj{
			"results": obj{
				"type":        "array",
				"items":       ref("schemas", "GrabBatchResult"),
				"description": "one per user named, in the request's order",
			},
		},
	},
	"GrabBatchResult": obj{
		"type":     "object",
		"required": arr{"user_id"},
		"properties": obj{
			"user_id": obj{
				"type": "string",
			},
			"outcome": obj{
				"type":        "string",
				"description": "the user's grab's outcome, as the single grab answers it; absent with error",
			},
			"error": obj{
				"type":        "string",
				"enum":        arr{"rate_limited"},
				"description": "rate_limited: the user is past the per-user limit and was not grabbed; retry later",
			},
			"packet_id": obj{
				"type":        "string",
				"description": "<campaign>/<seq>; with granted and already_granted",
			},
			"amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "with granted and already_granted",
			},
			"amount_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "with granted and already_granted",
			},
		},
	},
	"Packet": obj{
		"type":     "object",
		"required": arr{"campaign", "packet_id", "amount", "amount_cents"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
			"packet_id": obj{
				"type": "string",
			},
			"amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "",
			},
			"amount_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "",
			},
			"receipt": obj{
				"type":        "string",
				"description": "the grant's signed receipt (JWS compact, EdDSA), when the grab asked for it with ?receipt=true and the answer carries a packet",
			},
		},
	},
	"CreateDiscount": obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             arr{"quota"},
		"description":          "A budget spent over a quota of random discounts, each within [min, max]; a user gets at most per_user_count discounts and at most per_user_amount in all (confirmed and reserved). Give budget or budget_cents (not both); likewise min, max and per_user_amount. Refused with 400 and the field named: budget not a decimal with at most two places, quota < 1, min > max, max > budget, quota x min > budget, quota x max < budget, limits below min (per_user_count < 1, per_user_amount < min), hold out of [1s, 24h], shards out of 1..256 or above quota.",
		"properties": obj{
			"budget": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "the amount to spend, exactly, as in \"1000.00\"",
			},
			"budget_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "the budget in cents",
			},
			"quota": obj{
				"type":        "integer",
				"minimum":     1,
				"description": "number of discounts: at most the server's cap (serve --max-count, 1,000,000 by default; 400 past it)",
			},
			"min": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "smallest discount drawn (default 0.01); a discount clipped to a user's limit or an order amount may be smaller",
			},
			"min_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "min in cents",
			},
			"max": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "largest discount, compensation included (default: the budget)",
			},
			"max_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "max in cents",
			},
			"per_user_count": obj{
				"type":        "integer",
				"minimum":     1,
				"description": "most discounts one user may hold, confirmed or reserved (default 1 when neither per-user limit is given and per_user_unlimited is not true)",
			},
			"per_user_amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "most one user may hold in all, confirmed or reserved (default: no amount limit); at least min, at most the largest budget",
			},
			"per_user_amount_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "per_user_amount in cents",
			},
			"per_user_unlimited": obj{
				"type":        "boolean",
				"description": "true: no per-user limit at all (one user may hold the whole quota); refused with per_user_count or per_user_amount. Without it and without limits a campaign gives one discount per user.",
			},
			"shards": obj{
				"type":        "integer",
				"minimum":     1,
				"maximum":     256,
				"default":     1,
				"description": "hash tags (cluster slots) the campaign spreads over; users are homed on one each",
			},
			"hold": obj{
				"type":        "string",
				"default":     "5m0s",
				"description": "how long a reservation waits for its confirm before it expires and its amount returns: a duration within 1s and 24h, as in \"30s\"",
			},
			"opens_at": obj{
				"type":        "string",
				"format":      "date-time",
				"description": "when reservations start (default: now, by the Redis clock)",
			},
			"closes_at": obj{
				"type":        "string",
				"format":      "date-time",
				"description": "when reservations end (default: opens_at + 24h); confirms of reservations held are accepted until their hold ends",
			},
			"funding_account": obj{
				"type":        "string",
				"description": "account the budget comes from (default platform)",
			},
			"seed": obj{
				"type":        "integer",
				"format":      "uint64",
				"description": "reproduces the amounts (default: random); an operator secret",
			},
		},
	},
	"Discount": obj{
		"type":     "object",
		"required": arr{"id", "state", "budget_cents", "quota", "min_cents", "max_cents", "shards", "hold"},
		"properties": obj{
			"id": obj{
				"type": "string",
			},
			"state": obj{
				"type": "string",
				"enum": arr{"scheduled", "open", "closed", "settled"},
			},
			"opens_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"closes_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"budget": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"budget_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"quota": obj{
				"type": "integer",
			},
			"min": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"min_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"max": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"max_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"per_user_count": obj{
				"type":        "integer",
				"description": "absent: no limit",
			},
			"per_user_amount": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"per_user_amount_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"per_user_unlimited": obj{
				"type":        "boolean",
				"description": "true when the campaign has no per-user limit; absent otherwise",
			},
			"shards": obj{
				"type": "integer",
			},
			"hold": obj{
				"type":        "string",
				"description": "a duration, as in \"5m0s\"",
			},
			"funding_account": obj{
				"type": "string",
			},
			"owner": obj{
				"type":        "string",
				"description": "the identity of the ledger or webhook wallet the campaign settles into (docs/operations.md, Sharing a Redis); absent when it records none",
			},
			"seed": obj{
				"type":        "string",
				"description": "a uint64 as a decimal string",
			},
			"tail_count": obj{
				"type":        "integer",
				"description": "amounts of min dealt last on the shards",
			},
		},
	},
	"DiscountStatus": obj{
		"type":        "object",
		"description": "Always confirmed + reserved + remaining = budget (cents) and = quota (count); after settlement remaining is what was refunded.",
		"required": arr{
			"id",
			"state",
			"budget_cents",
			"quota",
			"confirmed_cents",
			"confirmed_count",
			"reserved_cents",
			"reserved_count",
			"remaining_cents",
			"remaining_count",
			"paused",
			"paused_shards",
			"blocked_users",
		},
		"properties": obj{
			"id": obj{
				"type": "string",
			},
			"state": obj{
				"type": "string",
				"enum": arr{"scheduled", "open", "closed", "settled"},
			},
			"opens_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"closes_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"budget": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"budget_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"quota": obj{
				"type": "integer",
			},
			"min": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"min_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"max": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"max_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"per_user_count": obj{
				"type":        "integer",
				"description": "absent: no limit",
			},
			"per_user_amount": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"per_user_amount_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"per_user_unlimited": obj{
				"type":        "boolean",
				"description": "true when the campaign has no per-user limit; absent otherwise",
			},
			"shards": obj{
				"type": "integer",
			},
			"hold": obj{
				"type":        "string",
				"description": "a duration, as in \"5m0s\"",
			},
			"funding_account": obj{
				"type": "string",
			},
			"owner": obj{
				"type":        "string",
				"description": "the identity of the ledger or webhook wallet the campaign settles into (docs/operations.md, Sharing a Redis); absent when it records none",
			},
			"seed": obj{
				"type":        "string",
				"description": "a uint64 as a decimal string",
			},
			"tail_count": obj{
				"type":        "integer",
				"description": "amounts of min dealt last on the shards",
			},
			"close_reason": obj{
				"type": "string",
				"enum": arr{"time", "operator", "exhausted", "cancelled"},
			},
			"confirmed_count": obj{
				"type": "integer",
			},
			"confirmed": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"confirmed_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"reserved_count": obj{
				"type": "integer",
			},
			"reserved": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"reserved_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"remaining_count": obj{
				"type": "integer",
			},
			"remaining": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"remaining_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"compensation_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "part of remaining_cents: what clipping set aside, topping up later discounts up to max",
			},
			"refunded_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "the leftover refunded to the funding account at settlement",
			},
			"in_flight": obj{
				"type":        "integer",
				"description": "units of remaining_count moving between shards",
			},
			"now": obj{
				"type":   "string",
				"format": "date-time",
			},
			"paused": obj{
				"type":        "boolean",
				"description": "an operator paused the campaign (its root shard's flag, written after every other shard's by a pause and cleared first by a resume)",
			},
			"paused_shards": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "shards paused: all of them once a pause answered, 0 once a resume did; anything between says a pause or resume was cut short (call it again)",
			},
			"overtaken": obj{
				"type":        "boolean",
				"description": "only on the answer of a pause or resume, and only when true: a pause or resume that started later wrote a shard before this call could, and the campaign is as that call wants (paused says which), not as this one asked; paused_shards may disagree with paused while that call is still writing",
			},
			"blocked_users": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "users blocked on the campaign",
			},
		},
	},
	"Reserve": obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             arr{"user_id", "order_id"},
		"description":          "Give order_amount or order_amount_cents (not both).",
		"properties": obj{
			"user_id": obj{
				"type":        "string",
				"pattern":     "^[A-Za-z0-9_.:@-]{1,64}$",
				"description": "the user who pays the order, as the payment system knows them (the sub of their tokens)",
			},
			"order_id": obj{
				"type":        "string",
				"pattern":     "^[A-Za-z0-9_.:-]{1,64}$",
				"description": "the payment's order id; a user's order is reserved once",
			},
			"order_amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "the order's amount, at least 0.01: no discount exceeds it",
			},
			"order_amount_cents": obj{
				"type":        "integer",
				"format":      "int64",
				"minimum":     0,
				"description": "order_amount in cents",
			},
		},
	},
	"Reservation": obj{
		"type":     "object",
		"required": arr{"outcome", "order_id"},
		"properties": obj{
			"outcome": obj{
				"type":        "string",
				"description": "reserved: held until expires_at; already: this order's discount, the same amount (reserved or confirmed); exhausted: no budget or quota left anywhere; limit: the user's count or amount limit is used up; paused: an operator paused the campaign (a new order only: an order's own reservation is answered as ever); blocked: an operator blocked this user on the campaign",
			},
			"order_id": obj{
				"type": "string",
			},
			"amount": obj{
				"type":        "string",
				"pattern":     "^[0-9]+(\\.[0-9]{1,2})?$",
				"description": "with reserved and already",
			},
			"amount_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"expires_at": obj{
				"type":        "string",
				"format":      "date-time",
				"description": "when the hold ends, with reserved and already",
			},
		},
	},
	"OrderOutcome": obj{
		"type":     "object",
		"required": arr{"outcome", "order_id"},
		"properties": obj{
			"outcome": obj{
				"type":        "string",
				"enum":        arr{"confirmed", "cancelled", "expired"},
				"description": "confirm answers confirmed (also when repeated); cancel answers cancelled (also when repeated), or expired when the hold had ended first (its amount went back too)",
			},
			"order_id": obj{
				"type": "string",
			},
			"amount": obj{
				"type":    "string",
				"pattern": "^[0-9]+(\\.[0-9]{1,2})?$",
			},
			"amount_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
		},
	},
	"CampaignList": obj{
		"type":     "object",
		"required": arr{"campaigns", "total", "more"},
		"properties": obj{
			"campaigns": obj{
				"type":  "array",
				"items": ref("schemas", "CampaignStatus"),
			},
			"total": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "how many campaigns are registered, on every page",
			},
			"more": obj{
				"type":        "boolean",
				"description": "campaigns follow this page: ask for offset + limit",
			},
		},
	},
	"Redrive": obj{
		"type":     "object",
		"required": arr{"campaign", "redriven_entries"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
			"redriven_entries": obj{
				"type":        "integer",
				"description": "dead entries moved back to the grants stream (each holds the grants of one grab call)",
			},
		},
	},
	"Demo": obj{
		"type":     "object",
		"required": arr{"campaign"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
		},
	},
	"DemoToken": obj{
		"type":     "object",
		"required": arr{"token", "user", "expires_at", "campaign"},
		"properties": obj{
			"token": obj{
				"type":        "string",
				"description": "an HS256 JWT for the user, as the platform would sign it",
			},
			"user": obj{
				"type": "string",
			},
			"expires_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"campaign": obj{
				"type":        "string",
				"description": "the demo's current campaign",
			},
		},
	},
	"LiveView": obj{
		"type":        "object",
		"required":    arr{"campaign", "live"},
		"description": "the data of a tick event",
		"properties": obj{
			"campaign": ref("schemas", "CampaignStatus"),
			"live": obj{
				"type": "object",
				"required": arr{
					"seq",
					"read_at",
					"interval_ms",
					"since",
					"rates",
					"outcomes",
					"amounts",
					"oldest_pending_seconds",
				},
				"properties": obj{
					"seq": obj{
						"type":        "integer",
						"description": "numbers the readings of the campaign's current sampler",
					},
					"read_at": obj{
						"type":   "string",
						"format": "date-time",
					},
					"interval_ms": obj{
						"type":        "integer",
						"description": "time between readings",
					},
					"since": obj{
						"type":        "string",
						"format":      "date-time",
						"description": "when this process started counting the campaign's answers",
					},
					"rates": obj{
						"type":        "array",
						"description": "the last minute, one point per reading, oldest first",
						"items": obj{
							"type":     "object",
							"required": arr{"t", "grabs", "grants"},
							"properties": obj{
								"t": obj{
									"type":        "integer",
									"description": "Unix milliseconds of the reading",
								},
								"grabs": obj{
									"type":        "number",
									"description": "answers to grabs per second, this process",
								},
								"grants": obj{
									"type":        "number",
									"description": "grants per second, every process (from Redis's counter)",
								},
							},
						},
					},
					"outcomes": obj{
						"type":        "object",
						"description": "this process's answers to grabs of the campaign",
						"required":    arr{"rate_limited", "busy", "error"},
						"properties": obj{
							"rate_limited": obj{
								"type": "integer",
							},
							"busy": obj{
								"type": "integer",
							},
							"error": obj{
								"type": "integer",
							},
						},
					},
					"amounts": obj{
						"type":        "object",
						"description": "the packets this process granted: at most 20 bars of equal width, from the smallest to the largest amount",
						"required":    arr{"count", "sum_cents", "min_cents", "max_cents", "bins"},
						"properties": obj{
							"count": obj{
								"type": "integer",
							},
							"sum_cents": obj{
								"type":   "integer",
								"format": "int64",
							},
							"min_cents": obj{
								"type":   "integer",
								"format": "int64",
							},
							"max_cents": obj{
								"type":   "integer",
								"format": "int64",
							},
							"bins": obj{
								"type": "array",
								"items": obj{
									"type":     "object",
									"required": arr{"from_cents", "to_cents", "count"},
									"properties": obj{
										"from_cents": obj{
											"type":   "integer",
											"format": "int64",
										},
										"to_cents": obj{
											"type":        "integer",
											"format":      "int64",
											"description": "exclusive",
										},
										"count": obj{
											"type": "integer",
										},
									},
								},
							},
						},
					},
					"oldest_pending_seconds": obj{
						"type":        "number",
						"description": "age of the oldest grant not yet settled, by the Redis clock; 0 when none",
					},
				},
			},
		},
	},
	"OrderUser": obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             arr{"user_id"},
		"description":          "The body of confirm and cancel: the user whose order it is.",
		"properties": obj{
			"user_id": obj{
				"type":        "string",
				"pattern":     "^[A-Za-z0-9_.:@-]{1,64}$",
				"description": "the user who pays the order, as the payment system knows them (the sub of their tokens)",
			},
		},
	},
	"BlockUsers": obj{
		"type":                 "object",
		"required":             arr{"users"},
		"additionalProperties": false,
		"properties": obj{
			"users": obj{
				"type":     "array",
				"minItems": 1,
				"maxItems": 1000,
				"items": obj{
					"type":    "string",
					"pattern": "^[A-Za-z0-9_.:@-]{1,64}$",
				},
				"description": "user ids (as in the user token's sub), 1 to 1000; a user given twice counts once",
			},
		},
	},
	"BlockChange": obj{
		"type":     "object",
		"required": arr{"campaign"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
			"added": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "POST .../blocked: users that were not blocked before",
			},
			"removed": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "POST .../blocked/remove: users that were blocked",
			},
		},
	},
	"BlockedList": obj{
		"type":     "object",
		"required": arr{"campaign", "users", "total", "more"},
		"properties": obj{
			"campaign": obj{
				"type": "string",
			},
			"users": obj{
				"type":        "array",
				"description": "the users of this page",
				"items": obj{
					"type":     "object",
					"required": arr{"user", "since"},
					"properties": obj{
						"user": obj{
							"type": "string",
						},
						"since": obj{
							"type":        "string",
							"format":      "date-time",
							"description": "when the user was first blocked (Redis clock)",
						},
					},
				},
			},
			"total": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "how many users are blocked on the campaign",
			},
			"more": obj{
				"type":        "boolean",
				"description": "users follow this page: ask for offset + limit",
			},
		},
	},
	"DiscountList": obj{
		"type":     "object",
		"required": arr{"discounts", "total", "more"},
		"properties": obj{
			"discounts": obj{
				"type":  "array",
				"items": ref("schemas", "DiscountStatus"),
			},
			"total": obj{
				"type":        "integer",
				"minimum":     0,
				"description": "how many discount campaigns are registered, on every page",
			},
			"more": obj{
				"type":        "boolean",
				"description": "discount campaigns follow this page: ask for offset + limit",
			},
		},
	},
	"ReadyChecks": obj{
		"type":        "object",
		"description": "each check and its reading: redis (ok, unreachable: WHY, refuses writes: CODE such as NOREPLICAS, READONLY, LOADING), replicas with --wait-replicas (ok, or ATTACHED of WANTED replicas attached), ledger (ok, or unreachable: WHY). WHY is general (timeout, connection refused, connection closed, see the log): the cause is in the process's log",
		"additionalProperties": obj{
			"type": "string",
		},
	},
	"Commitment": obj{
		"type":        "object",
		"description": "A campaign's fairness commitment (docs/fairness.md): recorded before create answered, never changed.",
		"required": arr{
			"campaign_id",
			"scheme",
			"root",
			"count",
			"total_cents",
			"min_cents",
			"max_cents",
			"committed_at",
			"leaf",
			"histogram",
		},
		"properties": obj{
			"campaign_id": obj{
				"type": "string",
			},
			"scheme": obj{
				"type": "string",
				"enum": arr{"hongbao-merkle-v1"},
			},
			"root": obj{
				"type":        "string",
				"pattern":     "^[0-9a-f]{64}$",
				"description": "RFC 9162 tree head over the packets' leaves, lower-case hex",
			},
			"count": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"total_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"min_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"max_cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"committed_at": obj{
				"type":   "string",
				"format": "date-time",
			},
			"leaf": obj{
				"type":        "string",
				"description": "the leaf layout: hongbao-packet-v1:<campaign_id>:<seq>:<cents>:<salt as 64 lower-case hex>",
			},
			"histogram": obj{
				"type":        "array",
				"description": "packets by amount, ranges in increasing order (one per amount when they span at most 20, else 20 of equal width)",
				"items": obj{
					"type":     "object",
					"required": arr{"min_cents", "max_cents", "count"},
					"properties": obj{
						"min_cents": obj{
							"type":   "integer",
							"format": "int64",
						},
						"max_cents": obj{
							"type":   "integer",
							"format": "int64",
						},
						"count": obj{
							"type":    "integer",
							"format":  "int64",
							"minimum": 0,
						},
					},
				},
			},
		},
	},
	"Proof": obj{
		"type":        "object",
		"description": "RFC 9162 section 2.1.3 inclusion proof of the caller's packet",
		"required":    arr{"packet_id", "seq", "cents", "salt", "leaf_index", "tree_size", "path", "root"},
		"properties": obj{
			"packet_id": obj{
				"type": "string",
			},
			"seq": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"cents": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"salt": obj{
				"type":    "string",
				"pattern": "^[0-9a-f]{64}$",
			},
			"leaf_index": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 0,
			},
			"tree_size": obj{
				"type":    "integer",
				"format":  "int64",
				"minimum": 1,
			},
			"path": obj{
				"type": "array",
				"items": obj{
					"type":    "string",
					"pattern": "^[0-9a-f]{64}$",
				},
			},
			"root": obj{
				"type":    "string",
				"pattern": "^[0-9a-f]{64}$",
			},
		},
	},
	"Receipt": obj{
		"type":     "object",
		"required": arr{"receipt"},
		"properties": obj{
			"receipt": obj{
				"type":        "string",
				"description": "JWS compact serialization, EdDSA (Ed25519) with kid; payload campaign_id, user_id, packet_id, amount_cents, granted_at (when Redis granted the packet, as the ledger records it), iat",
			},
		},
	},
}
