package apispec

// Code below is the API contract's table; edit it, then run make openapi.

// routes are the API's routes, in the order of the document.
var routes = []route{
	{
		Method: "post", Path: "/v1/campaigns", ID: "createCampaign",
		Summary: "create a campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			obj{
				"name":        "Idempotency-Key",
				"in":          "header",
				"required":    false,
				"description": "a retried create with the same key returns the same campaign (200) instead of a new one",
				"schema": obj{
					"type":      "string",
					"maxLength": 200,
				},
			},
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "CreateCampaign"),
				},
			},
		},
		OK: map[string]obj{
			"201": obj{
				"description": "created",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Campaign"),
					},
				},
			},
			"200": obj{
				"description": "the campaign an earlier create with this Idempotency-Key made",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Campaign"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "CreateCampaignBadRequest", "CreateCampaignConflict", "CreateCampaignBodyTooLarge", "CreateCampaignUnprocessable", "Timeout", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/campaigns", ID: "listCampaigns",
		Summary: "list the registered campaigns (created, not yet settled), a page at a time, with their status",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "The campaigns created and not yet settled: scheduled, open, and closed ones until settlement has refunded them (a settled campaign leaves the list), by close time, the earliest first. ?offset= and ?limit= (at most 200) choose the page; total counts them all, more says whether pages follow. A campaign still loading is left out of its page, which may then hold fewer than limit. Requests for the same page that arrive while one reads Redis share its reading.",
		Params: arr{
			ref("parameters", "Offset"),
			ref("parameters", "ListLimit"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the campaigns",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "CampaignList"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Timeout", "Misdirected", "BadPage"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}", ID: "getCampaign",
		Summary: "a campaign's status, counters and settlement",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "CampaignStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "NotFound", "Timeout", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/close", ID: "closeCampaign",
		Summary: "close a campaign now; before it opens this cancels it",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status after closing",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "CampaignStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "Timeout", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/grab", ID: "grab",
		Summary: "grab a packet, at most one per user; retrying returns the same packet",
		Security: arr{
			obj{
				"user": arr{},
			},
		},
		Description: "The body is empty (or {}).",
		Params: arr{
			idParam("campaign id"),
			obj{
				"name":        "receipt",
				"in":          "query",
				"required":    false,
				"description": "true: the answer carries the grant's signed receipt",
				"schema": obj{
					"type": "string",
					"enum": arr{"true", "1"},
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the outcome",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Grab"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "GrabUnavailable", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/grabs", ID: "grabBatch",
		Summary: "grab a packet for each of a batch of users (a gateway's); retrying answers each the same packet",
		Security: arr{
			obj{
				"gateway": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		Description: "The gateway vouches for the users it names: its platform authenticated them. Each user is grabbed as by the single grab (POST /v1/campaigns/{id}/grab): at most one packet each, the same outcomes, the per-user limit, the metrics and the console's counts; the request spends the global budget once. One result per user named, in the request's order; a user named twice is answered as a grab repeated (already_granted with the same packet). A user past the per-user limit is answered error rate_limited and was not grabbed. One bad user id, or more than 1000, refuses the whole batch (400) and nothing is granted. If a grab of the batch fails (busy, outcome_unknown, unavailable) the batch answers that error: other users may have been granted, and retrying the batch answers them already_granted with the same packets.",
		Params: arr{
			idParam("campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "GrabBatchRequest"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "one result per user named, in the request's order",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "GrabBatch"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "GrabUnavailable", "BodyTooLarge", "UserNotGateway", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/grants/me", ID: "myGrant",
		Summary: "my packet of a campaign",
		Security: arr{
			obj{
				"user": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "my packet",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Packet"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "MyGrantBadRequest", "MyGrantNotFound", "Timeout", "Misdirected"},
	},
	{
		Method: "get", Path: "/healthz", ID: "healthz",
		Summary:  "liveness",
		Security: arr{},
		OK: map[string]obj{
			"200": obj{
				"description": "the process is up",
				"content": obj{
					"application/json": obj{
						"schema": obj{
							"type":     "object",
							"required": arr{"status"},
							"properties": obj{
								"status": obj{
									"type": "string",
									"enum": arr{"ok"},
								},
							},
						},
					},
				},
			},
		},
		Errors: []string{"Misdirected"},
	},
	{
		Method: "get", Path: "/readyz", ID: "readyz",
		Summary:     "readiness: Redis answers and takes writes, the replicas --wait-replicas asks for are attached, not shutting down; the ledger's state is reported and does not count",
		Security:    arr{},
		Description: "One reading a second, shared by concurrent callers. Ready means the process can grant: Redis took a write of the deployment's own key, and with --wait-replicas N at least N replicas are attached to the primary. The ledger is read and reported in checks, and an outage of it leaves the process ready: grabs of opened blocks and reads go on, while creates and grabs that need the next block of a pool answer 503 unavailable. While the process stops (--shutdown-delay), 503 with no checks.",
		OK: map[string]obj{
			"200": obj{
				"description": "ready",
				"content": obj{
					"application/json": obj{
						"schema": obj{
							"type":     "object",
							"required": arr{"status", "checks"},
							"properties": obj{
								"status": obj{
									"type": "string",
									"enum": arr{"ready"},
								},
								"checks": ref("schemas", "ReadyChecks"),
							},
						},
					},
				},
			},
		},
		Errors: []string{"ReadyzUnavailable", "Misdirected"},
	},
	{
		Method: "get", Path: "/metrics", ID: "metrics",
		Summary: "Prometheus metrics",
		Security: arr{
			obj{
				"metrics": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "text exposition format",
				"content": obj{
					"text/plain": obj{
						"schema": obj{
							"type": "string",
						},
					},
				},
			},
		},
		Errors: []string{"MetricsUnauthorized", "MetricsRateLimited", "MetricsUnavailable", "Misdirected"},
	},
	{
		Method: "get", Path: "/openapi.json", ID: "openapi",
		Summary:  "this document",
		Security: arr{},
		OK: map[string]obj{
			"200": obj{
				"description": "OpenAPI 3",
				"content": obj{
					"application/json": obj{
						"schema": obj{
							"type": "object",
						},
					},
				},
			},
		},
		Errors: []string{"Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts", ID: "createDiscount",
		Summary: "create a discount campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			obj{
				"name":        "Idempotency-Key",
				"in":          "header",
				"required":    false,
				"description": "makes the create idempotent: the same key and spec answer the same campaign (200)",
				"schema": obj{
					"type":      "string",
					"maxLength": 200,
				},
			},
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "CreateDiscount"),
				},
			},
		},
		OK: map[string]obj{
			"201": obj{
				"description": "created",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Discount"),
					},
				},
			},
			"200": obj{
				"description": "the campaign this Idempotency-Key created before",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Discount"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "CreateDiscountBadRequest", "CreateDiscountConflict", "CreateDiscountUnprocessable", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/discounts", ID: "listDiscounts",
		Summary: "list the registered discount campaigns (created, not yet settled), a page at a time, with their status",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "The discount campaigns created and not yet settled: scheduled, open, and closed ones until settlement has refunded them (a settled campaign leaves the list), by close time, the earliest first. ?offset= and ?limit= (at most 200) choose the page; total counts them all, more says whether pages follow. A discount campaign still loading is left out of its page, which may then hold fewer than limit. Requests for the same page that arrive while one reads Redis share its reading.",
		Params: arr{
			ref("parameters", "Offset"),
			ref("parameters", "ListLimit"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the discount campaigns",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DiscountList"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Timeout", "Misdirected", "BadPage"},
	},
	{
		Method: "get", Path: "/v1/discounts/{id}", ID: "getDiscount",
		Summary: "a discount campaign and its counters",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("discount campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the campaign",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DiscountStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "BadID", "NotFound", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/close", ID: "closeDiscount",
		Summary: "stop reservations now; confirms of reservations held go on until their hold ends",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "The body is empty (or {}). Closing twice changes nothing.",
		Params: arr{
			idParam("discount campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the campaign",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DiscountStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "BadIDOrBody", "NotFound", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/reserve", ID: "reserveDiscount",
		Summary: "reserve a discount for the named user's order; retrying answers the same amount",
		Security: arr{
			obj{
				"payment": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("discount campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "Reserve"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the outcome",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Reservation"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "ReserveDiscountBadRequest", "NotFound", "ReserveDiscountConflict", "UserNotPayment", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/orders/{order_id}/confirm", ID: "confirmDiscount",
		Summary: "make the order's discount final; repeating answers the same",
		Security: arr{
			obj{
				"payment": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		Description: "The body names the user: {\"user_id\":\"u-1\"}.",
		Params: arr{
			idParam("discount campaign id"),
			obj{
				"name":        "order_id",
				"in":          "path",
				"required":    true,
				"description": "the order id given to reserve: 1 to 64 of A-Z a-z 0-9 _ . : -",
				"schema": obj{
					"type":    "string",
					"pattern": "^[A-Za-z0-9_.:-]{1,64}$",
				},
			},
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "OrderUser"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "confirmed",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "OrderOutcome"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "BadOrderOrBody", "NoReservation", "ConfirmDiscountConflict", "UserNotPayment", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/orders/{order_id}/cancel", ID: "cancelDiscount",
		Summary: "release the order's reservation; its amount goes back; repeating answers the same",
		Security: arr{
			obj{
				"payment": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		Description: "The body names the user: {\"user_id\":\"u-1\"}.",
		Params: arr{
			idParam("discount campaign id"),
			obj{
				"name":        "order_id",
				"in":          "path",
				"required":    true,
				"description": "the order id given to reserve: 1 to 64 of A-Z a-z 0-9 _ . : -",
				"schema": obj{
					"type":    "string",
					"pattern": "^[A-Za-z0-9_.:-]{1,64}$",
				},
			},
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "OrderUser"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "cancelled, or expired when the hold had ended first",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "OrderOutcome"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "Busy", "BodyTooLarge", "BadOrderOrBody", "NoReservation", "CancelDiscountConflict", "UserNotPayment", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/events", ID: "campaignEvents",
		Summary: "the campaign's live view, as Server-Sent Events (the console's data)",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "A text/event-stream. While a campaign has viewers, the server reads it from Redis once a second (LiveInterval) and sends every viewer the same event: `tick` (data: LiveView), `stale` when Redis could not be read (data: {campaign, message}; the next tick follows when it can), `gone` when the campaign no longer exists (then the stream ends), `bye` when the server is stopping (reconnect; another process may answer). The outcome counts and amounts are this process's answers to grabs. Browsers read it with fetch() so that the request carries the Authorization header; `curl -N -H 'Authorization: Bearer KEY'` works too.",
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the event stream; each tick's data is a LiveView",
				"content": obj{
					"text/event-stream": obj{
						"schema": obj{
							"type": "string",
						},
					},
					"application/json": obj{
						"schema": ref("schemas", "LiveView"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "NotFound", "CampaignEventsUnavailable", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/redrive", ID: "redrive",
		Summary: "put the campaign's dead grants back into its grants stream, for settlement to try again",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "For an operator who fixed what made them fail (see the settlement worker's log). Each step moves entries in one script, so a grant is never in both streams or in neither. The body is empty (or {}).",
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "how many dead entries moved",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Redrive"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "BodyTooLarge", "Timeout", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/demo", ID: "demo",
		Summary:     "the demo's current campaign",
		Security:    arr{},
		Description: "The demo opens a new campaign when one sells out; the play page follows it. Only in `hongbao demo --web`: a server without the demo mode answers 404.",
		OK: map[string]obj{
			"200": obj{
				"description": "the current campaign",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Demo"),
					},
				},
			},
		},
		Errors:   []string{"RateLimited", "NoDemo", "Misdirected"},
		DemoOnly: true,
	},
	{
		Method: "post", Path: "/v1/demo/token", ID: "demoToken",
		Summary:     "a user token for a new random user, so a person can play without a platform's app",
		Security:    arr{},
		Description: "Anyone who asks gets one. Only in `hongbao demo --web`: a server without the demo mode answers 404. The body is empty (or {}).",
		OK: map[string]obj{
			"200": obj{
				"description": "the token",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DemoToken"),
					},
				},
			},
		},
		Errors:   []string{"DemoTokenBadRequest", "RateLimited", "Internal", "NoDemo", "Misdirected"},
		DemoOnly: true,
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/pause", ID: "pauseCampaign",
		Summary: "pause the campaign: grabs are answered paused until it is resumed",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "The pause is decided by the script that would hand out the packet (discount), from a flag of each shard, so no grab that runs after the flag is written is granted; a user who holds one still gets it. A campaign over several shards is paused shard by shard, its root last, and the call answers once every shard is: while it runs a grab on a shard not yet paused may still be granted; after it answers none is. The window and close apply as ever: a paused campaign closes on time and settles; closing one works. Pausing twice changes nothing. The body is empty (or {}). Pauses and resumes that race leave every shard as the call that started last wants, once all have answered; a call that one started later overtook leaves that call's writes in place and answers the campaign as it finds it, with overtaken true.",
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status after the pause",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "CampaignStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/resume", ID: "resumeCampaign",
		Summary: "resume a paused campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Every shard is resumed, the root first. Resuming a campaign that is not paused changes nothing. The body is empty (or {}). Pauses and resumes that race leave every shard as the call that started last wants, once all have answered; a call that one started later overtook leaves that call's writes in place and answers the campaign as it finds it, with overtaken true.",
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status after the resume",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "CampaignStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/blocked", ID: "listBlocked",
		Summary: "list the users blocked on the campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "A page of the users blocked (?offset=, ?limit= at most 1000), and total, how many are blocked in all. The pages walk the shards in turn, each in the order Redis scans it, and a page's users are sorted by user id (a campaign that blocks no more than limit users answers them all, by user id); each page reads only the shard sizes and its own stretch of the shards. Pages read one after the other list every user once while nobody is blocked or unblocked.",
		Params: arr{
			idParam("campaign id"),
			ref("parameters", "Offset"),
			ref("parameters", "BlockedLimit"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the blocked users",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockedList"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrPage", "NotFound", "OutcomeUnknown", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/blocked", ID: "blockUsers",
		Summary: "block users: their grabs are answered blocked",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Each user is blocked on its home shard, where its grab (reservation) is decided, by the same script call that would hand out the packet (discount): once the call answers, the users are refused. A user who already holds a packet keeps it and is answered already_granted. Blocking a blocked user changes nothing.",
		Params: arr{
			idParam("campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "BlockUsers"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "how many users were newly blocked",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockChange"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadUsers", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/campaigns/{id}/blocked/remove", ID: "unblockUsers",
		Summary: "unblock users",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Unblocking a user who is not blocked changes nothing.",
		Params: arr{
			idParam("campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "BlockUsers"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "how many of the users were blocked",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockChange"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadUsers", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/pause", ID: "pauseDiscount",
		Summary: "pause the discount campaign: reservations of new orders are answered paused until it is resumed",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "The pause is decided by the script that would hand out the packet (discount), from a flag of each shard, so no grab that runs after the flag is written is granted; a user who holds one still gets it. A campaign over several shards is paused shard by shard, its root last, and the call answers once every shard is: while it runs a grab on a shard not yet paused may still be granted; after it answers none is. The window and close apply as ever: a paused campaign closes on time and settles; closing one works. Pausing twice changes nothing. The body is empty (or {}). Confirms and cancels of reservations held go on. Pauses and resumes that race leave every shard as the call that started last wants, once all have answered; a call that one started later overtook leaves that call's writes in place and answers the campaign as it finds it, with overtaken true.",
		Params: arr{
			idParam("discount campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status after the pause",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DiscountStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/resume", ID: "resumeDiscount",
		Summary: "resume a paused discount campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Every shard is resumed, the root first. Resuming a campaign that is not paused changes nothing. The body is empty (or {}). Pauses and resumes that race leave every shard as the call that started last wants, once all have answered; a call that one started later overtook leaves that call's writes in place and answers the campaign as it finds it, with overtaken true.",
		Params: arr{
			idParam("discount campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the status after the resume",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "DiscountStatus"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrBody", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/discounts/{id}/blocked", ID: "listBlockedDiscount",
		Summary: "list the users blocked on the discount campaign",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "A page of the users blocked (?offset=, ?limit= at most 1000), and total, how many are blocked in all. The pages walk the shards in turn, each in the order Redis scans it, and a page's users are sorted by user id (a campaign that blocks no more than limit users answers them all, by user id); each page reads only the shard sizes and its own stretch of the shards. Pages read one after the other list every user once while nobody is blocked or unblocked.",
		Params: arr{
			idParam("discount campaign id"),
			ref("parameters", "Offset"),
			ref("parameters", "BlockedLimit"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the blocked users",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockedList"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadIDOrPage", "NotFound", "OutcomeUnknown", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/blocked", ID: "blockDiscount",
		Summary: "block users: their new orders are answered blocked",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Each user is blocked on its home shard, where its grab (reservation) is decided, by the same script call that would hand out the packet (discount): once the call answers, the users are refused. A user who already holds a packet keeps it and is answered already_granted. Blocking a blocked user changes nothing.",
		Params: arr{
			idParam("discount campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "BlockUsers"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "how many users were newly blocked",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockChange"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadUsers", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "post", Path: "/v1/discounts/{id}/blocked/remove", ID: "unblockDiscount",
		Summary: "unblock users",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Description: "Unblocking a user who is not blocked changes nothing.",
		Params: arr{
			idParam("discount campaign id"),
		},
		Body: obj{
			"required": true,
			"content": obj{
				"application/json": obj{
					"schema": ref("schemas", "BlockUsers"),
				},
			},
		},
		OK: map[string]obj{
			"200": obj{
				"description": "how many of the users were blocked",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "BlockChange"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadUsers", "NotFound", "OutcomeUnknown", "BodyTooLarge", "Misdirected"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/commitment", ID: "commitment",
		Summary: "the campaign's fairness commitment",
		Security: arr{
			obj{
				"user": arr{},
			},
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the commitment",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Commitment"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "Timeout", "Misdirected", "CommitmentNotFound"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/grants/me/proof", ID: "myProof",
		Summary: "the inclusion proof of my packet",
		Security: arr{
			obj{
				"user": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the inclusion proof of my packet",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Proof"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "Timeout", "Misdirected", "MyProofNotFound"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/grants/me/receipt", ID: "myReceipt",
		Summary: "the signed receipt of my packet",
		Security: arr{
			obj{
				"user": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "the signed receipt of my packet",
				"content": obj{
					"application/json": obj{
						"schema": ref("schemas", "Receipt"),
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "ReceiptPending", "Misdirected", "MyReceiptNotFound"},
	},
	{
		Method: "get", Path: "/v1/campaigns/{id}/draw-log", ID: "drawLog",
		Summary: "the campaign's draw log, once closed",
		Security: arr{
			obj{
				"admin": arr{},
			},
		},
		Params: arr{
			idParam("campaign id"),
		},
		OK: map[string]obj{
			"200": obj{
				"description": "one JSON line per packet in seq order: {\"seq\":k,\"cents\":c,\"salt\":\"<hex>\",\"holder\":\"<pseudonym>\"|null,\"granted_at\":\"<RFC 3339>\"|null}",
				"content": obj{
					"application/jsonl": obj{
						"schema": obj{
							"type": "string",
						},
					},
				},
			},
		},
		Errors: []string{"Unauthorized", "RateLimited", "Internal", "BadID", "Timeout", "Misdirected", "DrawLogNotFound", "DrawLogConflict", "DrawLogGone"},
	},
	{
		Method: "get", Path: "/.well-known/jwks.json", ID: "jwks",
		Summary:  "the public keys of the receipts",
		Security: arr{},
		OK: map[string]obj{
			"200": obj{
				"description": "a JSON Web Key Set (RFC 7517) of Ed25519 keys (OKP), each with its kid",
				"content": obj{
					"application/jwk-set+json": obj{
						"schema": obj{
							"type":     "object",
							"required": arr{"keys"},
							"properties": obj{
								"keys": obj{
									"type": "array",
									"items": obj{
										"type": "object",
									},
								},
							},
						},
					},
				},
			},
		},
		Errors: []string{"Misdirected"},
	},
}

// errorResponses are the error answers the routes refer to (components/responses), by name.
var errorResponses = map[string]errorResponse{
	"Misdirected": {"421", obj{
		"description": "a serve bound to loopback was asked under a Host name that is not a loopback one (code misdirected): the guard against DNS rebinding, on every route; a serve on another address never answers it",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"Unauthorized": {"401", obj{
		"description": "missing or bad credentials (code unauthorized)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"RateLimited": {"429", obj{
		"description": "a rate limit (code rate_limited)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"Internal": {"500", obj{
		"description": "internal error (code internal)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CreateCampaignBadRequest": {"400", obj{
		"description": "bad JSON or a bad value (invalid_json, invalid_request)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CreateCampaignConflict": {"409", obj{
		"description": "a create with this Idempotency-Key is loading (in_progress)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"CreateCampaignBodyTooLarge": {"413", obj{
		"description": "body too large",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CreateCampaignUnprocessable": {"422", obj{
		"description": "the Idempotency-Key was used for another spec (idempotency_mismatch)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"ReceiptPending": {"503", obj{
		"description": "the grant is not in the ledger yet (settlement records it, with its time, within moments), or a call to Redis or the ledger ran out of time (unavailable); retry",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"Timeout": {"503", obj{
		"description": "a call to Redis or the ledger ran out of time (unavailable); retry",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"BadPage": {"400", obj{
		"description": "an offset or a limit that is not an integer in its range (invalid_request)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"BadID": {"400", obj{
		"description": "bad id (invalid_id)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"NotFound": {"404", obj{
		"description": "no such campaign (not_found)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"BadIDOrBody": {"400", obj{
		"description": "bad id or a non-empty body",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"BodyTooLarge": {"413", obj{
		"description": "body too large (code body_too_large)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"GrabUnavailable": {"503", obj{
		"description": "the grab queue is full (busy), the answer was lost (outcome_unknown) or a call ran out of time (unavailable); retrying is safe; or this instance is stopping (not_ready): nothing was done, retry on another",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"MyGrantBadRequest": {"400", obj{
		"description": "bad id",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"MyGrantNotFound": {"404", obj{
		"description": "no such campaign (not_found) or no packet (no_grant)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"ReadyzUnavailable": {"503", obj{
		"description": "not ready (not_ready): shutting down (the error alone), or a check failed (the error naming it, and every check's reading)",
		"content": obj{
			"application/json": obj{
				"schema": obj{
					"allOf": arr{
						ref("schemas", "Error"),
						obj{
							"type": "object",
							"properties": obj{
								"status": obj{
									"type": "string",
									"enum": arr{"not_ready"},
								},
								"checks": ref("schemas", "ReadyChecks"),
							},
						},
					},
				},
			},
		},
	}},
	"MetricsUnauthorized": {"401", obj{
		"description": "no metrics key or admin key (code unauthorized)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"MetricsRateLimited": {"429", obj{
		"description": "too many failed authentications from this address (code rate_limited)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"MetricsUnavailable": {"503", obj{
		"description": "too many scrapes at once (plain text, from the Prometheus handler)",
		"content": obj{
			"text/plain": obj{
				"schema": obj{
					"type": "string",
				},
			},
		},
	}},
	"Busy": {"503", obj{
		"description": "the queue is full (busy), the answer was lost (outcome_unknown) or a call ran out of time (unavailable); retrying is safe: every call is idempotent by user and order id",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"CreateDiscountBadRequest": {"400", obj{
		"description": "a bad field, named in the message (invalid_request, invalid_json)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CreateDiscountConflict": {"409", obj{
		"description": "a create with this Idempotency-Key is in progress (in_progress)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"CreateDiscountUnprocessable": {"422", obj{
		"description": "this Idempotency-Key was used for another spec (idempotency_mismatch)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"ReserveDiscountBadRequest": {"400", obj{
		"description": "bad id, order id (invalid_id) or order amount (invalid_request)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"ReserveDiscountConflict": {"409", obj{
		"description": "the order's reservation was cancelled (cancelled) or expired (expired): an order is reserved once; or it was reserved for another order amount (order_mismatch): an order is one request, a new amount needs a new order id",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"UserNotGateway": {"403", obj{
		"description": "a user token: this route takes a gateway key (code forbidden)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"UserNotPayment": {"403", obj{
		"description": "a user token: these routes take the payment system's key (code forbidden)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"BadOrderOrBody": {"400", obj{
		"description": "bad id or order id, or a non-empty body",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"NoReservation": {"404", obj{
		"description": "no such campaign (not_found) or the user holds no such order (no_reservation)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"ConfirmDiscountConflict": {"409", obj{
		"description": "the reservation expired (expired) or was cancelled (cancelled): it can no longer be confirmed",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CancelDiscountConflict": {"409", obj{
		"description": "the order's discount is confirmed (confirmed)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CampaignEventsUnavailable": {"503", obj{
		"description": "too many live views are open (busy), the server is stopping (not_ready), or Redis did not answer in time (unavailable)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"NoDemo": {"404", obj{
		"description": "a server without the demo mode (code not_found)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"DemoTokenBadRequest": {"400", obj{
		"description": "a non-empty body",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"OutcomeUnknown": {"503", obj{
		"description": "the answer was lost (outcome_unknown) or a call ran out of time (unavailable); retrying is safe: the call is idempotent",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
		"headers": obj{
			"Retry-After": obj{
				"description": "seconds to wait before retrying",
				"schema": obj{
					"type": "integer",
				},
			},
		},
	}},
	"BadIDOrPage": {"400", obj{
		"description": "bad id (invalid_id), or an offset or a limit that is not an integer in its range (invalid_request)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"BadUsers": {"400", obj{
		"description": "bad id, or a body that is not 1 to 1000 valid user ids (invalid_request, invalid_id, invalid_json)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"CommitmentNotFound": {"404", obj{
		"description": "no such campaign (not_found) or no commitment (no_commitment)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"MyProofNotFound": {"404", obj{
		"description": "no such campaign (not_found), no packet (no_grant) or no commitment (no_commitment)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"MyReceiptNotFound": {"404", obj{
		"description": "no such campaign (not_found), no packet (no_grant), no receipt key, or a grant settled before grant times were recorded (not_found)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"DrawLogNotFound": {"404", obj{
		"description": "no such campaign (not_found) or no commitment (no_commitment)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"DrawLogConflict": {"409", obj{
		"description": "the campaign is not closed yet (not_closed)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
	"DrawLogGone": {"410", obj{
		"description": "the campaign closed longer ago than the draw log's retention (draw_log_expired)",
		"content": obj{
			"application/json": obj{
				"schema": ref("schemas", "Error"),
			},
		},
	}},
}

// idParam is the path parameter {id} of a campaign's routes; what names
// the kind ("campaign id", "discount campaign id").
func idParam(what string) obj {
	return obj{
		"name":        "id",
		"in":          "path",
		"required":    true,
		"description": what + ": 1 to 64 of A-Z a-z 0-9 _ -",
		"schema": obj{
			"type":    "string",
			"pattern": "^[A-Za-z0-9_-]{1,64}$",
		},
	}
}
