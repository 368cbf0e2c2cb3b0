// Message search: what ParleyClient.search hands the app, and the
// conversion of the server's highlights (UTF-8 byte ranges) into ranges of
// the JS string (UTF-16 code units), so an app can slice the snippet
// directly.
import type { Search, SearchCursor, SearchHit, TextRange } from './types.js';

/** What `ParleyClient.search` takes besides the query: every field of the
 *  search frame (filters, `before`, `limit`). */
export type SearchOptions = Omit<Search, 'query'>;

/** A range of a JS string: `snippet.slice(start, end)`. */
export interface StringRange {
  start: number;
  end: number;
}

/** One matching message, with highlights usable on `snippet` as it is. */
export interface SearchMatch {
  conversationId: string;
  seq: number;
  from: string;
  /** Unix milliseconds. */
  serverTime: number;
  /** The text around the match (at most 240 bytes of UTF-8); '' when the
   *  server sent none. */
  snippet: string;
  /** The matched words: [start, end) indexes into `snippet` (UTF-16 code
   *  units, as `slice` and `substring` take), ascending, not overlapping. */
  highlights: StringRange[];
}

/** One page of search results. */
export interface SearchPage {
  /** Newest first. */
  hits: SearchMatch[];
  /** Pass as `before` for the next page; absent at the end. */
  next?: SearchCursor;
}

/** A piece of a snippet: matched (`highlight`) or the text between matches. */
export interface SnippetPart {
  text: string;
  highlight: boolean;
}

/**
 * Converts byte ranges into a string's UTF-8 encoding (as the server gives
 * highlights) into ranges of the string's UTF-16 code units. A bound inside
 * a character widens the range to the whole character; ranges are clamped
 * to the string, and empty ones dropped. The result is sorted, with
 * overlapping ranges merged.
 */
export function utf16Ranges(s: string, byteRanges: readonly TextRange[]): StringRange[] {
  if (byteRanges.length === 0 || s.length === 0) return [];
  // bytes[k], units[k]: where the k-th character starts, in UTF-8 bytes and
  // in code units; the last pair is the end of the string.
  const bytes: number[] = [];
  const units: number[] = [];
  let b = 0;
  for (let i = 0; i < s.length; ) {
    bytes.push(b);
    units.push(i);
    const c = s.charCodeAt(i);
    const next = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      b += 4;
      i += 2;
    } else {
      b += c < 0x80 ? 1 : c < 0x800 ? 2 : 3; // a lone surrogate encodes as U+FFFD: 3 bytes
      i += 1;
    }
  }
  bytes.push(b);
  units.push(s.length);
  // The index of the last character start at or before byte o (binary search).
  const floor = (o: number): number => {
    let lo = 0;
    let hi = bytes.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (bytes[mid]! <= o) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const out: StringRange[] = [];
  for (const r of byteRanges) {
    const start = Math.max(0, r.start ?? 0);
    const end = Math.min(b, r.end ?? 0);
    if (end <= start) continue;
    const si = floor(start);
    let ei = floor(end);
    if (bytes[ei]! < end) ei++; // a bound inside a character takes all of it
    out.push({ start: units[si]!, end: units[ei]! });
  }
  out.sort((x, y) => x.start - y.start || x.end - y.end);
  const merged: StringRange[] = [];
  for (const r of out) {
    const last = merged[merged.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else merged.push({ ...r });
  }
  return merged;
}

/**
 * Splits a snippet into its matched and unmatched pieces, in order, for
 * display (e.g. each highlight in a `<mark>` made with `textContent`).
 * `highlights` are string ranges, as in a {@link SearchMatch}.
 */
export function snippetParts(snippet: string, highlights: readonly StringRange[]): SnippetPart[] {
  const parts: SnippetPart[] = [];
  let at = 0;
  for (const h of [...highlights].sort((x, y) => x.start - y.start)) {
    const start = Math.max(h.start, at);
    const end = Math.min(h.end, snippet.length);
    if (end <= start) continue;
    if (start > at) parts.push({ text: snippet.slice(at, start), highlight: false });
    parts.push({ text: snippet.slice(start, end), highlight: true });
    at = end;
  }
  if (at < snippet.length) parts.push({ text: snippet.slice(at), highlight: false });
  return parts;
}

/** A hit as the SDK hands it out: highlights converted to string ranges. */
export function searchMatch(h: SearchHit): SearchMatch {
  const snippet = h.snippet ?? '';
  return {
    conversationId: h.conversationId,
    seq: h.seq,
    from: h.from ?? '',
    serverTime: h.serverTime ?? 0,
    snippet,
    highlights: utf16Ranges(snippet, h.highlights ?? []),
  };
}
