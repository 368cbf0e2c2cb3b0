package server

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/metrics"
	"github.com/parleyim/parley/internal/notify"
	"github.com/parleyim/parley/internal/notify/apns"
	"github.com/parleyim/parley/internal/notify/fcm"
	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/notify/webpush"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/tracing"
)

// newNotifier builds the push notifier and the platforms configured: APNs
// and FCM with their keys, Web Push unless turned off. It returns the VAPID
// public key browsers subscribe with ("" when Web Push is off). APNs and
// FCM go into live, whose credentials a reload replaces.
func newNotifier(cfg Config, st store.Store, secrets auth.Secrets, offline func(chat.Event), live *liveConfig, tr *tracing.Tracer) (*notify.Notifier, string, error) {
	var providers []provider.Provider
	client := func(kind string) *http.Client { return cfg.pushClients[kind] }
	var roots *x509.CertPool
	if cfg.PushCAFile != "" {
		pem, err := os.ReadFile(cfg.PushCAFile)
		if err != nil {
			return nil, "", fmt.Errorf("push_ca_file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("push_ca_file %s: no PEM certificate in it", cfg.PushCAFile)
		}
	}
	live.pushCAs = roots
	if cfg.APNsKeyFile != "" {
		c, err := apnsProvider(cfg, roots)
		if err != nil {
			return nil, "", err
		}
		live.apns = newSwapProvider(c)
		providers = append(providers, live.apns)
	}
	if cfg.FCMCredentialsFile != "" {
		c, err := fcmProvider(cfg, roots)
		if err != nil {
			return nil, "", err
		}
		live.fcm = newSwapProvider(c)
		providers = append(providers, live.fcm)
	}
	webPushKey := ""
	pub, priv := cfg.WebPushVAPIDPublicKey, cfg.WebPushVAPIDPrivateKey
	if pub == "" && !cfg.clustered() {
		pub, priv = secrets.VAPIDPublicKey, secrets.VAPIDPrivateKey
	}
	switch {
	case cfg.WebPushOff:
	case pub == "":
		// Keys generated per node would make a subscription made through
		// one node useless to the others.
		cfg.Logger.Warn("web push is off: a cluster needs webpush_vapid_public_key and webpush_vapid_private_key set, the same on every node")
	default:
		c, err := webpush.New(webpush.Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subject: cfg.WebPushSubject,
			Client: client(provider.WebPush), AllowPrivateEndpoints: cfg.WebPushAllowPrivate, RootCAs: roots})
		if err != nil {
			return nil, "", fmt.Errorf("web push: %w", err)
		}
		providers = append(providers, c)
		webPushKey = pub
	}
	if cfg.PushDelay < time.Second {
		cfg.Logger.Warn("push_delay is below 1s: a group member's delivered acknowledgement is written up to a second after it arrives, so connected members may be pushed too", "push_delay", cfg.PushDelay)
	}
	templates := make(map[string]notify.Template, len(cfg.PushTemplates))
	for ct, t := range cfg.PushTemplates {
		templates[ct] = notify.Template{Title: t.Title, Body: t.Body}
	}
	ncfg := notify.Config{Store: st, Providers: providers, Delay: cfg.PushDelay, Coalesce: cfg.PushCoalesce,
		TTL: cfg.PushTTL, Preview: cfg.PushPreview, Templates: templates, QueueSize: cfg.PushQueue,
		Workers: cfg.PushWorkers, NoBadge: cfg.PushBadgeOff, Offline: offline, Logger: cfg.Logger, Tracer: tr}
	n, err := notify.New(ncfg)
	return n, webPushKey, err
}

// apnsProvider reads cfg's APNs key and makes the APNs client.
func apnsProvider(cfg Config, roots *x509.CertPool) (provider.Provider, error) {
	key, err := os.ReadFile(cfg.APNsKeyFile)
	if err != nil {
		return nil, fmt.Errorf("apns_key_file: %w", err)
	}
	return apns.New(apns.Config{KeyPEM: key, KeyID: cfg.APNsKeyID, TeamID: cfg.APNsTeamID,
		Endpoint: cfg.APNsEndpoint, SandboxEndpoint: cfg.APNsSandboxEndpoint, Client: cfg.pushClients[provider.APNs], RootCAs: roots})
}

// fcmProvider reads cfg's FCM credentials and makes the FCM client.
func fcmProvider(cfg Config, roots *x509.CertPool) (provider.Provider, error) {
	creds, err := os.ReadFile(cfg.FCMCredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("fcm_credentials_file: %w", err)
	}
	return fcm.New(fcm.Config{CredentialsJSON: creds, Endpoint: cfg.FCMEndpoint, Client: cfg.pushClients[provider.FCM], RootCAs: roots})
}

// writePushMetrics writes the push notifier's figures.
func writePushMetrics(w *metrics.Writer, st notify.Stats) {
	w.Counter("parley_push_considered_total", "Stored messages considered for offline push notifications.", float64(st.Considered))
	w.Counter("parley_push_skipped_total", "Stored messages not considered for push: the memory for pending ones was full.", float64(st.SkippedPending))
	w.Counter("parley_push_recipients_checked_total", "Recipients whose devices were checked for a push notification.", float64(st.Decided))
	w.Counter("parley_push_offline_recipients_total", "Recipients named in message.offline webhook events.", float64(st.Offline))
	w.Gauge("parley_push_devices_waiting", "Devices with notifications waiting out the coalescing window.", float64(st.Waiting))
	kind := func(k string, v float64) metrics.Sample {
		return metrics.Sample{Labels: []metrics.Label{{Name: "kind", Value: k}}, Value: v}
	}
	var sent, queued, retrying []metrics.Sample
	var failed []metrics.Sample
	for _, p := range st.Platforms {
		sent = append(sent, kind(p.Kind, float64(p.Sent)))
		queued = append(queued, kind(p.Kind, float64(p.Queued)))
		retrying = append(retrying, kind(p.Kind, float64(p.Retrying)))
		for _, r := range []struct {
			reason string
			v      uint64
		}{{"invalid_target", p.Invalid}, {"rejected", p.Rejected}, {"retries_exhausted", p.Exhausted}, {"queue_full", p.Dropped}} {
			failed = append(failed, metrics.Sample{Labels: []metrics.Label{{Name: "kind", Value: p.Kind}, {Name: "reason", Value: r.reason}}, Value: float64(r.v)})
		}
	}
	w.Family("parley_push_sent_total", "Notifications the platform accepted, by platform.", "counter", sent)
	w.Family("parley_push_failed_total", "Notifications not delivered, by platform and reason (invalid_target: the platform said the device is gone and its target was removed).", "counter", failed)
	w.Family("parley_push_queue", "Notifications waiting for a sender, by platform.", "gauge", queued)
	w.Family("parley_push_retrying", "Notifications waiting to be retried, by platform.", "gauge", retrying)
	for _, p := range st.Platforms {
		w.Histogram("parley_push_request_seconds_"+p.Kind, "Time of one request to "+p.Kind+".", p.Latency)
		w.Histogram("parley_push_delay_seconds_"+p.Kind, "From the message being stored to its notification's first request to "+p.Kind+" (includes push_delay and coalescing).", p.Age)
	}
}
