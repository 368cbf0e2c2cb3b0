// The SDK loads where a runtime lacks TextDecoder (React Native): it is made
// on first use, so an app can install a polyfill after importing the SDK.
import { afterEach, describe, expect, it, vi } from 'vitest';

const saved = globalThis.TextDecoder;
afterEach(() => {
  globalThis.TextDecoder = saved;
  vi.resetModules();
});

describe('a runtime without TextDecoder', () => {
  it('imports the SDK, sends frames, and decodes once a TextDecoder is installed', async () => {
    // @ts-expect-error: taken away, as React Native lacks it
    delete globalThis.TextDecoder;
    vi.resetModules();
    const sdk = await import('../../src/index.js');
    expect(sdk.encodeFrame({ id: 1, ping: {} })).toBe('{"id":1,"ping":{}}');
    expect(sdk.utf8('hé')).toEqual(new Uint8Array([104, 195, 169]));
    expect(() => sdk.text(new Uint8Array([104]))).toThrow();
    globalThis.TextDecoder = saved; // the app's polyfill
    expect(sdk.text(new Uint8Array([104, 195, 169]))).toBe('hé');
  });
});
