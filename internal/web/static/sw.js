// Parley web client's service worker: shows the Web Push notifications the
// server sends while no tab of this browser received the message, and opens
// the conversation when one is clicked. Registered by app.js with scope "/"
// only when the user turns Notifications on.
//
// The push payload is the JSON the server sends by Web Push:
//   {"title", "body", "conversationId", "seq": "<decimal>", "count", "badge"?}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

/** The payload of a push event; {} when there is none or it is not JSON. */
function payloadOf(event) {
  if (!event.data) return {};
  try {
    const p = event.data.json();
    return p && typeof p === 'object' ? p : {};
  } catch {
    return { body: event.data.text() };
  }
}

self.addEventListener('push', (event) => {
  const p = payloadOf(event);
  const conversationId = typeof p.conversationId === 'string' ? p.conversationId : '';
  const title = typeof p.title === 'string' && p.title ? p.title : 'Parley';
  const options = {
    body: typeof p.body === 'string' ? p.body : '',
    // One entry per conversation: a later notification replaces an earlier one.
    tag: conversationId || 'parley',
    renotify: true,
    timestamp: Date.now(),
    data: { conversationId, seq: typeof p.seq === 'string' ? p.seq : '', count: p.count, badge: p.badge },
  };
  event.waitUntil(
    Promise.all([
      self.registration.showNotification(title, options),
      setBadge(p.badge),
    ]),
  );
});

/** The app icon's badge (the user's unread count), where the browser has the Badging API. */
async function setBadge(badge) {
  if (typeof badge !== 'number' || !self.navigator || !('setAppBadge' in self.navigator)) return;
  try {
    if (badge > 0) await self.navigator.setAppBadge(badge);
    else await self.navigator.clearAppBadge();
  } catch {
    // Not installed as an app, or not allowed: the notification is what matters.
  }
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const conversationId = event.notification.data?.conversationId || '';
  event.waitUntil(openConversation(conversationId));
});

/** Focuses an open tab of the client and tells it to open the conversation, or opens a new one at /#c=ID. */
async function openConversation(conversationId) {
  const scope = self.registration.scope;
  const tabs = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const ours = tabs.filter((c) => c.url.startsWith(scope));
  const tab = ours.find((c) => c.focused) || ours.find((c) => c.visibilityState === 'visible') || ours[0];
  if (tab) {
    if (conversationId) tab.postMessage({ type: 'parley.open', conversationId });
    try {
      await tab.focus();
    } catch {
      // Focusing needs the click's user activation; the message is sent anyway.
    }
    return;
  }
  const url = new URL(scope);
  if (conversationId) url.hash = 'c=' + encodeURIComponent(conversationId);
  await self.clients.openWindow(url.href);
}
