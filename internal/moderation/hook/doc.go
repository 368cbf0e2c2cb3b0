// Package hook asks the app's HTTP endpoints, synchronously and before a
// message is stored, whether to allow it, reject it, or replace its content
// (the "before-send hook" of moderation).
//
// An app registers hooks: a URL, the event types it wants, a secret, a
// timeout and a failure policy. Hooks.Decide posts an Event to every hook
// registered for its type, in configuration order: the first reject wins
// and ends the chain, a replace feeds the replaced content to the next hook.
// Events of a type no hook wants are allowed without a request (Wants tells
// a caller whether building the Event is worth it).
//
// # Request
//
// One event per request by default (keep-alive connections and, for https,
// HTTP/2 make a request per event cheap); see "Batches" below for the form
// a hook with MaxBatch > 1 gets:
//
//	POST <hook URL>
//	Content-Type: application/json
//	User-Agent: parley-hook/1
//	X-Parley-Timestamp: 1763800000
//	X-Parley-Signature: v1=<hex(HMAC-SHA256(secret, timestamp + "." + body))>
//	Idempotency-Key: alice:m-0001
//
// The timestamp and signature are exactly the webhooks' (the same code:
// package internal/webhook/signature, which webhook.Sign calls; Go receivers
// can use signature.Verify or webhook.Verify): recompute the signature over
// the raw body and refuse old timestamps. Idempotency-Key is present when the event
// has a client message id: the sender and the client message id, each with
// every byte outside A-Z a-z 0-9 "-" "." "_" "~" written as %XX (upper-case
// hex), joined by ":". A client's retry of a send carries the same key, so
// the app can answer it from its own record; so does every hook of a chain.
// The body carries the same value as "idempotency_key" (batches carry one
// per event and no header).
//
// The body is one JSON object:
//
//	{
//	  "type": "message.direct",        // message.direct | message.group | message.edit | group.change
//	  "message_id": "1234567890",      // decimal string; omitted when not yet assigned
//	  "client_msg_id": "m-0001",       // omitted when the event has none
//	  "sender": "alice",
//	  "conversation_id": "p:alice:bob",// omitted when empty
//	  "recipient": "bob",              // message.direct only
//	  "target_seq": "7",               // message.edit: the seq of the message edited
//	  "content_type": "text",
//	  "text": "hello",                 // exactly one of "text" and "payload" (except group.change)
//	  "payload": "aGVsbG8=",
//	  "attachments": [                 // omitted when none
//	    {"id": "f1", "name": "cat.jpg", "size": 48213, "content_type": "image/jpeg"}
//	  ],
//	  "change": {…}                    // group.change only
//	}
//
// The content goes as "text" (a JSON string) when content_type is "text" or
// starts with "text/" and the payload is valid UTF-8; otherwise as "payload",
// base64 with the standard alphabet and padding (RFC 4648 §4). One of the
// two is always present for message events, possibly empty. "change" is the
// group change as the server renders it: the stored entry's kind and event
// in the webhooks' JSON form, {"kind": "MESSAGE_KIND_MEMBERS_ADDED",
// "event": {"userIds": ["carol"]}}. Unknown fields may be added later;
// receivers must ignore them.
//
// # Answer
//
// A 2xx status and a JSON object of at most HookConfig.MaxAnswerBytes
// (64 KiB by default); fields not listed are ignored:
//
//	{"action": "allow"}
//	{"action": "reject", "code": "spam", "reason": "Links are not allowed here"}
//	{"action": "replace", "content_type": "text", "text": "I *** you"}
//	{"action": "replace", "payload": "<base64>"}
//
// reject: "code" is 1-64 bytes of [a-z0-9_], not starting with "hook_"
// (Parley's own codes, such as CodeUnavailable, start so); "reason" is
// optional, at most 256 bytes, and is shown to the sender.
//
// replace: at least one of "content_type" (1-64 bytes), "text" and
// "payload" (base64 as above), never both "text" and "payload"; what is
// omitted keeps its current value. Not valid for group.change, which has
// no content. The caller still applies its own limits (payload size) to
// the replaced content.
//
// Anything else is a malformed answer: another status (redirects are not
// followed), a larger body, invalid JSON, an unknown action, a field out of
// the rules above.
//
// # Batches
//
// A hook with MaxBatch > 1 gets every request in the batch form: a JSON
// object {"events": [ … ]} holding 1 to MaxBatch event objects as above
// (fewer when their payloads pass 1 MiB),
// with the header X-Parley-Batch: <count> and no Idempotency-Key header
// (each event carries its key as "idempotency_key", which single requests
// carry too). It answers {"decisions": [ … ]}: one answer object as above
// per event, in the same order. A wrong count is a malformed answer for
// every event of the request; one malformed decision fails only its event.
// MaxAnswerBytes applies per decision (the body may be MaxBatch times it).
// Batches form only under load: a call that finds a request slot free is
// sent at once, alone or with whatever queued while every slot was busy,
// so no call waits for a batch to fill.
//
// # Failures, policy and circuit breaker
//
// A call fails when it times out (HookConfig.Timeout, 500 ms by default,
// counted from the start of the call: a request carries the earliest
// deadline of its calls), when it waited in its hook's queue for its whole
// timeout without a request being free for it (no_slot: it is then
// answered when a sender next looks at the queue, so at worst about one
// timeout late), when the request fails (connection refused, reset, TLS),
// or when the answer is malformed. The hook's Policy then decides for it:
// FailOpen allows (the chain goes on), FailClosed rejects with
// CodeUnavailable, which the caller reports to the sender as a temporary
// error to retry. Decision.Failure names what went wrong; every failure is
// counted in Stats.
//
// Each hook has a circuit breaker (github.com/sony/gobreaker/v2): after
// FailureThreshold consecutive failures (5 by default) it opens and calls
// are not made, the Policy answering at once, for BreakerCooldown (5 s by
// default); then one probe request is let through (half-open): success
// closes the breaker, failure opens it again. Opening after a closed spell
// is logged at warn level with the last failure, closing at info level;
// the half-open probes in between at debug level only.
//
// When the caller of Decide gives up first (its ctx ends), Decide returns
// its error and no decision; its call is dropped if no request has carried
// it yet (counted as canceled), else the answer is discarded. A request
// is never cut short for a caller that left: it carries other calls.
//
// # Concurrency
//
// No goroutine waits per call. Each hook queues its calls; a call that
// finds fewer than MaxInFlight (256 by default) goroutines sending that
// hook's requests starts one, and each sender takes what is queued — one
// call, or with MaxBatch > 1 up to MaxBatch calls in one request — sends
// it, answers its calls, and goes on until the queue is empty. So at most
// MaxInFlight requests are in flight per hook, requests carry several
// calls only while every sender is busy, and DecideAsync's callbacks run
// on the senders (Decide is DecideAsync and a wait). Each hook has its own
// HTTP transport keeping up to MaxInFlight idle connections to the hook,
// speaking HTTP/2 to https URLs.
//
// # Retries
//
// A client that does not get its SendAck retries with the same client
// message id. The store de-duplicates what it already holds; DecisionCache
// covers the rest: a retry that arrives while the first attempt is being
// decided waits for that decision (one request per key at a time), and a
// retry that arrives later, before the message is stored or after the first
// attempt failed to store it, gets the first decision from the cache for
// MaxAge (10 minutes by default). So a retried client message id gets the
// first decision and the hooks are not asked again, with three exceptions:
// a FailClosed rejection is a temporary error the client is told to retry,
// so it is not kept and the retry asks again; a retry whose content differs
// from the first attempt's is decided afresh (else the first, allowed
// content would vouch for another); and an entry evicted for room (the
// cache is bounded by entries and bytes) or kept by another node of a
// cluster is not there. In every case the retry carries the same
// Idempotency-Key.
package hook
