// Files (docs/media.md): uploads over HTTP, in one request (POST /v1/files)
// or resumable with tus 1.0.0 at /v1/uploads/ (tus-js-client), and download
// URLs made absolute.
import * as tus from 'tus-js-client';
import { decodeFrame } from './codec.js';
import { badResponse, httpError, networkError, type ParleyError } from './errors.js';

export { httpError };
import type { HttpOptions } from './http.js';
import type { Attachment, ErrorCode } from './types.js';

/** A token, or a function that gives the current one (asked before each request). */
export type TokenSource = string | (() => string | Promise<string>);

export interface UploadOptions {
  /** Told the bytes sent so far and the total (the server holds at least what a resumable upload reports). */
  onProgress?: (sent: number, total: number) => void;
  /** Cancels the upload: the promise rejects with a DOMException named AbortError. */
  signal?: AbortSignal;
}

export interface ResumableOptions extends UploadOptions {
  /** The most bytes sent in one PATCH request. Default 8 MiB. */
  chunkSize?: number;
  /** Continue an upload created earlier (the URL `onCreated` reported): the
   *  server says how much it holds and only the rest is sent. An unknown URL
   *  (another user's, or removed) starts a new upload. */
  uploadUrl?: string;
  /** Told the upload's URL once it exists, to keep for `uploadUrl`. */
  onCreated?: (url: string) => void;
  /** On abort, keep what the server has (to resume later with `uploadUrl`)
   *  instead of deleting the upload. Default false: an abort deletes it. */
  keepOnAbort?: boolean;
  /** Waits (ms) before each retry after a failure that may pass (a dropped
   *  connection, a temporary error); each retry resumes from the server's
   *  offset. Default [0, 1000, 3000, 5000]; the count restarts after progress. */
  retryDelays?: number[];
}

export interface AutoUploadOptions extends ResumableOptions {
  /** Files larger than this go through the resumable endpoint. Default 4 MiB. */
  resumableAbove?: number;
}

/** Files larger than this are uploaded resumably by {@link upload}. */
export const RESUMABLE_ABOVE = 4 << 20;
const DEFAULT_CHUNK = 8 << 20;
/** The header naming the file a finished resumable upload became. */
export const FILE_ID_HEADER = 'Parley-File-Id';

function base(o: HttpOptions): string {
  return (o.baseUrl ?? '').replace(/\/$/, '');
}

async function tokenOf(t: TokenSource): Promise<string> {
  return typeof t === 'function' ? await t() : t;
}

function abortError(): DOMException {
  return new DOMException('The upload was aborted', 'AbortError');
}

function fileName(file: Blob, name?: string): string {
  return name ?? (file as Partial<File>).name ?? 'file';
}

/**
 * Uploads a file in one request (POST /v1/files) and returns it as the
 * server describes it (sniffed type, size, dimensions, thumbnail,
 * placeholder), ready to attach. In browsers the upload reports progress
 * (XMLHttpRequest); elsewhere (fetch) onProgress is told only at the end. A
 * dropped connection loses the upload: large files go through
 * {@link uploadResumable}.
 */
export async function uploadFile(o: HttpOptions, token: TokenSource, file: Blob, name?: string, opts: UploadOptions = {}): Promise<Attachment> {
  if (opts.signal?.aborted) throw abortError();
  const url = base(o) + '/v1/files?name=' + encodeURIComponent(fileName(file, name));
  const auth = 'Bearer ' + (await tokenOf(token));
  if (opts.signal?.aborted) throw abortError();
  let status: number;
  let body: string;
  if (!o.fetch && typeof XMLHttpRequest === 'function') {
    [status, body] = await new Promise<[number, string]>((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', url);
      xhr.setRequestHeader('Authorization', auth);
      xhr.setRequestHeader('Content-Type', 'application/octet-stream');
      const onAbort = () => xhr.abort();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => opts.signal?.removeEventListener('abort', onAbort);
      if (opts.onProgress) {
        const p = opts.onProgress;
        xhr.upload.onprogress = (ev) => p(ev.loaded, file.size);
      }
      xhr.onload = () => {
        done();
        resolve([xhr.status, xhr.responseText]);
      };
      xhr.onerror = () => {
        done();
        reject(networkError('the upload failed: no answer from the server'));
      };
      xhr.onabort = () => {
        done();
        reject(abortError());
      };
      xhr.send(file);
    });
  } else {
    const f = o.fetch ?? globalThis.fetch;
    let res: Response;
    try {
      res = await f(url, {
        method: 'POST',
        headers: { Authorization: auth, 'Content-Type': 'application/octet-stream' },
        body: file,
        signal: opts.signal,
      });
      body = await res.text();
    } catch (err) {
      if (opts.signal?.aborted) throw abortError();
      throw networkError('the upload failed: ' + (err instanceof Error ? err.message : String(err)));
    }
    status = res.status;
  }
  if (status !== 201) throw httpError(status, body);
  const file1 = (decodeFrame(body) as unknown as { file?: Attachment }).file;
  if (!file1?.id) throw badResponse('no file in the answer', status);
  opts.onProgress?.(file.size, file.size);
  return file1;
}

/** Whether this tus-js-client build is Node's (Buffer and stream sources only). */
function nodeTus(): boolean {
  return tus.defaultOptions.httpStack.getName() === 'NodeHttpStack';
}

/** A tus file reader over a Blob for Node, whose HTTP stack sends bytes, not Blobs. */
const blobReader = {
  openFile(input: Blob) {
    return Promise.resolve({
      size: input.size,
      async slice(start: number, end: number) {
        const value = new Uint8Array(await input.slice(start, end).arrayBuffer()) as Uint8Array & { size?: number };
        value.size = value.length; // the Node stack's Content-Length
        return { value, done: end >= input.size };
      },
      close() {},
    });
  },
};

/** Refusals of a server fault (5xx) that a later attempt would meet again. */
const finalRefusals: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'ERROR_CODE_QUOTA_EXCEEDED',
  'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE',
  'ERROR_CODE_TOO_LARGE',
  'ERROR_CODE_BAD_REQUEST',
  'ERROR_CODE_PERMISSION_DENIED',
  'ERROR_CODE_UNAUTHENTICATED',
]);

/** A status the next attempt may pass: a lock, a clash of offsets, a server fault or a temporary refusal. */
function retryStatus(status: number, body: string): boolean {
  if (status === 409 || status === 423 || status === 429) return true;
  if (status < 500) return false;
  return !finalRefusals.has(httpError(status, body).code);
}

function tusFailure(err: Error | tus.DetailedError): Error {
  const res = (err as tus.DetailedError).originalResponse;
  if (res) return httpError(res.getStatus(), res.getBody() ?? '');
  const cause = (err as tus.DetailedError).causingError;
  return networkError('the upload failed: ' + (cause?.message ?? err.message));
}

/**
 * Uploads a file resumably (tus 1.0.0 at /v1/uploads/, with tus-js-client):
 * in chunks, each failed request resumed from the offset the server holds.
 * Resolves with the file's id (and the name and size sent) once the server
 * has accepted it; the message that carries it describes it fully. Refusals
 * reject with a {@link ParleyError} of the server's code
 * (ERROR_CODE_TOO_LARGE, ERROR_CODE_UNSUPPORTED_MEDIA_TYPE,
 * ERROR_CODE_QUOTA_EXCEEDED, …); a failed connection is
 * ERROR_CODE_UNAVAILABLE (temporary, no `status`).
 */
export function uploadResumable(o: HttpOptions, token: TokenSource, file: Blob, name?: string, opts: ResumableOptions = {}): Promise<Attachment> {
  const fname = fileName(file, name);
  return new Promise<Attachment>((resolve, reject) => {
    // tus-js-client resolves the upload's Location against an absolute endpoint.
    const origin = base(o) || globalThis.location?.origin;
    if (!origin) return reject(new TypeError('parley: uploadResumable needs baseUrl outside a browser page'));
    const endpoint = origin + '/v1/uploads/';
    if (opts.signal?.aborted) return reject(abortError());
    let fileId = '';
    let settled = false;
    const finish = (err: Error | null, a?: Attachment) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(a!);
    };
    const options: tus.UploadOptions = {
      endpoint,
      uploadUrl: opts.uploadUrl ?? null,
      metadata: { filename: fname },
      uploadSize: file.size,
      chunkSize: opts.chunkSize ?? DEFAULT_CHUNK,
      retryDelays: opts.retryDelays ?? [0, 1000, 3000, 5000],
      // The app keeps URLs to resume (onCreated/uploadUrl): nothing is
      // written to the browser's storage, where another user of it could find it.
      storeFingerprintForResuming: false,
      removeFingerprintOnSuccess: true,
      onBeforeRequest: async (req) => {
        req.setHeader('Authorization', 'Bearer ' + (await tokenOf(token)));
      },
      onAfterResponse: (_req, res) => {
        const id = res.getHeader(FILE_ID_HEADER);
        if (id) fileId = id;
      },
      onUploadUrlAvailable: () => {
        if (up.url) opts.onCreated?.(up.url);
      },
      onProgress: (sent, total) => opts.onProgress?.(sent, total),
      onShouldRetry: (err) => {
        const res = err.originalResponse;
        return res ? retryStatus(res.getStatus(), res.getBody() ?? '') : true;
      },
      onSuccess: ({ lastResponse }) => {
        const id = lastResponse.getHeader(FILE_ID_HEADER) || fileId;
        if (id) return finish(null, { id, name: fname, size: file.size });
        // The answer naming the file was lost: a HEAD of the finished upload names it.
        void headFileId(o, up.url!, token).then(
          (id2) => finish(null, { id: id2, name: fname, size: file.size }),
          (err: Error) => finish(err),
        );
      },
      onError: (err) => finish(tusFailure(err)),
    };
    if (nodeTus()) options.fileReader = blobReader as unknown as tus.UploadOptions['fileReader'];
    const up = new tus.Upload(file, options);
    function onAbort() {
      void up.abort(!opts.keepOnAbort).catch(() => {});
      finish(abortError());
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    up.start();
  });
}

/** The file a finished resumable upload became (HEAD answers Parley-File-Id). */
async function headFileId(o: HttpOptions, url: string, token: TokenSource): Promise<string> {
  const res = await (o.fetch ?? globalThis.fetch)(url, { method: 'HEAD', headers: { Authorization: 'Bearer ' + (await tokenOf(token)), 'Tus-Resumable': '1.0.0' } });
  const id = res.headers.get(FILE_ID_HEADER);
  if (res.ok && id) return id;
  throw res.ok ? badResponse('the finished upload names no file', res.status) : httpError(res.status, await res.text());
}

/** Uploads with {@link uploadFile}, or {@link uploadResumable} above `resumableAbove` (4 MiB). */
export function upload(o: HttpOptions, token: TokenSource, file: Blob, name?: string, opts: AutoUploadOptions = {}): Promise<Attachment> {
  return file.size > (opts.resumableAbove ?? RESUMABLE_ABOVE) ? uploadResumable(o, token, file, name, opts) : uploadFile(o, token, file, name, opts);
}

/** A file URL as given by fileUrl, made absolute against the server's HTTP origin. */
export function resolveFileUrl(baseUrl: string, url: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(url) || !baseUrl) return url;
  return new URL(url, baseUrl).toString();
}
