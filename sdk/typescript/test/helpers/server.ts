// Starts real Parley servers for the integration and browser tests. The
// binary is built once per test run (globalSetup) or taken from PARLEY_BIN.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const repoRoot = resolve(import.meta.dirname, '../../../..');

/** Builds the parley binary into a temp dir; returns its path. */
export function buildParley(): string {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bin-'));
  const bin = join(dir, 'parley');
  const go = process.env.GO ?? (process.env.PATH?.includes('/usr/local/go/bin') ? 'go' : '/usr/local/go/bin/go');
  execFileSync(go, ['build', '-o', bin, './cmd/parley'], { cwd: repoRoot, stdio: 'inherit' });
  return bin;
}

export interface RunningServer {
  http: string; // http://127.0.0.1:PORT
  ws: string; // ws://127.0.0.1:PORT/ws
  port: number;
  dataDir: string;
  /** Stops the process (SIGTERM, then SIGKILL after 5 s). */
  stop(): Promise<void>;
  /** Starts the same server again on the same data directory and port. */
  restart(): Promise<void>;
  /** Stops it and removes its data directory. */
  dispose(): Promise<void>;
  adminKey(): string;
  output(): string;
}

export interface ServerOptions {
  /** YAML for `parley serve --config` (keys: docs/operations.md). */
  config?: string;
  /** Environment variables added to the server's. */
  env?: Record<string, string>;
}

export async function startServer(bin: string, dataDir?: string, opts: ServerOptions = {}): Promise<RunningServer> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'parley-data-'));
  let confDir = '';
  const configArgs: string[] = [];
  if (opts.config !== undefined) {
    confDir = mkdtempSync(join(tmpdir(), 'parley-config-'));
    writeFileSync(join(confDir, 'parley.yaml'), opts.config);
    configArgs.push('--config', join(confDir, 'parley.yaml'));
  }
  let proc: ChildProcess | null = null;
  let out = '';
  let port = 0;

  const launch = (httpAddr: string) =>
    new Promise<void>((resolveStart, reject) => {
      const p = spawn(bin, ['serve', ...configArgs, '--data', dir, '--http', httpAddr, '--tcp', 'off', '--log-level', 'warn'], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...opts.env },
      });
      proc = p;
      const timer = setTimeout(() => {
        p.kill('SIGKILL');
        reject(new Error('parley serve did not start in 20 s:\n' + out));
      }, 20_000);
      const onData = (d: Buffer) => {
        out += d.toString();
        const m = /HTTP API\s+http:\/\/([0-9.]+):(\d+)/.exec(out.slice(-2000));
        if (m && !port) port = Number(m[2]);
        if (m) {
          clearTimeout(timer);
          p.stdout!.off('data', onData);
          p.stdout!.on('data', (x: Buffer) => (out += x.toString()));
          resolveStart();
        }
      };
      p.stdout!.on('data', onData);
      p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      p.on('exit', (code) => {
        clearTimeout(timer);
        if (proc === p) proc = null;
        reject(new Error(`parley serve exited (${code}):\n${out}`));
      });
    });

  const stop = async () => {
    const p = proc as ChildProcess | null;
    if (!p) return;
    proc = null;
    await new Promise<void>((r) => {
      const k = setTimeout(() => p.kill('SIGKILL'), 5_000);
      p.once('exit', () => {
        clearTimeout(k);
        r();
      });
      p.kill('SIGTERM');
    });
  };

  await launch('127.0.0.1:0');
  const s: RunningServer = {
    get http() {
      return `http://127.0.0.1:${port}`;
    },
    get ws() {
      return `ws://127.0.0.1:${port}/ws`;
    },
    get port() {
      return port;
    },
    dataDir: dir,
    stop,
    restart: async () => {
      await stop();
      out = '';
      await launch(`127.0.0.1:${port}`);
    },
    dispose: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
      if (confDir) rmSync(confDir, { recursive: true, force: true });
    },
    adminKey: () => (JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')) as { admin_api_keys: string[] }).admin_api_keys[0]!,
    output: () => out,
  };
  return s;
}

let userSeq = 0;
/** A fresh user name, unique within the run. */
export function uniqueName(prefix: string): string {
  return `${prefix}${Date.now().toString(36).slice(-4)}${++userSeq}`;
}

/** Polls cond until it holds (or throws after timeoutMs). */
export async function waitFor<T>(cond: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await cond();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ': ' + String(last) : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
