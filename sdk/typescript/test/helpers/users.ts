import WebSocket from 'ws';
import { ParleyClient, type ClientOptions } from '../../src/client.js';
import { register } from '../../src/http.js';
import type { Message } from '../../src/types.js';
import { uniqueName, type RunningServer } from './server.js';

export interface TestUser {
  id: string;
  token: string;
  password: string;
}

export async function newUser(srv: RunningServer, prefix = 'u'): Promise<TestUser> {
  const name = uniqueName(prefix);
  const password = 'pw-' + name + '-secret';
  const r = await register({ baseUrl: srv.http }, name, password);
  return { id: r.user_id, token: r.token, password };
}

export const clients: ParleyClient[] = [];

/** A client in Node (the `ws` package), closed by closeClients(). */
export function connect(srv: RunningServer, u: TestUser, opts: Partial<ClientOptions> = {}): ParleyClient {
  const c = new ParleyClient({
    url: srv.ws,
    token: u.token,
    deviceId: 'dev-' + u.id,
    deviceType: 'node',
    WebSocket,
    minBackoffMs: 50,
    maxBackoffMs: 500,
    ...opts,
  });
  clients.push(c);
  return c;
}

export function closeClients(): void {
  for (const c of clients.splice(0)) c.close();
}

/** Records every message event of a client. */
export function inbox(c: ParleyClient): Message[] {
  const got: Message[] = [];
  c.on('message', (m) => got.push(m));
  return got;
}
