// Package provider is what the push-notification dispatcher (internal/notify)
// and the platform clients (internal/notify/apns, fcm, webpush) share: a
// device's target, one notification, and the outcome of one attempt to send
// it. The dispatcher owns retries, queues and target removal; a client makes
// exactly one request per Send and reports what the platform answered.
package provider

import (
	"context"
	"time"
)

// The platforms.
const (
	APNs    = "apns"
	FCM     = "fcm"
	WebPush = "webpush"
)

// Target is where one device is reached.
type Target struct {
	// Kind is APNs, FCM or WebPush.
	Kind string
	// Token: the APNs device token (hex), the FCM registration token, or
	// the Web Push subscription endpoint (an https URL).
	Token string
	// Topic is the APNs topic (the app's bundle id).
	Topic string
	// Sandbox: an APNs development build (the sandbox environment).
	Sandbox bool
	// P256dh and Auth are a Web Push subscription's keys, base64url (with
	// or without padding): the 65-byte P-256 public key and the 16-byte
	// authentication secret.
	P256dh, Auth string
}

// Notification is one notification to one device.
type Notification struct {
	// Title and Body are shown to the user.
	Title, Body string
	// Badge is the user's unread count; negative: leave the badge alone.
	Badge int
	// ConversationID and Seq name the newest message it is about, so the
	// app opens the right place.
	ConversationID string
	Seq            uint64
	// Count is how many messages it stands for (several coalesced: > 1).
	Count int
	// CollapseID lets the platform replace an earlier notification of the
	// same conversation still on screen (apns-collapse-id, FCM collapse_key,
	// Web Push Topic). At most 32 characters of [A-Za-z0-9_-] (the tightest
	// of the three, Web Push's Topic).
	CollapseID string
	// ThreadID groups notifications on the device (APNs thread-id, the FCM
	// android tag): the conversation id.
	ThreadID string
	// TTL is how long the platform keeps it for an unreachable device
	// (apns-expiration, FCM ttl, Web Push TTL). Zero: deliver now or never.
	TTL time.Duration
	// High: deliver at once, waking the device (apns-priority 10, FCM
	// android priority HIGH, Web Push Urgency high); else normal priority.
	High bool
}

// Result is what one attempt came to.
type Result struct {
	// Status is the HTTP status the platform answered; 0 if none (the
	// request failed before an answer).
	Status int
	// Reason is the platform's reason for a refusal ("BadDeviceToken",
	// "Unregistered", "UNREGISTERED", "QUOTA_EXCEEDED", ...), or a short
	// description of a local failure; empty on success.
	Reason string
	// Invalid: the platform says the target no longer exists or never did
	// (APNs 410 or 400 BadDeviceToken, FCM UNREGISTERED or 404, Web Push
	// 404 or 410). The dispatcher removes it and does not retry.
	Invalid bool
	// Retry: a temporary failure (429, 5xx, no answer) worth another try.
	Retry bool
	// RetryAfter is the platform's Retry-After, when it gave one.
	RetryAfter time.Duration
	// Err is set on any failure (nil with a 2xx status).
	Err error
}

// OK reports whether the platform accepted the notification.
func (r Result) OK() bool { return r.Err == nil && r.Status >= 200 && r.Status < 300 }

// Provider sends notifications through one platform. Safe for concurrent use.
type Provider interface {
	// Kind is APNs, FCM or WebPush.
	Kind() string
	// Send makes one request for n to t and reports the answer. It never
	// retries; it returns when ctx ends.
	Send(ctx context.Context, t Target, n *Notification) Result
}
