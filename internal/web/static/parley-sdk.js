// Parley TypeScript SDK, bundled for browsers. Generated from sdk/typescript/src
// by `npm run bundle` in sdk/typescript; do not edit.
var __create = Object.create;
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __getProtoOf = Object.getPrototypeOf;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __commonJS = (cb, mod) => function __require() {
  try {
    return mod || (0, cb[__getOwnPropNames(cb)[0]])((mod = { exports: {} }).exports, mod), mod.exports;
  } catch (e) {
    throw mod = 0, e;
  }
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
        __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
  }
  return to;
};
var __toESM = (mod, isNodeMode, target) => (target = mod != null ? __create(__getProtoOf(mod)) : {}, __copyProps(
  // If the importer is in node compatibility mode or this is not an ESM
  // file that has been converted to a CommonJS file using a Babel-
  // compatible transform (i.e. "__esModule" has not been set), then set
  // "default" to the CommonJS "module.exports" for node compatibility.
  isNodeMode || !mod || !mod.__esModule ? __defProp(target, "default", { value: mod, enumerable: true }) : target,
  mod
));
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// node_modules/requires-port/index.js
var require_requires_port = __commonJS({
  "node_modules/requires-port/index.js"(exports, module) {
    "use strict";
    module.exports = function required(port, protocol) {
      protocol = protocol.split(":")[0];
      port = +port;
      if (!port) return false;
      switch (protocol) {
        case "http":
        case "ws":
          return port !== 80;
        case "https":
        case "wss":
          return port !== 443;
        case "ftp":
          return port !== 21;
        case "gopher":
          return port !== 70;
        case "file":
          return false;
      }
      return port !== 0;
    };
  }
});

// node_modules/querystringify/index.js
var require_querystringify = __commonJS({
  "node_modules/querystringify/index.js"(exports) {
    "use strict";
    var has = Object.prototype.hasOwnProperty;
    var undef;
    function decode2(input) {
      try {
        return decodeURIComponent(input.replace(/\+/g, " "));
      } catch (e) {
        return null;
      }
    }
    function encode2(input) {
      try {
        return encodeURIComponent(input);
      } catch (e) {
        return null;
      }
    }
    function querystring(query) {
      var parser = /([^=?#&]+)=?([^&]*)/g, result = {}, part;
      while (part = parser.exec(query)) {
        var key = decode2(part[1]), value = decode2(part[2]);
        if (key === null || value === null || key in result) continue;
        result[key] = value;
      }
      return result;
    }
    function querystringify(obj, prefix) {
      prefix = prefix || "";
      var pairs = [], value, key;
      if ("string" !== typeof prefix) prefix = "?";
      for (key in obj) {
        if (has.call(obj, key)) {
          value = obj[key];
          if (!value && (value === null || value === undef || isNaN(value))) {
            value = "";
          }
          key = encode2(key);
          value = encode2(value);
          if (key === null || value === null) continue;
          pairs.push(key + "=" + value);
        }
      }
      return pairs.length ? prefix + pairs.join("&") : "";
    }
    exports.stringify = querystringify;
    exports.parse = querystring;
  }
});

// node_modules/url-parse/index.js
var require_url_parse = __commonJS({
  "node_modules/url-parse/index.js"(exports, module) {
    "use strict";
    var required = require_requires_port();
    var qs = require_querystringify();
    var controlOrWhitespace = /^[\x00-\x20\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+/;
    var CRHTLF = /[\n\r\t]/g;
    var slashes = /^[A-Za-z][A-Za-z0-9+-.]*:\/\//;
    var port = /:\d+$/;
    var protocolre = /^([a-z][a-z0-9.+-]*:)?(\/\/)?([\\/]+)?([\S\s]*)/i;
    var windowsDriveLetter = /^[a-zA-Z]:/;
    function trimLeft(str) {
      return (str ? str : "").toString().replace(controlOrWhitespace, "");
    }
    var rules = [
      ["#", "hash"],
      // Extract from the back.
      ["?", "query"],
      // Extract from the back.
      function sanitize(address, url) {
        return isSpecial(url.protocol) ? address.replace(/\\/g, "/") : address;
      },
      ["/", "pathname"],
      // Extract from the back.
      ["@", "auth", 1],
      // Extract from the front.
      [NaN, "host", void 0, 1, 1],
      // Set left over value.
      [/:(\d*)$/, "port", void 0, 1],
      // RegExp the back.
      [NaN, "hostname", void 0, 1, 1]
      // Set left over.
    ];
    var ignore = { hash: 1, query: 1 };
    function lolcation(loc) {
      var globalVar;
      if (typeof window !== "undefined") globalVar = window;
      else if (typeof global !== "undefined") globalVar = global;
      else if (typeof self !== "undefined") globalVar = self;
      else globalVar = {};
      var location = globalVar.location || {};
      loc = loc || location;
      var finaldestination = {}, type = typeof loc, key;
      if ("blob:" === loc.protocol) {
        finaldestination = new Url(unescape(loc.pathname), {});
      } else if ("string" === type) {
        finaldestination = new Url(loc, {});
        for (key in ignore) delete finaldestination[key];
      } else if ("object" === type) {
        for (key in loc) {
          if (key in ignore) continue;
          finaldestination[key] = loc[key];
        }
        if (finaldestination.slashes === void 0) {
          finaldestination.slashes = slashes.test(loc.href);
        }
      }
      return finaldestination;
    }
    function isSpecial(scheme) {
      return scheme === "file:" || scheme === "ftp:" || scheme === "http:" || scheme === "https:" || scheme === "ws:" || scheme === "wss:";
    }
    function extractProtocol(address, location) {
      address = trimLeft(address);
      address = address.replace(CRHTLF, "");
      location = location || {};
      var match = protocolre.exec(address);
      var protocol = match[1] ? match[1].toLowerCase() : "";
      var forwardSlashes = !!match[2];
      var otherSlashes = !!match[3];
      var slashesCount = 0;
      var rest;
      if (forwardSlashes) {
        if (otherSlashes) {
          rest = match[2] + match[3] + match[4];
          slashesCount = match[2].length + match[3].length;
        } else {
          rest = match[2] + match[4];
          slashesCount = match[2].length;
        }
      } else {
        if (otherSlashes) {
          rest = match[3] + match[4];
          slashesCount = match[3].length;
        } else {
          rest = match[4];
        }
      }
      if (protocol === "file:") {
        if (slashesCount >= 2) {
          rest = rest.slice(2);
        }
      } else if (isSpecial(protocol)) {
        rest = match[4];
      } else if (protocol) {
        if (forwardSlashes) {
          rest = rest.slice(2);
        }
      } else if (slashesCount >= 2 && isSpecial(location.protocol)) {
        rest = match[4];
      }
      return {
        protocol,
        slashes: forwardSlashes || isSpecial(protocol),
        slashesCount,
        rest
      };
    }
    function resolve(relative, base2) {
      if (relative === "") return base2;
      var path = (base2 || "/").split("/").slice(0, -1).concat(relative.split("/")), i = path.length, last = path[i - 1], unshift = false, up = 0;
      while (i--) {
        if (path[i] === ".") {
          path.splice(i, 1);
        } else if (path[i] === "..") {
          path.splice(i, 1);
          up++;
        } else if (up) {
          if (i === 0) unshift = true;
          path.splice(i, 1);
          up--;
        }
      }
      if (unshift) path.unshift("");
      if (last === "." || last === "..") path.push("");
      return path.join("/");
    }
    function Url(address, location, parser) {
      address = trimLeft(address);
      address = address.replace(CRHTLF, "");
      if (!(this instanceof Url)) {
        return new Url(address, location, parser);
      }
      var relative, extracted, parse, instruction, index, key, instructions = rules.slice(), type = typeof location, url = this, i = 0;
      if ("object" !== type && "string" !== type) {
        parser = location;
        location = null;
      }
      if (parser && "function" !== typeof parser) parser = qs.parse;
      location = lolcation(location);
      extracted = extractProtocol(address || "", location);
      relative = !extracted.protocol && !extracted.slashes;
      url.slashes = extracted.slashes || relative && location.slashes;
      url.protocol = extracted.protocol || location.protocol || "";
      address = extracted.rest;
      if (extracted.protocol === "file:" && (extracted.slashesCount !== 2 || windowsDriveLetter.test(address)) || !extracted.slashes && (extracted.protocol || extracted.slashesCount < 2 || !isSpecial(url.protocol))) {
        instructions[3] = [/(.*)/, "pathname"];
      }
      for (; i < instructions.length; i++) {
        instruction = instructions[i];
        if (typeof instruction === "function") {
          address = instruction(address, url);
          continue;
        }
        parse = instruction[0];
        key = instruction[1];
        if (parse !== parse) {
          url[key] = address;
        } else if ("string" === typeof parse) {
          index = parse === "@" ? address.lastIndexOf(parse) : address.indexOf(parse);
          if (~index) {
            if ("number" === typeof instruction[2]) {
              url[key] = address.slice(0, index);
              address = address.slice(index + instruction[2]);
            } else {
              url[key] = address.slice(index);
              address = address.slice(0, index);
            }
          }
        } else if (index = parse.exec(address)) {
          url[key] = index[1];
          address = address.slice(0, index.index);
        }
        url[key] = url[key] || (relative && instruction[3] ? location[key] || "" : "");
        if (instruction[4]) url[key] = url[key].toLowerCase();
      }
      if (parser) url.query = parser(url.query);
      if (relative && location.slashes && url.pathname.charAt(0) !== "/" && (url.pathname !== "" || location.pathname !== "")) {
        url.pathname = resolve(url.pathname, location.pathname);
      }
      if (url.pathname.charAt(0) !== "/" && isSpecial(url.protocol)) {
        url.pathname = "/" + url.pathname;
      }
      if (!required(url.port, url.protocol)) {
        url.host = url.hostname;
        url.port = "";
      }
      url.username = url.password = "";
      if (url.auth) {
        index = url.auth.indexOf(":");
        if (~index) {
          url.username = url.auth.slice(0, index);
          url.username = encodeURIComponent(decodeURIComponent(url.username));
          url.password = url.auth.slice(index + 1);
          url.password = encodeURIComponent(decodeURIComponent(url.password));
        } else {
          url.username = encodeURIComponent(decodeURIComponent(url.auth));
        }
        url.auth = url.password ? url.username + ":" + url.password : url.username;
      }
      url.origin = url.protocol !== "file:" && isSpecial(url.protocol) && url.host ? url.protocol + "//" + url.host : "null";
      url.href = url.toString();
    }
    function set(part, value, fn) {
      var url = this;
      switch (part) {
        case "query":
          if ("string" === typeof value && value.length) {
            value = (fn || qs.parse)(value);
          }
          url[part] = value;
          break;
        case "port":
          url[part] = value;
          if (!required(value, url.protocol)) {
            url.host = url.hostname;
            url[part] = "";
          } else if (value) {
            url.host = url.hostname + ":" + value;
          }
          break;
        case "hostname":
          url[part] = value;
          if (url.port) value += ":" + url.port;
          url.host = value;
          break;
        case "host":
          url[part] = value;
          if (port.test(value)) {
            value = value.split(":");
            url.port = value.pop();
            url.hostname = value.join(":");
          } else {
            url.hostname = value;
            url.port = "";
          }
          break;
        case "protocol":
          url.protocol = value.toLowerCase();
          url.slashes = !fn;
          break;
        case "pathname":
        case "hash":
          if (value) {
            var char = part === "pathname" ? "/" : "#";
            url[part] = value.charAt(0) !== char ? char + value : value;
          } else {
            url[part] = value;
          }
          break;
        case "username":
        case "password":
          url[part] = encodeURIComponent(value);
          break;
        case "auth":
          var index = value.indexOf(":");
          if (~index) {
            url.username = value.slice(0, index);
            url.username = encodeURIComponent(decodeURIComponent(url.username));
            url.password = value.slice(index + 1);
            url.password = encodeURIComponent(decodeURIComponent(url.password));
          } else {
            url.username = encodeURIComponent(decodeURIComponent(value));
          }
      }
      for (var i = 0; i < rules.length; i++) {
        var ins = rules[i];
        if (ins[4]) url[ins[1]] = url[ins[1]].toLowerCase();
      }
      url.auth = url.password ? url.username + ":" + url.password : url.username;
      url.origin = url.protocol !== "file:" && isSpecial(url.protocol) && url.host ? url.protocol + "//" + url.host : "null";
      url.href = url.toString();
      return url;
    }
    function toString(stringify) {
      if (!stringify || "function" !== typeof stringify) stringify = qs.stringify;
      var query, url = this, host = url.host, protocol = url.protocol;
      if (protocol && protocol.charAt(protocol.length - 1) !== ":") protocol += ":";
      var result = protocol + (url.protocol && url.slashes || isSpecial(url.protocol) ? "//" : "");
      if (url.username) {
        result += url.username;
        if (url.password) result += ":" + url.password;
        result += "@";
      } else if (url.password) {
        result += ":" + url.password;
        result += "@";
      } else if (url.protocol !== "file:" && isSpecial(url.protocol) && !host && url.pathname !== "/") {
        result += "@";
      }
      if (host[host.length - 1] === ":" || port.test(url.hostname) && !url.port) {
        host += ":";
      }
      result += host + url.pathname;
      query = "object" === typeof url.query ? stringify(url.query) : url.query;
      if (query) result += "?" !== query.charAt(0) ? "?" + query : query;
      if (url.hash) result += url.hash;
      return result;
    }
    Url.prototype = { set, toString };
    Url.extractProtocol = extractProtocol;
    Url.location = lolcation;
    Url.trimLeft = trimLeft;
    Url.qs = qs;
    module.exports = Url;
  }
});

// src/codec.ts
var NUMERIC = /* @__PURE__ */ new Set([
  "seq",
  "lastSeq",
  "deliveredSeq",
  "readSeq",
  "unreadCount",
  "peerDeliveredSeq",
  "peerReadSeq",
  "clearedSeq",
  "leftSeq",
  "targetSeq",
  "serverTime",
  "editedAt",
  "mutedUntil",
  "createdAt",
  "joinedAt",
  "lastSeen",
  "updatedAt",
  "size",
  "durationMs",
  "expiresAt",
  "replyTo",
  "threadRoot",
  "lastReplySeq",
  "lastReplyAt",
  "reactionVersion",
  "version",
  "pinnedAt",
  "firstSeq",
  "epoch"
]);
var BYTES = /* @__PURE__ */ new Set(["payload", "body", "snippet", "mlsWelcome", "keyPackage"]);
var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
var B64_INDEX = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < B64.length; i++) t[B64.charCodeAt(i)] = i;
  t["-".charCodeAt(0)] = 62;
  t["_".charCodeAt(0)] = 63;
  return t;
})();
function toBase64(b) {
  let out = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = b[i] << 16 | b[i + 1] << 8 | b[i + 2];
    out += B64[n >> 18] + B64[n >> 12 & 63] + B64[n >> 6 & 63] + B64[n & 63];
  }
  if (i < b.length) {
    const n = b[i] << 16 | (i + 1 < b.length ? b[i + 1] : 0) << 8;
    out += B64[n >> 18] + B64[n >> 12 & 63] + (i + 1 < b.length ? B64[n >> 6 & 63] : "=") + "=";
  }
  return out;
}
function toBase64Url(b) {
  return toBase64(b).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function fromBase64(s) {
  let len2 = s.length;
  while (len2 > 0 && s.charCodeAt(len2 - 1) === 61) len2--;
  const out = new Uint8Array(Math.floor(len2 * 3 / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let i = 0; i < len2; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? B64_INDEX[c] : -1;
    if (v < 0) throw new Error("parley: invalid base64");
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = acc >> bits & 255;
    }
  }
  return out.subarray(0, o);
}
var enc;
var dec;
function utf8(s) {
  return (enc ?? (enc = new TextEncoder())).encode(s);
}
function text(b) {
  return b ? (dec ?? (dec = new TextDecoder())).decode(b) : "";
}
function encodeFrame(f) {
  return JSON.stringify(f, (_k, v) => v instanceof Uint8Array ? toBase64(v) : v);
}
function decodeFrame(data) {
  const f = JSON.parse(data, function(k, v) {
    if (typeof v === "string") {
      if (NUMERIC.has(k)) return Number(v);
      if (BYTES.has(k) && !(k === "snippet" && "conversationId" in this)) return fromBase64(v);
    } else if (k === "seqs" && Array.isArray(v)) {
      return v.map(Number);
    }
    return v;
  });
  if (typeof f.id === "string") f.id = Number(f.id);
  return f;
}

// src/errors.ts
var ParleyError = class extends Error {
  constructor(code, message, temporary, status, details = {}) {
    const reason = details.reason ?? "";
    const rejectCode = details.rejectCode ?? "";
    const apiCode = details.apiCode ?? "";
    const what = apiCode && apiCode !== apiCodeOf(code) ? `${code} (${apiCode})` : code;
    super(
      reason || rejectCode ? `parley: ${what}${rejectCode ? " (" + rejectCode + ")" : ""}${reason ? ": " + reason : ""}` : `parley: ${what}${message ? ": " + message : ""}`
    );
    /**
     * The protocol's code. (A server newer than this SDK may send one this
     * type does not list yet.)
     */
    __publicField(this, "code");
    /**
     * For an HTTP answer: the `code` of its error body as the server wrote it
     * (`conflict`, `invalid_credentials`, `not_found`, ...), which tells apart
     * refusals that share an ERROR_CODE (`invalid_credentials` and
     * `unauthenticated` are both ERROR_CODE_UNAUTHENTICATED). '' for socket
     * errors and for answers without such a body.
     */
    __publicField(this, "apiCode");
    /**
     * Whether the same request may succeed later, as the server said
     * (`temporary` in the frame or body); undefined from servers that do not
     * send it. {@link isTemporary} falls back to the code then.
     */
    __publicField(this, "temporary");
    /** The HTTP status of an HTTP answer (uploads, accounts, rpc); undefined for socket frames. */
    __publicField(this, "status");
    /**
     * For ERROR_CODE_REJECTED: the text the app's
     * moderation wants the sender to see; '' when it gave none (the word
     * filter gives none). Show it rather than a generic failure.
     */
    __publicField(this, "reason");
    /**
     * For ERROR_CODE_REJECTED: the app's code for the rule that refused the
     * message ("word_filter" for the built-in word filter, the hook's own code
     * otherwise); '' for other errors.
     */
    __publicField(this, "rejectCode");
    this.name = "ParleyError";
    this.code = code;
    this.apiCode = apiCode;
    this.temporary = temporary;
    this.status = status;
    this.reason = reason;
    this.rejectCode = rejectCode;
  }
};
var temporaryCodes = /* @__PURE__ */ new Set(["ERROR_CODE_UNAVAILABLE", "ERROR_CODE_TOO_MANY_REQUESTS"]);
var apiCodes = new Map(
  Object.entries({
    bad_request: "ERROR_CODE_BAD_REQUEST",
    unauthenticated: "ERROR_CODE_UNAUTHENTICATED",
    permission_denied: "ERROR_CODE_PERMISSION_DENIED",
    too_many_requests: "ERROR_CODE_TOO_MANY_REQUESTS",
    unavailable: "ERROR_CODE_UNAVAILABLE",
    internal: "ERROR_CODE_INTERNAL",
    too_large: "ERROR_CODE_TOO_LARGE",
    muted: "ERROR_CODE_MUTED",
    recall_window_passed: "ERROR_CODE_RECALL_WINDOW_PASSED",
    group_full: "ERROR_CODE_GROUP_FULL",
    conflict: "ERROR_CODE_CONFLICT",
    quota_exceeded: "ERROR_CODE_QUOTA_EXCEEDED",
    unsupported_media_type: "ERROR_CODE_UNSUPPORTED_MEDIA_TYPE",
    rejected: "ERROR_CODE_REJECTED",
    no_such_user: "ERROR_CODE_NO_SUCH_USER",
    mls_stale_epoch: "ERROR_CODE_MLS_STALE_EPOCH",
    mls_required: "ERROR_CODE_MLS_REQUIRED",
    mls_invalid: "ERROR_CODE_MLS_INVALID",
    // Codes of particular endpoints.
    invalid_credentials: "ERROR_CODE_UNAUTHENTICATED",
    // login, password change
    registration_disabled: "ERROR_CODE_PERMISSION_DENIED",
    // register
    user_disabled: "ERROR_CODE_PERMISSION_DENIED",
    // admin tokens
    body_too_large: "ERROR_CODE_TOO_LARGE",
    // a request body over its limit (413)
    not_found: "ERROR_CODE_PERMISSION_DENIED"
    // a feature turned off (Web Push), an unknown admin resource (404)
  })
);
function apiCodeOf(code) {
  return code.replace(/^ERROR_CODE_/, "").toLowerCase();
}
function errorCodeOfApi(apiCode, status) {
  const known = apiCodes.get(apiCode);
  if (known) return known;
  switch (status) {
    case 400:
      return "ERROR_CODE_BAD_REQUEST";
    case 401:
      return "ERROR_CODE_UNAUTHENTICATED";
    case 403:
    case 404:
      return "ERROR_CODE_PERMISSION_DENIED";
    case 409:
      return "ERROR_CODE_CONFLICT";
    case 413:
      return "ERROR_CODE_TOO_LARGE";
    case 415:
      return "ERROR_CODE_UNSUPPORTED_MEDIA_TYPE";
    case 429:
      return "ERROR_CODE_TOO_MANY_REQUESTS";
    case 502:
    case 503:
    case 504:
      return "ERROR_CODE_UNAVAILABLE";
    case 507:
      return "ERROR_CODE_QUOTA_EXCEEDED";
  }
  return status >= 500 ? "ERROR_CODE_INTERNAL" : "ERROR_CODE_BAD_REQUEST";
}
function httpError(status, body) {
  let apiCode = "";
  let message = "";
  let temporary;
  const details = {};
  try {
    const j = JSON.parse(body);
    const e = j.error ?? {};
    if (typeof e.code === "string") apiCode = e.code;
    if (typeof e.message === "string") message = e.message;
    if (typeof e.temporary === "boolean") temporary = e.temporary;
    if (typeof e.reason === "string") details.reason = e.reason;
    if (typeof e.reject_code === "string") details.rejectCode = e.reject_code;
  } catch {
    const m = /^([a-z_]+): (.*)$/s.exec(body.trim());
    if (m) [, apiCode, message] = m;
    else message = body.trim().slice(0, 200);
  }
  details.apiCode = apiCode;
  temporary ?? (temporary = status === 503 || status === 429);
  return new ParleyError(errorCodeOfApi(apiCode, status), message, temporary, status, details);
}
function networkError(message) {
  return new ParleyError("ERROR_CODE_UNAVAILABLE", message, true);
}
function badResponse(message, status) {
  return new ParleyError("ERROR_CODE_INTERNAL", message, false, status);
}
function isTemporary(err) {
  if (!(err instanceof ParleyError)) return false;
  return err.temporary ?? temporaryCodes.has(err.code);
}
var DisconnectError = class extends Error {
  constructor(code, reason = "", reconnectAfterMs = 0) {
    super(`parley: disconnected: ${code}${reason ? " (" + reason + ")" : ""}`);
    __publicField(this, "code");
    __publicField(this, "reason");
    __publicField(this, "reconnectAfterMs");
    this.name = "DisconnectError";
    this.code = code;
    this.reason = reason;
    this.reconnectAfterMs = reconnectAfterMs;
  }
};
var ClosedError = class extends Error {
  constructor(message = "parley: connection closed") {
    super(message);
    this.name = "ClosedError";
  }
};
var TimeoutError = class extends Error {
  constructor(message = "parley: request timed out") {
    super(message);
    this.name = "TimeoutError";
  }
};
function isCode(err, code) {
  return err instanceof ParleyError && err.code === code;
}

// src/connection.ts
var OPEN = 1;
var DEFAULT_MAX_FRAME_BYTES = 65536;
function utf8Length(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 128) continue;
    if (c < 2048) {
      n += 1;
      continue;
    }
    n += 2;
    const next = s.charCodeAt(i + 1);
    if (c >= 55296 && c <= 56319 && next >= 56320 && next <= 57343) i++;
  }
  return n;
}
function frameTooLarge(bytes, limit) {
  return new ParleyError("ERROR_CODE_TOO_LARGE", `the request is ${bytes} bytes, over the server's frame limit of ${limit}`, false);
}
var Connection = class _Connection {
  constructor(url, ws, opts) {
    __publicField(this, "url");
    __publicField(this, "authOk");
    /**
     * The largest frame the server accepts (AuthOk.maxFrameBytes). A request
     * over it fails with ParleyError ERROR_CODE_TOO_LARGE without being sent:
     * the server would close the connection for it.
     */
    __publicField(this, "maxFrameBytes", DEFAULT_MAX_FRAME_BYTES);
    __publicField(this, "ws");
    __publicField(this, "opts");
    __publicField(this, "nextId", 1);
    __publicField(this, "pending", /* @__PURE__ */ new Map());
    __publicField(this, "closedErr", null);
    __publicField(this, "disc", null);
    __publicField(this, "lastWrite", Date.now());
    __publicField(this, "lastRead", Date.now());
    __publicField(this, "hbTimer", null);
    this.url = url;
    this.ws = ws;
    this.opts = opts;
  }
  /** Opens a WebSocket to url, authenticates, and resolves once the server accepted the token. */
  static open(url, opts) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new opts.WebSocket(url);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const c = new _Connection(url, ws, opts);
      let settled = false;
      const timer = setTimeout(() => fail(new TimeoutError("parley: connect timed out")), opts.dialTimeoutMs ?? 1e4);
      const fail = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.shutdown(err);
        reject(err);
      };
      ws.onerror = () => {
      };
      ws.onclose = (ev) => {
        const err = c.disc ?? new ClosedError(`parley: connection closed (${ev?.code ?? "no code"})`);
        if (!settled) fail(err);
        else c.shutdown(err);
      };
      ws.onmessage = (ev) => c.receive(ev.data);
      ws.onopen = () => {
        c.request("auth", { token: opts.token, deviceId: opts.deviceId, deviceType: opts.deviceType }).then(
          (f) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            c.authOk = f.authOk;
            c.maxFrameBytes = c.authOk.maxFrameBytes || DEFAULT_MAX_FRAME_BYTES;
            c.startHeartbeat();
            resolve(c);
          },
          (err) => fail(c.disc ?? err)
        );
      };
    });
  }
  /** Why the connection ended, or null while it is open. */
  get error() {
    return this.closedErr;
  }
  get open() {
    return this.closedErr === null;
  }
  /** Sends a request and resolves with the reply frame; an `error` reply rejects with ParleyError. */
  request(name, body, timeoutMs) {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const ms = timeoutMs ?? this.opts.requestTimeoutMs ?? 1e4;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TimeoutError());
      }, ms);
      const p = { resolve, reject, timer, bytes: 0 };
      this.pending.set(id, p);
      try {
        p.bytes = this.write({ id, [name]: body });
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err);
      }
    });
  }
  /** Sends a frame that wants no reply (id 0): delivered acks, typing. */
  notify(name, body) {
    this.write({ [name]: body });
  }
  /** Closes the connection; pending requests fail with ClosedError. */
  close(err = new ClosedError("parley: closed by the client")) {
    this.shutdown(err);
  }
  /** Sends f; returns its size in bytes. */
  write(f) {
    if (this.closedErr) throw this.closedErr;
    if (this.ws.readyState !== OPEN) throw new ClosedError();
    const data = encodeFrame(f);
    const bytes = data.length * 3 <= this.maxFrameBytes ? data.length : utf8Length(data);
    if (bytes > this.maxFrameBytes) throw frameTooLarge(bytes, this.maxFrameBytes);
    this.ws.send(data);
    this.lastWrite = Date.now();
    return bytes;
  }
  /**
   * The server refused a frame as too large (and is closing the connection).
   * Its error carries no id, so the request to fail is the largest one
   * awaiting a reply: whichever frame was over the limit, that one is at
   * least as large. Failing it (instead of the ClosedError every other
   * pending request gets) keeps it from being resent on the next connection.
   */
  failOversized() {
    let worst = null;
    for (const e of this.pending) if (!worst || e[1].bytes > worst[1].bytes) worst = e;
    if (!worst) return;
    const [id, p] = worst;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.reject(new ParleyError("ERROR_CODE_TOO_LARGE", `the server refused the request's frame (${p.bytes} bytes) as over its limit`, false));
  }
  receive(data) {
    this.lastRead = Date.now();
    let f;
    try {
      f = decodeFrame(typeof data === "string" ? data : text(data instanceof Uint8Array ? data : new Uint8Array(data)));
    } catch {
      this.shutdown(new Error("parley: undecodable frame from the server"));
      return;
    }
    if (f.disconnect) {
      const d = f.disconnect;
      this.disc = new DisconnectError(d.code, d.reason, d.reconnectAfterMs ?? 0);
      return;
    }
    if (f.id) {
      const p = this.pending.get(f.id);
      if (!p) return;
      this.pending.delete(f.id);
      clearTimeout(p.timer);
      const e = f.error;
      if (e) p.reject(new ParleyError(e.code, e.message, e.temporary, void 0, { reason: e.reason, rejectCode: e.rejectCode }));
      else p.resolve(f);
      return;
    }
    if (f.error) {
      if (f.error.code === "ERROR_CODE_FRAME_TOO_LARGE") this.failOversized();
      return;
    }
    this.opts.onPush?.(f, this);
  }
  startHeartbeat() {
    const hb = this.opts.heartbeatMs ?? (this.authOk.heartbeatSeconds || 30) * 1e3;
    if (hb <= 0) return;
    this.hbTimer = setInterval(() => {
      const now = Date.now();
      if (now - this.lastRead > 2.5 * hb) {
        this.shutdown(new ClosedError("parley: no answer from the server (heartbeat)"));
        try {
          this.ws.close();
        } catch {
        }
        return;
      }
      if (now - this.lastWrite >= hb) this.request("ping", {}, hb).catch(() => {
      });
    }, Math.max(10, Math.floor(hb / 4)));
  }
  shutdown(err) {
    if (this.closedErr) return;
    this.closedErr = err;
    if (this.hbTimer) clearInterval(this.hbTimer);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    try {
      if (this.ws.readyState <= OPEN) this.ws.close(1e3);
    } catch {
    }
    this.opts.onClose?.(err);
  }
};

// src/emitter.ts
var Emitter = class {
  constructor() {
    __publicField(this, "handlers", /* @__PURE__ */ new Map());
  }
  /** Adds a listener; returns a function that removes it. */
  on(event, fn) {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, set = /* @__PURE__ */ new Set());
    set.add(fn);
    return () => this.off(event, fn);
  }
  off(event, fn) {
    this.handlers.get(event)?.delete(fn);
  }
  emit(event, ...args) {
    const set = this.handlers.get(event);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(...args);
      } catch (err) {
        setTimeout(() => {
          throw err;
        });
      }
    }
  }
};

// src/http.ts
async function call(o, path, init) {
  const f = o.fetch ?? globalThis.fetch;
  const res = await f((o.baseUrl ?? "").replace(/\/$/, "") + path, init);
  if (!res.ok) {
    let body = "";
    try {
      body = await res.text();
    } catch {
    }
    throw httpError(res.status, body || res.statusText);
  }
  return res;
}
function json(body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  return { method: "POST", headers, body: body === void 0 ? void 0 : JSON.stringify(body) };
}
async function register(o, username, password) {
  return (await call(o, "/v1/register", json({ username, password }))).json();
}
async function login(o, username, password) {
  return (await call(o, "/v1/login", json({ username, password }))).json();
}
async function logout(o, token) {
  await call(o, "/v1/logout", json(void 0, token));
}
async function changePassword(o, token, oldPassword, newPassword) {
  const body = { old_password: oldPassword, new_password: newPassword };
  return (await call(o, "/v1/password", json(body, token))).json();
}
async function rpc(o, token, name, body) {
  const res = await call(o, "/v1/rpc", {
    ...json(void 0, token),
    body: encodeFrame({ [name]: body })
  });
  return decodeFrame(await res.text());
}
async function webPushKey(o = {}) {
  const body = await (await call(o, "/v1/push/webpush-key", { method: "GET" })).json();
  if (typeof body.publicKey !== "string" || body.publicKey === "") throw badResponse("no publicKey in the answer");
  return body.publicKey;
}

// node_modules/tus-js-client/lib/error.js
var DetailedError = class extends Error {
  constructor(message, causingErr = null, req = null, res = null) {
    super(message);
    this.originalRequest = req;
    this.originalResponse = res;
    this.causingError = causingErr;
    if (causingErr != null) {
      message += `, caused by ${causingErr.toString()}`;
    }
    if (req != null) {
      const requestId = req.getHeader("X-Request-ID") || "n/a";
      const method = req.getMethod();
      const url = req.getURL();
      const status = res ? res.getStatus() : "n/a";
      const body = res ? res.getBody() || "" : "n/a";
      message += `, originated from request (method: ${method}, url: ${url}, response code: ${status}, response text: ${body}, request id: ${requestId})`;
    }
    this.message = message;
  }
};
var error_default = DetailedError;

// node_modules/tus-js-client/lib/logger.js
var isEnabled = false;
function log(msg) {
  if (!isEnabled) return;
  console.log(msg);
}

// node_modules/tus-js-client/lib/noopUrlStorage.js
var NoopUrlStorage = class {
  listAllUploads() {
    return Promise.resolve([]);
  }
  findUploadsByFingerprint(_fingerprint) {
    return Promise.resolve([]);
  }
  removeUpload(_urlStorageKey) {
    return Promise.resolve();
  }
  addUpload(_fingerprint, _upload) {
    return Promise.resolve(null);
  }
};

// node_modules/js-base64/base64.mjs
var version = "3.9.7";
var VERSION = version;
var _TD = typeof TextDecoder === "function" ? new TextDecoder("utf-8", { ignoreBOM: true }) : void 0;
var _TE = typeof TextEncoder === "function" ? new TextEncoder() : void 0;
var b64ch = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
var b64chs = Array.prototype.slice.call(b64ch);
var b64tab = ((a) => {
  let tab = {};
  a.forEach((c, i) => tab[c] = i);
  return tab;
})(b64chs);
var b64re = /^(?:[A-Za-z\d+\/]{4})*?(?:[A-Za-z\d+\/]{2}(?:==)?|[A-Za-z\d+\/]{3}=?)?$/;
var _fromCC = String.fromCharCode.bind(String);
var _mkUriSafe = (src) => src.replace(/=/g, "").replace(/[+\/]/g, (m0) => m0 == "+" ? "-" : "_");
var _tidyB64 = (s) => s.replace(/[^A-Za-z0-9\+\/]/g, "");
var btoaPolyfill = (bin) => {
  let u32, c0, c1, c2, asc = "";
  const pad = bin.length % 3;
  for (let i = 0; i < bin.length; ) {
    if ((c0 = bin.charCodeAt(i++)) > 255 || (c1 = bin.charCodeAt(i++)) > 255 || (c2 = bin.charCodeAt(i++)) > 255)
      throw new TypeError("invalid character found");
    u32 = c0 << 16 | c1 << 8 | c2;
    asc += b64chs[u32 >> 18 & 63] + b64chs[u32 >> 12 & 63] + b64chs[u32 >> 6 & 63] + b64chs[u32 & 63];
  }
  return pad ? asc.slice(0, pad - 3) + "===".substring(pad) : asc;
};
var _btoa = typeof btoa === "function" ? (bin) => btoa(bin) : btoaPolyfill;
var _fromUint8Array = typeof Uint8Array.prototype.toBase64 === "function" ? Function.prototype.call.bind(Uint8Array.prototype.toBase64) : (u8a) => {
  const maxargs = 4096;
  let strs = [];
  for (let i = 0, l = u8a.length; i < l; i += maxargs) {
    strs.push(_fromCC.apply(null, u8a.subarray(i, i + maxargs)));
  }
  return _btoa(strs.join(""));
};
var fromUint8Array = (u8a, urlsafe = false) => urlsafe ? _mkUriSafe(_fromUint8Array(u8a)) : _fromUint8Array(u8a);
var cb_utob = (c) => {
  if (c.length < 2) {
    var cc = c.charCodeAt(0);
    return cc < 128 ? c : cc < 2048 ? _fromCC(192 | cc >>> 6) + _fromCC(128 | cc & 63) : _fromCC(224 | cc >>> 12 & 15) + _fromCC(128 | cc >>> 6 & 63) + _fromCC(128 | cc & 63);
  } else {
    var cc = 65536 + (c.charCodeAt(0) - 55296) * 1024 + (c.charCodeAt(1) - 56320);
    return _fromCC(240 | cc >>> 18 & 7) + _fromCC(128 | cc >>> 12 & 63) + _fromCC(128 | cc >>> 6 & 63) + _fromCC(128 | cc & 63);
  }
};
var re_utob = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[^\x00-\x7F]/g;
var utob = (u) => u.replace(re_utob, cb_utob);
var _encode = _TE ? (s) => _fromUint8Array(_TE.encode(s)) : (s) => _btoa(utob(s));
var encode = (src, urlsafe = false) => urlsafe ? _mkUriSafe(_encode(src)) : _encode(src);
var encodeURI = (src) => encode(src, true);
var re_btou = /[\xC0-\xDF][\x80-\xBF]|[\xE0-\xEF][\x80-\xBF]{2}|[\xF0-\xF7][\x80-\xBF]{3}/g;
var cb_btou = (cccc) => {
  switch (cccc.length) {
    case 4:
      var cp = (7 & cccc.charCodeAt(0)) << 18 | (63 & cccc.charCodeAt(1)) << 12 | (63 & cccc.charCodeAt(2)) << 6 | 63 & cccc.charCodeAt(3), offset = cp - 65536;
      return _fromCC((offset >>> 10) + 55296) + _fromCC((offset & 1023) + 56320);
    case 3:
      return _fromCC((15 & cccc.charCodeAt(0)) << 12 | (63 & cccc.charCodeAt(1)) << 6 | 63 & cccc.charCodeAt(2));
    default:
      return _fromCC((31 & cccc.charCodeAt(0)) << 6 | 63 & cccc.charCodeAt(1));
  }
};
var btou = (b) => b.replace(re_btou, cb_btou);
var atobPolyfill = (asc) => {
  asc = asc.replace(/\s+/g, "");
  if (!b64re.test(asc))
    throw new TypeError("malformed base64.");
  asc += "==".slice(2 - (asc.length & 3));
  let u24, r1, r2;
  let binArray = [];
  for (let i = 0; i < asc.length; ) {
    u24 = b64tab[asc.charAt(i++)] << 18 | b64tab[asc.charAt(i++)] << 12 | (r1 = b64tab[asc.charAt(i++)]) << 6 | (r2 = b64tab[asc.charAt(i++)]);
    if (r1 === 64) {
      binArray.push(_fromCC(u24 >> 16 & 255));
    } else if (r2 === 64) {
      binArray.push(_fromCC(u24 >> 16 & 255, u24 >> 8 & 255));
    } else {
      binArray.push(_fromCC(u24 >> 16 & 255, u24 >> 8 & 255, u24 & 255));
    }
  }
  return binArray.join("");
};
var _atob = typeof atob === "function" ? (asc) => atob(_tidyB64(asc)) : atobPolyfill;
var _toUint8Array = typeof Uint8Array.fromBase64 === "function" ? (a) => Uint8Array.fromBase64(a) : (a) => {
  const bin = _atob(a), l = bin.length, u8a = new Uint8Array(l);
  for (let i = 0; i < l; i++)
    u8a[i] = bin.charCodeAt(i);
  return u8a;
};
var toUint8Array = (a) => _toUint8Array(_unURI(a));
var _decode = _TD ? (a) => _TD.decode(_toUint8Array(a)) : (a) => btou(_atob(a));
var _unURI = (a) => _tidyB64(a.replace(/[-_]/g, (m0) => m0 == "-" ? "+" : "/"));
var decode = (src) => _decode(_unURI(src));
var isValid = (src) => {
  if (typeof src !== "string")
    return false;
  const s = src.replace(/\s+/g, "").replace(/={0,2}$/, "");
  if (s.length % 4 === 1)
    return false;
  return !/[^\s0-9a-zA-Z\+/]/.test(s) || !/[^\s0-9a-zA-Z\-_]/.test(s);
};
var _noEnum = (v) => {
  return {
    value: v,
    enumerable: false,
    writable: true,
    configurable: true
  };
};
var extendString = function() {
  const _add = (name, body) => Object.defineProperty(String.prototype, name, _noEnum(body));
  _add("fromBase64", function() {
    return decode(this);
  });
  _add("toBase64", function(urlsafe) {
    return encode(this, urlsafe);
  });
  _add("toBase64URI", function() {
    return encode(this, true);
  });
  _add("toBase64URL", function() {
    return encode(this, true);
  });
  _add("toUint8Array", function() {
    return toUint8Array(this);
  });
};
var extendUint8Array = function() {
  const _add = (name, body) => Object.defineProperty(Uint8Array.prototype, name, _noEnum(body));
  _add("toBase64", function(urlsafe) {
    return fromUint8Array(this, urlsafe);
  });
  _add("toBase64URI", function() {
    return fromUint8Array(this, true);
  });
  _add("toBase64URL", function() {
    return fromUint8Array(this, true);
  });
};
var extendBuiltins = () => {
  extendString();
  extendUint8Array();
};
var gBase64 = {
  version,
  VERSION,
  atob: _atob,
  atobPolyfill,
  btoa: _btoa,
  btoaPolyfill,
  fromBase64: decode,
  toBase64: encode,
  encode,
  encodeURI,
  encodeURL: encodeURI,
  utob,
  btou,
  decode,
  isValid,
  fromUint8Array,
  toUint8Array,
  extendString,
  extendUint8Array,
  extendBuiltins
};

// node_modules/tus-js-client/lib/upload.js
var import_url_parse = __toESM(require_url_parse());

// node_modules/tus-js-client/lib/uuid.js
function uuid() {
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (c) => {
    const r = Math.random() * 16 | 0;
    const v = c === "x" ? r : r & 3 | 8;
    return v.toString(16);
  });
}

// node_modules/tus-js-client/lib/upload.js
var PROTOCOL_TUS_V1 = "tus-v1";
var PROTOCOL_IETF_DRAFT_03 = "ietf-draft-03";
var PROTOCOL_IETF_DRAFT_05 = "ietf-draft-05";
var defaultOptions = {
  endpoint: null,
  uploadUrl: null,
  metadata: {},
  metadataForPartialUploads: {},
  fingerprint: null,
  uploadSize: null,
  onProgress: null,
  onChunkComplete: null,
  onSuccess: null,
  onError: null,
  onUploadUrlAvailable: null,
  overridePatchMethod: false,
  headers: {},
  addRequestId: false,
  onBeforeRequest: null,
  onAfterResponse: null,
  onShouldRetry: defaultOnShouldRetry,
  chunkSize: Number.POSITIVE_INFINITY,
  retryDelays: [0, 1e3, 3e3, 5e3],
  parallelUploads: 1,
  parallelUploadBoundaries: null,
  storeFingerprintForResuming: true,
  removeFingerprintOnSuccess: false,
  uploadLengthDeferred: false,
  uploadDataDuringCreation: false,
  urlStorage: null,
  fileReader: null,
  httpStack: null,
  protocol: PROTOCOL_TUS_V1
};
var BaseUpload = class _BaseUpload {
  constructor(file, options) {
    if ("resume" in options) {
      console.log(
        "tus: The `resume` option has been removed in tus-js-client v2. Please use the URL storage API instead."
      );
    }
    this.options = options;
    this.options.chunkSize = Number(this.options.chunkSize);
    this._urlStorage = this.options.urlStorage;
    this.file = file;
    this.url = null;
    this._req = null;
    this._fingerprint = null;
    this._urlStorageKey = null;
    this._offset = null;
    this._aborted = false;
    this._size = null;
    this._source = null;
    this._retryAttempt = 0;
    this._retryTimeout = null;
    this._offsetBeforeRetry = 0;
    this._parallelUploads = null;
    this._parallelUploadUrls = null;
  }
  /**
   * Use the Termination extension to delete an upload from the server by sending a DELETE
   * request to the specified upload URL. This is only possible if the server supports the
   * Termination extension. If the `options.retryDelays` property is set, the method will
   * also retry if an error ocurrs.
   *
   * @param {String} url The upload's URL which will be terminated.
   * @param {object} options Optional options for influencing HTTP requests.
   * @return {Promise} The Promise will be resolved/rejected when the requests finish.
   */
  static terminate(url, options = {}) {
    const req = openRequest("DELETE", url, options);
    return sendRequest(req, null, options).then((res) => {
      if (res.getStatus() === 204) {
        return;
      }
      throw new error_default("tus: unexpected response while terminating upload", null, req, res);
    }).catch((err) => {
      if (!(err instanceof error_default)) {
        err = new error_default("tus: failed to terminate upload", err, req, null);
      }
      if (!shouldRetry(err, 0, options)) {
        throw err;
      }
      const delay = options.retryDelays[0];
      const remainingDelays = options.retryDelays.slice(1);
      const newOptions = {
        ...options,
        retryDelays: remainingDelays
      };
      return new Promise((resolve) => setTimeout(resolve, delay)).then(
        () => _BaseUpload.terminate(url, newOptions)
      );
    });
  }
  findPreviousUploads() {
    return this.options.fingerprint(this.file, this.options).then((fingerprint2) => this._urlStorage.findUploadsByFingerprint(fingerprint2));
  }
  resumeFromPreviousUpload(previousUpload) {
    this.url = previousUpload.uploadUrl || null;
    this._parallelUploadUrls = previousUpload.parallelUploadUrls || null;
    this._urlStorageKey = previousUpload.urlStorageKey;
  }
  start() {
    const { file } = this;
    if (!file) {
      this._emitError(new Error("tus: no file or stream to upload provided"));
      return;
    }
    if (![PROTOCOL_TUS_V1, PROTOCOL_IETF_DRAFT_03, PROTOCOL_IETF_DRAFT_05].includes(
      this.options.protocol
    )) {
      this._emitError(new Error(`tus: unsupported protocol ${this.options.protocol}`));
      return;
    }
    if (!this.options.endpoint && !this.options.uploadUrl && !this.url) {
      this._emitError(new Error("tus: neither an endpoint or an upload URL is provided"));
      return;
    }
    const { retryDelays } = this.options;
    if (retryDelays != null && Object.prototype.toString.call(retryDelays) !== "[object Array]") {
      this._emitError(new Error("tus: the `retryDelays` option must either be an array or null"));
      return;
    }
    if (this.options.parallelUploads > 1) {
      for (const optionName of ["uploadUrl", "uploadSize", "uploadLengthDeferred"]) {
        if (this.options[optionName]) {
          this._emitError(
            new Error(`tus: cannot use the ${optionName} option when parallelUploads is enabled`)
          );
          return;
        }
      }
    }
    if (this.options.parallelUploadBoundaries) {
      if (this.options.parallelUploads <= 1) {
        this._emitError(
          new Error(
            "tus: cannot use the `parallelUploadBoundaries` option when `parallelUploads` is disabled"
          )
        );
        return;
      }
      if (this.options.parallelUploads !== this.options.parallelUploadBoundaries.length) {
        this._emitError(
          new Error(
            "tus: the `parallelUploadBoundaries` must have the same length as the value of `parallelUploads`"
          )
        );
        return;
      }
    }
    this.options.fingerprint(file, this.options).then((fingerprint2) => {
      if (fingerprint2 == null) {
        log(
          "No fingerprint was calculated meaning that the upload cannot be stored in the URL storage."
        );
      } else {
        log(`Calculated fingerprint: ${fingerprint2}`);
      }
      this._fingerprint = fingerprint2;
      if (this._source) {
        return this._source;
      }
      return this.options.fileReader.openFile(file, this.options.chunkSize);
    }).then((source) => {
      this._source = source;
      if (this.options.uploadLengthDeferred) {
        this._size = null;
      } else if (this.options.uploadSize != null) {
        this._size = Number(this.options.uploadSize);
        if (Number.isNaN(this._size)) {
          this._emitError(new Error("tus: cannot convert `uploadSize` option into a number"));
          return;
        }
      } else {
        this._size = this._source.size;
        if (this._size == null) {
          this._emitError(
            new Error(
              "tus: cannot automatically derive upload's size from input. Specify it manually using the `uploadSize` option or use the `uploadLengthDeferred` option"
            )
          );
          return;
        }
      }
      if (this.options.parallelUploads > 1 || this._parallelUploadUrls != null) {
        this._startParallelUpload();
      } else {
        this._startSingleUpload();
      }
    }).catch((err) => {
      this._emitError(err);
    });
  }
  /**
   * Initiate the uploading procedure for a parallelized upload, where one file is split into
   * multiple request which are run in parallel.
   *
   * @api private
   */
  _startParallelUpload() {
    const totalSize = this._size;
    let totalProgress = 0;
    this._parallelUploads = [];
    const partCount = this._parallelUploadUrls != null ? this._parallelUploadUrls.length : this.options.parallelUploads;
    const parts = this.options.parallelUploadBoundaries ?? splitSizeIntoParts(this._source.size, partCount);
    if (this._parallelUploadUrls) {
      parts.forEach((part, index) => {
        part.uploadUrl = this._parallelUploadUrls[index] || null;
      });
    }
    this._parallelUploadUrls = new Array(parts.length);
    const uploads = parts.map((part, index) => {
      let lastPartProgress = 0;
      return this._source.slice(part.start, part.end).then(
        ({ value }) => new Promise((resolve, reject) => {
          const options = {
            ...this.options,
            // If available, the partial upload should be resumed from a previous URL.
            uploadUrl: part.uploadUrl || null,
            // We take manually care of resuming for partial uploads, so they should
            // not be stored in the URL storage.
            storeFingerprintForResuming: false,
            removeFingerprintOnSuccess: false,
            // Reset the parallelUploads option to not cause recursion.
            parallelUploads: 1,
            // Reset this option as we are not doing a parallel upload.
            parallelUploadBoundaries: null,
            metadata: this.options.metadataForPartialUploads,
            // Add the header to indicate the this is a partial upload.
            headers: {
              ...this.options.headers,
              "Upload-Concat": "partial"
            },
            // Reject or resolve the promise if the upload errors or completes.
            onSuccess: resolve,
            onError: reject,
            // Based in the progress for this partial upload, calculate the progress
            // for the entire final upload.
            onProgress: (newPartProgress) => {
              totalProgress = totalProgress - lastPartProgress + newPartProgress;
              lastPartProgress = newPartProgress;
              this._emitProgress(totalProgress, totalSize);
            },
            // Wait until every partial upload has an upload URL, so we can add
            // them to the URL storage.
            onUploadUrlAvailable: () => {
              this._parallelUploadUrls[index] = upload2.url;
              if (this._parallelUploadUrls.filter((u) => Boolean(u)).length === parts.length) {
                this._saveUploadInUrlStorage();
              }
            }
          };
          const upload2 = new _BaseUpload(value, options);
          upload2.start();
          this._parallelUploads.push(upload2);
        })
      );
    });
    let req;
    Promise.all(uploads).then(() => {
      req = this._openRequest("POST", this.options.endpoint);
      req.setHeader("Upload-Concat", `final;${this._parallelUploadUrls.join(" ")}`);
      const metadata = encodeMetadata(this.options.metadata);
      if (metadata !== "") {
        req.setHeader("Upload-Metadata", metadata);
      }
      return this._sendRequest(req, null);
    }).then((res) => {
      if (!inStatusCategory(res.getStatus(), 200)) {
        this._emitHttpError(req, res, "tus: unexpected response while creating upload");
        return;
      }
      const location = res.getHeader("Location");
      if (location == null) {
        this._emitHttpError(req, res, "tus: invalid or missing Location header");
        return;
      }
      this.url = resolveUrl(this.options.endpoint, location);
      log(`Created upload at ${this.url}`);
      this._emitSuccess(res);
    }).catch((err) => {
      this._emitError(err);
    });
  }
  /**
   * Initiate the uploading procedure for a non-parallel upload. Here the entire file is
   * uploaded in a sequential matter.
   *
   * @api private
   */
  _startSingleUpload() {
    this._aborted = false;
    if (this.url != null) {
      log(`Resuming upload from previous URL: ${this.url}`);
      this._resumeUpload();
      return;
    }
    if (this.options.uploadUrl != null) {
      log(`Resuming upload from provided URL: ${this.options.uploadUrl}`);
      this.url = this.options.uploadUrl;
      this._resumeUpload();
      return;
    }
    log("Creating a new upload");
    this._createUpload();
  }
  /**
   * Abort any running request and stop the current upload. After abort is called, no event
   * handler will be invoked anymore. You can use the `start` method to resume the upload
   * again.
   * If `shouldTerminate` is true, the `terminate` function will be called to remove the
   * current upload from the server.
   *
   * @param {boolean} shouldTerminate True if the upload should be deleted from the server.
   * @return {Promise} The Promise will be resolved/rejected when the requests finish.
   */
  abort(shouldTerminate) {
    if (this._parallelUploads != null) {
      for (const upload2 of this._parallelUploads) {
        upload2.abort(shouldTerminate);
      }
    }
    if (this._req !== null) {
      this._req.abort();
    }
    this._aborted = true;
    if (this._retryTimeout != null) {
      clearTimeout(this._retryTimeout);
      this._retryTimeout = null;
    }
    if (!shouldTerminate || this.url == null) {
      return Promise.resolve();
    }
    return _BaseUpload.terminate(this.url, this.options).then(() => this._removeFromUrlStorage());
  }
  _emitHttpError(req, res, message, causingErr) {
    this._emitError(new error_default(message, causingErr, req, res));
  }
  _emitError(err) {
    if (this._aborted) return;
    if (this.options.retryDelays != null) {
      const shouldResetDelays = this._offset != null && this._offset > this._offsetBeforeRetry;
      if (shouldResetDelays) {
        this._retryAttempt = 0;
      }
      if (shouldRetry(err, this._retryAttempt, this.options)) {
        const delay = this.options.retryDelays[this._retryAttempt++];
        this._offsetBeforeRetry = this._offset;
        this._retryTimeout = setTimeout(() => {
          this.start();
        }, delay);
        return;
      }
    }
    if (typeof this.options.onError === "function") {
      this.options.onError(err);
    } else {
      throw err;
    }
  }
  /**
   * Publishes notification if the upload has been successfully completed.
   *
   * @param {object} lastResponse Last HTTP response.
   * @api private
   */
  _emitSuccess(lastResponse) {
    if (this.options.removeFingerprintOnSuccess) {
      this._removeFromUrlStorage();
    }
    if (typeof this.options.onSuccess === "function") {
      this.options.onSuccess({ lastResponse });
    }
  }
  /**
   * Publishes notification when data has been sent to the server. This
   * data may not have been accepted by the server yet.
   *
   * @param {number} bytesSent  Number of bytes sent to the server.
   * @param {number} bytesTotal Total number of bytes to be sent to the server.
   * @api private
   */
  _emitProgress(bytesSent, bytesTotal) {
    if (typeof this.options.onProgress === "function") {
      this.options.onProgress(bytesSent, bytesTotal);
    }
  }
  /**
   * Publishes notification when a chunk of data has been sent to the server
   * and accepted by the server.
   * @param {number} chunkSize  Size of the chunk that was accepted by the server.
   * @param {number} bytesAccepted Total number of bytes that have been
   *                                accepted by the server.
   * @param {number} bytesTotal Total number of bytes to be sent to the server.
   * @api private
   */
  _emitChunkComplete(chunkSize, bytesAccepted, bytesTotal) {
    if (typeof this.options.onChunkComplete === "function") {
      this.options.onChunkComplete(chunkSize, bytesAccepted, bytesTotal);
    }
  }
  /**
   * Create a new upload using the creation extension by sending a POST
   * request to the endpoint. After successful creation the file will be
   * uploaded
   *
   * @api private
   */
  _createUpload() {
    if (!this.options.endpoint) {
      this._emitError(new Error("tus: unable to create upload because no endpoint is provided"));
      return;
    }
    const req = this._openRequest("POST", this.options.endpoint);
    if (this.options.uploadLengthDeferred) {
      req.setHeader("Upload-Defer-Length", "1");
    } else {
      req.setHeader("Upload-Length", `${this._size}`);
    }
    const metadata = encodeMetadata(this.options.metadata);
    if (metadata !== "") {
      req.setHeader("Upload-Metadata", metadata);
    }
    let promise;
    if (this.options.uploadDataDuringCreation && !this.options.uploadLengthDeferred) {
      this._offset = 0;
      promise = this._addChunkToRequest(req);
    } else {
      if (this.options.protocol === PROTOCOL_IETF_DRAFT_03 || this.options.protocol === PROTOCOL_IETF_DRAFT_05) {
        req.setHeader("Upload-Complete", "?0");
      }
      promise = this._sendRequest(req, null);
    }
    promise.then((res) => {
      if (!inStatusCategory(res.getStatus(), 200)) {
        this._emitHttpError(req, res, "tus: unexpected response while creating upload");
        return;
      }
      const location = res.getHeader("Location");
      if (location == null) {
        this._emitHttpError(req, res, "tus: invalid or missing Location header");
        return;
      }
      this.url = resolveUrl(this.options.endpoint, location);
      log(`Created upload at ${this.url}`);
      if (typeof this.options.onUploadUrlAvailable === "function") {
        this.options.onUploadUrlAvailable();
      }
      if (this._size === 0) {
        this._emitSuccess(res);
        this._source.close();
        return;
      }
      this._saveUploadInUrlStorage().then(() => {
        if (this.options.uploadDataDuringCreation) {
          this._handleUploadResponse(req, res);
        } else {
          this._offset = 0;
          this._performUpload();
        }
      });
    }).catch((err) => {
      this._emitHttpError(req, null, "tus: failed to create upload", err);
    });
  }
  /*
   * Try to resume an existing upload. First a HEAD request will be sent
   * to retrieve the offset. If the request fails a new upload will be
   * created. In the case of a successful response the file will be uploaded.
   *
   * @api private
   */
  _resumeUpload() {
    const req = this._openRequest("HEAD", this.url);
    const promise = this._sendRequest(req, null);
    promise.then((res) => {
      const status = res.getStatus();
      if (!inStatusCategory(status, 200)) {
        if (status === 423) {
          this._emitHttpError(req, res, "tus: upload is currently locked; retry later");
          return;
        }
        if (inStatusCategory(status, 400)) {
          this._removeFromUrlStorage();
        }
        if (!this.options.endpoint) {
          this._emitHttpError(
            req,
            res,
            "tus: unable to resume upload (new upload cannot be created without an endpoint)"
          );
          return;
        }
        this.url = null;
        this._createUpload();
        return;
      }
      const offset = Number.parseInt(res.getHeader("Upload-Offset"), 10);
      if (Number.isNaN(offset)) {
        this._emitHttpError(req, res, "tus: invalid or missing offset value");
        return;
      }
      const length = Number.parseInt(res.getHeader("Upload-Length"), 10);
      if (Number.isNaN(length) && !this.options.uploadLengthDeferred && this.options.protocol === PROTOCOL_TUS_V1) {
        this._emitHttpError(req, res, "tus: invalid or missing length value");
        return;
      }
      if (typeof this.options.onUploadUrlAvailable === "function") {
        this.options.onUploadUrlAvailable();
      }
      this._saveUploadInUrlStorage().then(() => {
        if (offset === length) {
          this._emitProgress(length, length);
          this._emitSuccess(res);
          return;
        }
        this._offset = offset;
        this._performUpload();
      });
    }).catch((err) => {
      this._emitHttpError(req, null, "tus: failed to resume upload", err);
    });
  }
  /**
   * Start uploading the file using PATCH requests. The file will be divided
   * into chunks as specified in the chunkSize option. During the upload
   * the onProgress event handler may be invoked multiple times.
   *
   * @api private
   */
  _performUpload() {
    if (this._aborted) {
      return;
    }
    let req;
    if (this.options.overridePatchMethod) {
      req = this._openRequest("POST", this.url);
      req.setHeader("X-HTTP-Method-Override", "PATCH");
    } else {
      req = this._openRequest("PATCH", this.url);
    }
    req.setHeader("Upload-Offset", `${this._offset}`);
    const promise = this._addChunkToRequest(req);
    promise.then((res) => {
      if (!inStatusCategory(res.getStatus(), 200)) {
        this._emitHttpError(req, res, "tus: unexpected response while uploading chunk");
        return;
      }
      this._handleUploadResponse(req, res);
    }).catch((err) => {
      if (this._aborted) {
        return;
      }
      this._emitHttpError(req, null, `tus: failed to upload chunk at offset ${this._offset}`, err);
    });
  }
  /**
   * _addChunktoRequest reads a chunk from the source and sends it using the
   * supplied request object. It will not handle the response.
   *
   * @api private
   */
  _addChunkToRequest(req) {
    const start = this._offset;
    let end = this._offset + this.options.chunkSize;
    req.setProgressHandler((bytesSent) => {
      this._emitProgress(start + bytesSent, this._size);
    });
    if (this.options.protocol === PROTOCOL_TUS_V1) {
      req.setHeader("Content-Type", "application/offset+octet-stream");
    } else if (this.options.protocol === PROTOCOL_IETF_DRAFT_05) {
      req.setHeader("Content-Type", "application/partial-upload");
    }
    if ((end === Number.POSITIVE_INFINITY || end > this._size) && !this.options.uploadLengthDeferred) {
      end = this._size;
    }
    return this._source.slice(start, end).then(({ value, done }) => {
      const valueSize = value?.size ? value.size : 0;
      if (this.options.uploadLengthDeferred && done) {
        this._size = this._offset + valueSize;
        req.setHeader("Upload-Length", `${this._size}`);
      }
      const newSize = this._offset + valueSize;
      if (!this.options.uploadLengthDeferred && done && newSize !== this._size) {
        return Promise.reject(
          new Error(
            `upload was configured with a size of ${this._size} bytes, but the source is done after ${newSize} bytes`
          )
        );
      }
      if (value === null) {
        return this._sendRequest(req);
      }
      if (this.options.protocol === PROTOCOL_IETF_DRAFT_03 || this.options.protocol === PROTOCOL_IETF_DRAFT_05) {
        req.setHeader("Upload-Complete", done ? "?1" : "?0");
      }
      this._emitProgress(this._offset, this._size);
      return this._sendRequest(req, value);
    });
  }
  /**
   * _handleUploadResponse is used by requests that haven been sent using _addChunkToRequest
   * and already have received a response.
   *
   * @api private
   */
  _handleUploadResponse(req, res) {
    const offset = Number.parseInt(res.getHeader("Upload-Offset"), 10);
    if (Number.isNaN(offset)) {
      this._emitHttpError(req, res, "tus: invalid or missing offset value");
      return;
    }
    this._emitProgress(offset, this._size);
    this._emitChunkComplete(offset - this._offset, offset, this._size);
    this._offset = offset;
    if (offset === this._size) {
      this._emitSuccess(res);
      this._source.close();
      return;
    }
    this._performUpload();
  }
  /**
   * Create a new HTTP request object with the given method and URL.
   *
   * @api private
   */
  _openRequest(method, url) {
    const req = openRequest(method, url, this.options);
    this._req = req;
    return req;
  }
  /**
   * Remove the entry in the URL storage, if it has been saved before.
   *
   * @api private
   */
  _removeFromUrlStorage() {
    if (!this._urlStorageKey) return;
    this._urlStorage.removeUpload(this._urlStorageKey).catch((err) => {
      this._emitError(err);
    });
    this._urlStorageKey = null;
  }
  /**
   * Add the upload URL to the URL storage, if possible.
   *
   * @api private
   */
  _saveUploadInUrlStorage() {
    if (!this.options.storeFingerprintForResuming || !this._fingerprint || this._urlStorageKey !== null) {
      return Promise.resolve();
    }
    const storedUpload = {
      size: this._size,
      metadata: this.options.metadata,
      creationTime: (/* @__PURE__ */ new Date()).toString()
    };
    if (this._parallelUploads) {
      storedUpload.parallelUploadUrls = this._parallelUploadUrls;
    } else {
      storedUpload.uploadUrl = this.url;
    }
    return this._urlStorage.addUpload(this._fingerprint, storedUpload).then((urlStorageKey) => {
      this._urlStorageKey = urlStorageKey;
    });
  }
  /**
   * Send a request with the provided body.
   *
   * @api private
   */
  _sendRequest(req, body = null) {
    return sendRequest(req, body, this.options);
  }
};
function encodeMetadata(metadata) {
  return Object.entries(metadata).map(([key, value]) => `${key} ${gBase64.encode(String(value))}`).join(",");
}
function inStatusCategory(status, category) {
  return status >= category && status < category + 100;
}
function openRequest(method, url, options) {
  const req = options.httpStack.createRequest(method, url);
  if (options.protocol === PROTOCOL_IETF_DRAFT_03) {
    req.setHeader("Upload-Draft-Interop-Version", "5");
  } else if (options.protocol === PROTOCOL_IETF_DRAFT_05) {
    req.setHeader("Upload-Draft-Interop-Version", "6");
  } else {
    req.setHeader("Tus-Resumable", "1.0.0");
  }
  const headers = options.headers || {};
  for (const [name, value] of Object.entries(headers)) {
    req.setHeader(name, value);
  }
  if (options.addRequestId) {
    const requestId = uuid();
    req.setHeader("X-Request-ID", requestId);
  }
  return req;
}
async function sendRequest(req, body, options) {
  if (typeof options.onBeforeRequest === "function") {
    await options.onBeforeRequest(req);
  }
  const res = await req.send(body);
  if (typeof options.onAfterResponse === "function") {
    await options.onAfterResponse(req, res);
  }
  return res;
}
function isOnline() {
  let online = true;
  if (typeof navigator !== "undefined" && navigator.onLine === false) {
    online = false;
  }
  return online;
}
function shouldRetry(err, retryAttempt, options) {
  if (options.retryDelays == null || retryAttempt >= options.retryDelays.length || err.originalRequest == null) {
    return false;
  }
  if (options && typeof options.onShouldRetry === "function") {
    return options.onShouldRetry(err, retryAttempt, options);
  }
  return defaultOnShouldRetry(err);
}
function defaultOnShouldRetry(err) {
  const status = err.originalResponse ? err.originalResponse.getStatus() : 0;
  return (!inStatusCategory(status, 400) || status === 409 || status === 423) && isOnline();
}
function resolveUrl(origin, link) {
  return new import_url_parse.default(link, origin).toString();
}
function splitSizeIntoParts(totalSize, partCount) {
  const partSize = Math.floor(totalSize / partCount);
  const parts = [];
  for (let i = 0; i < partCount; i++) {
    parts.push({
      start: partSize * i,
      end: partSize * (i + 1)
    });
  }
  parts[partCount - 1].end = totalSize;
  return parts;
}
BaseUpload.defaultOptions = defaultOptions;
var upload_default = BaseUpload;

// node_modules/tus-js-client/lib/browser/isReactNative.js
var isReactNative = () => typeof navigator !== "undefined" && typeof navigator.product === "string" && navigator.product.toLowerCase() === "reactnative";
var isReactNative_default = isReactNative;

// node_modules/tus-js-client/lib/browser/uriToBlob.js
function uriToBlob(uri) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.responseType = "blob";
    xhr.onload = () => {
      const blob = xhr.response;
      resolve(blob);
    };
    xhr.onerror = (err) => {
      reject(err);
    };
    xhr.open("GET", uri);
    xhr.send();
  });
}

// node_modules/tus-js-client/lib/browser/sources/isCordova.js
var isCordova = () => typeof window !== "undefined" && (typeof window.PhoneGap !== "undefined" || typeof window.Cordova !== "undefined" || typeof window.cordova !== "undefined");
var isCordova_default = isCordova;

// node_modules/tus-js-client/lib/browser/sources/readAsByteArray.js
function readAsByteArray(chunk) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const value = new Uint8Array(reader.result);
      resolve({ value });
    };
    reader.onerror = (err) => {
      reject(err);
    };
    reader.readAsArrayBuffer(chunk);
  });
}

// node_modules/tus-js-client/lib/browser/sources/FileSource.js
var FileSource = class {
  // Make this.size a method
  constructor(file) {
    this._file = file;
    this.size = file.size;
  }
  slice(start, end) {
    if (isCordova_default()) {
      return readAsByteArray(this._file.slice(start, end));
    }
    const value = this._file.slice(start, end);
    const done = end >= this.size;
    return Promise.resolve({ value, done });
  }
  close() {
  }
};

// node_modules/tus-js-client/lib/browser/sources/StreamSource.js
function len(blobOrArray) {
  if (blobOrArray === void 0) return 0;
  if (blobOrArray.size !== void 0) return blobOrArray.size;
  return blobOrArray.length;
}
function concat(a, b) {
  if (a.concat) {
    return a.concat(b);
  }
  if (a instanceof Blob) {
    return new Blob([a, b], { type: a.type });
  }
  if (a.set) {
    const c = new a.constructor(a.length + b.length);
    c.set(a);
    c.set(b, a.length);
    return c;
  }
  throw new Error("Unknown data type");
}
var StreamSource = class {
  constructor(reader) {
    this._buffer = void 0;
    this._bufferOffset = 0;
    this._reader = reader;
    this._done = false;
  }
  slice(start, end) {
    if (start < this._bufferOffset) {
      return Promise.reject(new Error("Requested data is before the reader's current offset"));
    }
    return this._readUntilEnoughDataOrDone(start, end);
  }
  _readUntilEnoughDataOrDone(start, end) {
    const hasEnoughData = end <= this._bufferOffset + len(this._buffer);
    if (this._done || hasEnoughData) {
      const value = this._getDataFromBuffer(start, end);
      const done = value == null ? this._done : false;
      return Promise.resolve({ value, done });
    }
    return this._reader.read().then(({ value, done }) => {
      if (done) {
        this._done = true;
      } else if (this._buffer === void 0) {
        this._buffer = value;
      } else {
        this._buffer = concat(this._buffer, value);
      }
      return this._readUntilEnoughDataOrDone(start, end);
    });
  }
  _getDataFromBuffer(start, end) {
    if (start > this._bufferOffset) {
      this._buffer = this._buffer.slice(start - this._bufferOffset);
      this._bufferOffset = start;
    }
    const hasAllDataBeenRead = len(this._buffer) === 0;
    if (this._done && hasAllDataBeenRead) {
      return null;
    }
    return this._buffer.slice(0, end - start);
  }
  close() {
    if (this._reader.cancel) {
      this._reader.cancel();
    }
  }
};

// node_modules/tus-js-client/lib/browser/fileReader.js
var FileReader2 = class {
  async openFile(input, chunkSize) {
    if (isReactNative_default() && input && typeof input.uri !== "undefined") {
      try {
        const blob = await uriToBlob(input.uri);
        return new FileSource(blob);
      } catch (err) {
        throw new Error(
          `tus: cannot fetch \`file.uri\` as Blob, make sure the uri is correct and accessible. ${err}`
        );
      }
    }
    if (typeof input.slice === "function" && typeof input.size !== "undefined") {
      return Promise.resolve(new FileSource(input));
    }
    if (typeof input.read === "function") {
      chunkSize = Number(chunkSize);
      if (!Number.isFinite(chunkSize)) {
        return Promise.reject(
          new Error(
            "cannot create source for stream without a finite value for the `chunkSize` option"
          )
        );
      }
      return Promise.resolve(new StreamSource(input, chunkSize));
    }
    return Promise.reject(
      new Error(
        "source object may only be an instance of File, Blob, or Reader in this environment"
      )
    );
  }
};

// node_modules/tus-js-client/lib/browser/fileSignature.js
function fingerprint(file, options) {
  if (isReactNative_default()) {
    return Promise.resolve(reactNativeFingerprint(file, options));
  }
  return Promise.resolve(
    ["tus-br", file.name, file.type, file.size, file.lastModified, options.endpoint].join("-")
  );
}
function reactNativeFingerprint(file, options) {
  const exifHash = file.exif ? hashCode(JSON.stringify(file.exif)) : "noexif";
  return ["tus-rn", file.name || "noname", file.size || "nosize", exifHash, options.endpoint].join(
    "/"
  );
}
function hashCode(str) {
  let hash = 0;
  if (str.length === 0) {
    return hash;
  }
  for (let i = 0; i < str.length; i++) {
    const char = str.charCodeAt(i);
    hash = (hash << 5) - hash + char;
    hash &= hash;
  }
  return hash;
}

// node_modules/tus-js-client/lib/browser/httpStack.js
var XHRHttpStack = class {
  createRequest(method, url) {
    return new Request(method, url);
  }
  getName() {
    return "XHRHttpStack";
  }
};
var Request = class {
  constructor(method, url) {
    this._xhr = new XMLHttpRequest();
    this._xhr.open(method, url, true);
    this._method = method;
    this._url = url;
    this._headers = {};
  }
  getMethod() {
    return this._method;
  }
  getURL() {
    return this._url;
  }
  setHeader(header, value) {
    this._xhr.setRequestHeader(header, value);
    this._headers[header] = value;
  }
  getHeader(header) {
    return this._headers[header];
  }
  setProgressHandler(progressHandler) {
    if (!("upload" in this._xhr)) {
      return;
    }
    this._xhr.upload.onprogress = (e) => {
      if (!e.lengthComputable) {
        return;
      }
      progressHandler(e.loaded);
    };
  }
  send(body = null) {
    return new Promise((resolve, reject) => {
      this._xhr.onload = () => {
        resolve(new Response(this._xhr));
      };
      this._xhr.onerror = (err) => {
        reject(err);
      };
      this._xhr.send(body);
    });
  }
  abort() {
    this._xhr.abort();
    return Promise.resolve();
  }
  getUnderlyingObject() {
    return this._xhr;
  }
};
var Response = class {
  constructor(xhr) {
    this._xhr = xhr;
  }
  getStatus() {
    return this._xhr.status;
  }
  getHeader(header) {
    return this._xhr.getResponseHeader(header);
  }
  getBody() {
    return this._xhr.responseText;
  }
  getUnderlyingObject() {
    return this._xhr;
  }
};

// node_modules/tus-js-client/lib/browser/urlStorage.js
var hasStorage = false;
try {
  hasStorage = "localStorage" in window;
  const key = "tusSupport";
  const originalValue = localStorage.getItem(key);
  localStorage.setItem(key, originalValue);
  if (originalValue === null) localStorage.removeItem(key);
} catch (e) {
  if (e.code === e.SECURITY_ERR || e.code === e.QUOTA_EXCEEDED_ERR) {
    hasStorage = false;
  } else {
    throw e;
  }
}
var canStoreURLs = hasStorage;
var WebStorageUrlStorage = class {
  findAllUploads() {
    const results = this._findEntries("tus::");
    return Promise.resolve(results);
  }
  findUploadsByFingerprint(fingerprint2) {
    const results = this._findEntries(`tus::${fingerprint2}::`);
    return Promise.resolve(results);
  }
  removeUpload(urlStorageKey) {
    localStorage.removeItem(urlStorageKey);
    return Promise.resolve();
  }
  addUpload(fingerprint2, upload2) {
    const id = Math.round(Math.random() * 1e12);
    const key = `tus::${fingerprint2}::${id}`;
    localStorage.setItem(key, JSON.stringify(upload2));
    return Promise.resolve(key);
  }
  _findEntries(prefix) {
    const results = [];
    for (let i = 0; i < localStorage.length; i++) {
      const key = localStorage.key(i);
      if (key.indexOf(prefix) !== 0) continue;
      try {
        const upload2 = JSON.parse(localStorage.getItem(key));
        upload2.urlStorageKey = key;
        results.push(upload2);
      } catch (_e) {
      }
    }
    return results;
  }
};

// node_modules/tus-js-client/lib/browser/index.js
var defaultOptions2 = {
  ...upload_default.defaultOptions,
  httpStack: new XHRHttpStack(),
  fileReader: new FileReader2(),
  urlStorage: canStoreURLs ? new WebStorageUrlStorage() : new NoopUrlStorage(),
  fingerprint
};
var Upload = class extends upload_default {
  constructor(file = null, options = {}) {
    options = { ...defaultOptions2, ...options };
    super(file, options);
  }
  static terminate(url, options = {}) {
    options = { ...defaultOptions2, ...options };
    return upload_default.terminate(url, options);
  }
};
var isSupported = typeof XMLHttpRequest === "function" && typeof Blob === "function" && typeof Blob.prototype.slice === "function";

// src/media.ts
var RESUMABLE_ABOVE = 4 << 20;
var DEFAULT_CHUNK = 8 << 20;
var FILE_ID_HEADER = "Parley-File-Id";
function base(o) {
  return (o.baseUrl ?? "").replace(/\/$/, "");
}
async function tokenOf(t) {
  return typeof t === "function" ? await t() : t;
}
function abortError() {
  return new DOMException("The upload was aborted", "AbortError");
}
function fileName(file, name) {
  return name ?? file.name ?? "file";
}
async function uploadFile(o, token, file, name, opts = {}) {
  if (opts.signal?.aborted) throw abortError();
  const url = base(o) + "/v1/files?name=" + encodeURIComponent(fileName(file, name));
  const auth = "Bearer " + await tokenOf(token);
  if (opts.signal?.aborted) throw abortError();
  let status;
  let body;
  if (!o.fetch && typeof XMLHttpRequest === "function") {
    [status, body] = await new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", url);
      xhr.setRequestHeader("Authorization", auth);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      const onAbort = () => xhr.abort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      const done = () => opts.signal?.removeEventListener("abort", onAbort);
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
        reject(networkError("the upload failed: no answer from the server"));
      };
      xhr.onabort = () => {
        done();
        reject(abortError());
      };
      xhr.send(file);
    });
  } else {
    const f = o.fetch ?? globalThis.fetch;
    let res;
    try {
      res = await f(url, {
        method: "POST",
        headers: { Authorization: auth, "Content-Type": "application/octet-stream" },
        body: file,
        signal: opts.signal
      });
      body = await res.text();
    } catch (err) {
      if (opts.signal?.aborted) throw abortError();
      throw networkError("the upload failed: " + (err instanceof Error ? err.message : String(err)));
    }
    status = res.status;
  }
  if (status !== 201) throw httpError(status, body);
  const file1 = decodeFrame(body).file;
  if (!file1?.id) throw badResponse("no file in the answer", status);
  opts.onProgress?.(file.size, file.size);
  return file1;
}
function nodeTus() {
  return defaultOptions2.httpStack.getName() === "NodeHttpStack";
}
var blobReader = {
  openFile(input) {
    return Promise.resolve({
      size: input.size,
      async slice(start, end) {
        const value = new Uint8Array(await input.slice(start, end).arrayBuffer());
        value.size = value.length;
        return { value, done: end >= input.size };
      },
      close() {
      }
    });
  }
};
var finalRefusals = /* @__PURE__ */ new Set([
  "ERROR_CODE_QUOTA_EXCEEDED",
  "ERROR_CODE_UNSUPPORTED_MEDIA_TYPE",
  "ERROR_CODE_TOO_LARGE",
  "ERROR_CODE_BAD_REQUEST",
  "ERROR_CODE_PERMISSION_DENIED",
  "ERROR_CODE_UNAUTHENTICATED"
]);
function retryStatus(status, body) {
  if (status === 409 || status === 423 || status === 429) return true;
  if (status < 500) return false;
  return !finalRefusals.has(httpError(status, body).code);
}
function tusFailure(err) {
  const res = err.originalResponse;
  if (res) return httpError(res.getStatus(), res.getBody() ?? "");
  const cause = err.causingError;
  return networkError("the upload failed: " + (cause?.message ?? err.message));
}
function uploadResumable(o, token, file, name, opts = {}) {
  const fname = fileName(file, name);
  return new Promise((resolve, reject) => {
    const origin = base(o) || globalThis.location?.origin;
    if (!origin) return reject(new TypeError("parley: uploadResumable needs baseUrl outside a browser page"));
    const endpoint = origin + "/v1/uploads/";
    if (opts.signal?.aborted) return reject(abortError());
    let fileId = "";
    let settled = false;
    const finish = (err, a) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve(a);
    };
    const options = {
      endpoint,
      uploadUrl: opts.uploadUrl ?? null,
      metadata: { filename: fname },
      uploadSize: file.size,
      chunkSize: opts.chunkSize ?? DEFAULT_CHUNK,
      retryDelays: opts.retryDelays ?? [0, 1e3, 3e3, 5e3],
      // The app keeps URLs to resume (onCreated/uploadUrl): nothing is
      // written to the browser's storage, where another user of it could find it.
      storeFingerprintForResuming: false,
      removeFingerprintOnSuccess: true,
      onBeforeRequest: async (req) => {
        req.setHeader("Authorization", "Bearer " + await tokenOf(token));
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
        return res ? retryStatus(res.getStatus(), res.getBody() ?? "") : true;
      },
      onSuccess: ({ lastResponse }) => {
        const id = lastResponse.getHeader(FILE_ID_HEADER) || fileId;
        if (id) return finish(null, { id, name: fname, size: file.size });
        void headFileId(o, up.url, token).then(
          (id2) => finish(null, { id: id2, name: fname, size: file.size }),
          (err) => finish(err)
        );
      },
      onError: (err) => finish(tusFailure(err))
    };
    if (nodeTus()) options.fileReader = blobReader;
    const up = new Upload(file, options);
    function onAbort() {
      void up.abort(!opts.keepOnAbort).catch(() => {
      });
      finish(abortError());
    }
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    up.start();
  });
}
async function headFileId(o, url, token) {
  const res = await (o.fetch ?? globalThis.fetch)(url, { method: "HEAD", headers: { Authorization: "Bearer " + await tokenOf(token), "Tus-Resumable": "1.0.0" } });
  const id = res.headers.get(FILE_ID_HEADER);
  if (res.ok && id) return id;
  throw res.ok ? badResponse("the finished upload names no file", res.status) : httpError(res.status, await res.text());
}
function upload(o, token, file, name, opts = {}) {
  return file.size > (opts.resumableAbove ?? RESUMABLE_ABOVE) ? uploadResumable(o, token, file, name, opts) : uploadFile(o, token, file, name, opts);
}
function resolveFileUrl(baseUrl, url) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(url) || !baseUrl) return url;
  return new URL(url, baseUrl).toString();
}

// src/search.ts
function utf16Ranges(s, byteRanges) {
  if (byteRanges.length === 0 || s.length === 0) return [];
  const bytes = [];
  const units = [];
  let b = 0;
  for (let i = 0; i < s.length; ) {
    bytes.push(b);
    units.push(i);
    const c = s.charCodeAt(i);
    const next = s.charCodeAt(i + 1);
    if (c >= 55296 && c <= 56319 && next >= 56320 && next <= 57343) {
      b += 4;
      i += 2;
    } else {
      b += c < 128 ? 1 : c < 2048 ? 2 : 3;
      i += 1;
    }
  }
  bytes.push(b);
  units.push(s.length);
  const floor = (o) => {
    let lo = 0;
    let hi = bytes.length - 1;
    while (lo < hi) {
      const mid = lo + hi + 1 >> 1;
      if (bytes[mid] <= o) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const out = [];
  for (const r of byteRanges) {
    const start = Math.max(0, r.start ?? 0);
    const end = Math.min(b, r.end ?? 0);
    if (end <= start) continue;
    const si = floor(start);
    let ei = floor(end);
    if (bytes[ei] < end) ei++;
    out.push({ start: units[si], end: units[ei] });
  }
  out.sort((x, y) => x.start - y.start || x.end - y.end);
  const merged = [];
  for (const r of out) {
    const last = merged[merged.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else merged.push({ ...r });
  }
  return merged;
}
function snippetParts(snippet, highlights) {
  const parts = [];
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
function searchMatch(h) {
  const snippet = h.snippet ?? "";
  return {
    conversationId: h.conversationId,
    seq: h.seq,
    from: h.from ?? "",
    serverTime: h.serverTime ?? 0,
    snippet,
    highlights: utf16Ranges(snippet, h.highlights ?? [])
  };
}

// src/push.ts
function pushTargetBody(t) {
  const kinds = ["apns", "fcm", "webpush"].filter((k) => t?.[k] != null);
  if (kinds.length !== 1) throw new TypeError("parley: a push target has exactly one of apns, fcm or webpush");
  const s = (v) => typeof v === "string" ? v : "";
  if (t.apns) {
    const { deviceToken, topic, sandbox } = t.apns;
    return { apns: sandbox ? { deviceToken: s(deviceToken), topic: s(topic), sandbox: true } : { deviceToken: s(deviceToken), topic: s(topic) } };
  }
  if (t.fcm) return { fcm: { token: s(t.fcm.token) } };
  const w = t.webpush;
  return { webpush: { endpoint: s(w.endpoint), p256dh: s(w.p256dh), auth: s(w.auth) } };
}
function webPushTarget(sub) {
  const p256dh = sub.getKey("p256dh");
  const auth = sub.getKey("auth");
  if (!p256dh || !auth) throw new Error("parley: the push subscription has no p256dh and auth keys");
  return { endpoint: sub.endpoint, p256dh: toBase64Url(new Uint8Array(p256dh)), auth: toBase64Url(new Uint8Array(auth)) };
}
async function subscribeWithKey(registration, publicKey) {
  const key = new Uint8Array(fromBase64(publicKey));
  const pm = registration.pushManager;
  const old = await pm.getSubscription();
  if (old) {
    if (sameBytes(old.options?.applicationServerKey ?? null, key)) return old;
    await old.unsubscribe();
  }
  return pm.subscribe({ userVisibleOnly: true, applicationServerKey: key.buffer });
}
function sameBytes(a, b) {
  if (!a || a.byteLength !== b.length) return false;
  const x = new Uint8Array(a);
  for (let i = 0; i < b.length; i++) if (x[i] !== b[i]) return false;
  return true;
}

// src/client.ts
function randomHex(bytes) {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}
function newClientMsgId() {
  return randomHex(12);
}
function retryable(err) {
  return err instanceof TimeoutError || isTemporary(err);
}
var ParleyClient = class extends Emitter {
  constructor(opts) {
    super();
    __publicField(this, "opts");
    __publicField(this, "urls");
    __publicField(this, "WS");
    __publicField(this, "deviceId");
    __publicField(this, "conn", null);
    __publicField(this, "_state", "connecting");
    __publicField(this, "_userId", "");
    __publicField(this, "closedErr", null);
    __publicField(this, "cursorsMap", /* @__PURE__ */ new Map());
    __publicField(this, "reactionVersionsMap", /* @__PURE__ */ new Map());
    __publicField(this, "outbox", /* @__PURE__ */ new Map());
    __publicField(this, "inbox", []);
    __publicField(this, "pumping", false);
    __publicField(this, "acks", /* @__PURE__ */ new Map());
    __publicField(this, "connWaiters", []);
    __publicField(this, "wakeSleep", null);
    __publicField(this, "presenceSubs", /* @__PURE__ */ new Set());
    __publicField(this, "rooms", /* @__PURE__ */ new Set());
    __publicField(this, "connectedUrl", "");
    /** The frame limit of the last connection (0 before the first): requests
     *  over it are refused while offline rather than queued. */
    __publicField(this, "frameLimit", 0);
    this.opts = opts;
    this.urls = opts.urls?.length ? [...opts.urls] : opts.url ? [opts.url] : [];
    if (this.urls.length === 0) throw new Error("parley: ClientOptions needs urls or url");
    if (!opts.token && !opts.getToken) throw new Error("parley: ClientOptions needs token or getToken");
    const WS = opts.WebSocket ?? globalThis.WebSocket;
    if (!WS) throw new Error("parley: no WebSocket implementation (pass ClientOptions.WebSocket)");
    this.WS = WS;
    this.deviceId = opts.deviceId ?? "web-" + randomHex(6);
    for (const [k, v] of Object.entries(opts.cursors ?? {})) this.cursorsMap.set(k, v);
    for (const [k, v] of Object.entries(opts.reactionVersions ?? {})) this.reactionVersionsMap.set(k, v);
    queueMicrotask(() => void this.run());
  }
  // ---- state ----
  get state() {
    return this._state;
  }
  /** The authenticated user id (empty before the first connection). */
  get userId() {
    return this._userId;
  }
  /** Why the client stopped, or null while it runs. */
  /** This install's device id (sent in auth; end-to-end encryption names devices by it). */
  get device() {
    return this.deviceId;
  }
  get error() {
    return this.closedErr;
  }
  /** The highest seq of a conversation handed to the app. */
  cursor(conversationId) {
    return this.cursorsMap.get(conversationId) ?? 0;
  }
  /** Every conversation's cursor (to persist; seed them back with ClientOptions.cursors). */
  cursors() {
    return Object.fromEntries(this.cursorsMap);
  }
  /**
   * Every conversation's reaction version the app is up to date with (to
   * persist with the cursors; seed them back with
   * ClientOptions.reactionVersions). It moves when the catch-up after a
   * (re)connection has brought the changes, not with each live update: a
   * reconnect asks again for what changed since the last catch-up.
   */
  reactionVersions() {
    return Object.fromEntries(this.reactionVersionsMap);
  }
  /** Sends waiting for their ack (they are resent after each reconnect). */
  pendingSends() {
    return [...this.outbox.values()].map((e) => e.send);
  }
  /** Resolves once connected and caught up (rejects if the client stops first). */
  waitReady(timeoutMs) {
    return new Promise((resolve, reject) => {
      if (this._state === "ready") return resolve();
      if (this.closedErr) return reject(this.closedErr);
      let timer;
      const offState = this.on("state", (s, err) => {
        if (s === "ready" || s === "closed") {
          offState();
          if (timer) clearTimeout(timer);
          if (s === "ready") resolve();
          else reject(err ?? new ClosedError());
        }
      });
      if (timeoutMs !== void 0)
        timer = setTimeout(() => {
          offState();
          reject(new TimeoutError("parley: not ready in time"));
        }, timeoutMs);
    });
  }
  /** Skips the current backoff wait and reconnects now (e.g. on the browser's `online` event). */
  reconnectNow() {
    this.wakeSleep?.();
  }
  /** Drops the current connection (the client reconnects); for tests and "network changed" hints. */
  dropConnection() {
    this.conn?.close(new ClosedError("parley: connection dropped by the client"));
  }
  /** Stops the client: closes the connection; pending sends fail with ClosedError. */
  close() {
    this.stop(new ClosedError("parley: client closed"));
  }
  stop(err) {
    if (this.closedErr) return;
    this.closedErr = err;
    this.conn?.close(err);
    this.conn = null;
    for (const e of this.outbox.values()) e.reject(err);
    this.outbox.clear();
    this.wakeConnWaiters();
    this.wakeSleep?.();
    this.setState("closed", err);
    this.emit("closed", err);
  }
  setState(s, err) {
    if (this._state === s) return;
    this._state = s;
    this.emit("state", s, err);
  }
  // ---- the connection loop ----
  async run() {
    let failures = 0;
    let next = 0;
    const min = this.opts.minBackoffMs ?? 200;
    const max = Math.max(this.opts.maxBackoffMs ?? 1e4, min);
    const backoff = () => {
      failures++;
      return jitter(Math.min(min * 2 ** Math.min(failures - 1, 20), max));
    };
    while (!this.closedErr) {
      const url = this.urls[next++ % this.urls.length];
      this.setState("connecting");
      let conn;
      let closedP;
      try {
        const token = this.opts.getToken ? await this.opts.getToken() : this.opts.token;
        if (this.closedErr) return;
        let onClose;
        closedP = new Promise((r) => onClose = r);
        conn = await Connection.open(url, {
          token,
          deviceId: this.deviceId,
          deviceType: this.opts.deviceType ?? "web",
          WebSocket: this.WS,
          dialTimeoutMs: this.opts.dialTimeoutMs,
          requestTimeoutMs: this.opts.requestTimeoutMs,
          heartbeatMs: this.opts.heartbeatMs,
          onPush: (f, c) => this.onPush(c, f),
          onClose
        });
      } catch (err2) {
        if (this.closedErr) return;
        const e = err2 instanceof Error ? err2 : new Error(String(err2));
        if (this.permanent(e)) return this.stop(e);
        this.emit("disconnected", e);
        await this.sleep(backoff());
        continue;
      }
      if (this.closedErr) {
        conn.close();
        return;
      }
      this.conn = conn;
      this.connectedUrl = url;
      this.frameLimit = conn.maxFrameBytes;
      this._userId = conn.authOk.userId;
      this.setState("syncing");
      this.emit("connected", conn.authOk);
      this.wakeConnWaiters();
      for (const e of this.outbox.values()) this.trySend(e);
      void this.restoreSubscriptions(conn);
      let caughtUp = false;
      let err;
      try {
        await this.catchUp(conn);
        caughtUp = true;
        failures = 0;
        if (conn.open) {
          this.setState("ready");
          void this.pump(conn);
        }
        err = await closedP;
      } catch (e) {
        conn.close(e instanceof Error ? e : new Error(String(e)));
        err = conn.error ?? e;
      }
      if (this.conn === conn) this.conn = null;
      if (this.closedErr) return;
      this.emit("disconnected", err);
      if (err instanceof DisconnectError && this.permanent(err)) return this.stop(err);
      let wait = caughtUp ? jitter(min) : backoff();
      if (err instanceof DisconnectError && err.reconnectAfterMs > 0)
        wait = Math.max(wait, err.reconnectAfterMs + jitter(err.reconnectAfterMs / 2));
      this.setState("connecting", err);
      await this.sleep(wait);
    }
  }
  /** Errors that reconnecting cannot fix. */
  permanent(err) {
    const renew = !!this.opts.getToken;
    if (err instanceof DisconnectError) {
      if (err.code === "DISCONNECT_CODE_KICKED") return true;
      if (err.code === "DISCONNECT_CODE_AUTH_FAILED" || err.code === "DISCONNECT_CODE_TOKEN_REVOKED") return !renew;
      return false;
    }
    if (err instanceof ParleyError) {
      if (err.code === "ERROR_CODE_UNAUTHENTICATED") return !renew;
      return err.code === "ERROR_CODE_BAD_REQUEST" || err.code === "ERROR_CODE_PERMISSION_DENIED";
    }
    return false;
  }
  sleep(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeSleep = () => {
        this.wakeSleep = null;
        done();
      };
    });
  }
  wakeConnWaiters() {
    const ws = this.connWaiters;
    this.connWaiters = [];
    for (const w of ws) w();
  }
  /** A live connection, waiting for one if needed. */
  async liveConn() {
    for (; ; ) {
      if (this.closedErr) throw this.closedErr;
      if (this.conn?.open) return this.conn;
      await new Promise((r) => this.connWaiters.push(r));
    }
  }
  async restoreSubscriptions(conn) {
    try {
      if (this.presenceSubs.size > 0) {
        const f = await conn.request("subscribePresence", { userIds: [...this.presenceSubs] });
        for (const p of f.presence?.users ?? []) this.emit("presence", p);
      }
      for (const room of this.rooms) await conn.request("joinRoom", { room });
    } catch {
    }
  }
  // ---- receiving ----
  onPush(conn, f) {
    if (f.message) this.inbox.push({ msg: f.message });
    else if (f.receipt) this.inbox.push({ rcpt: f.receipt });
    else if (f.reaction) this.inbox.push({ reaction: f.reaction });
    else {
      if (f.streamChunk) this.emit("streamChunk", f.streamChunk);
      else if (f.typing) this.emit("typing", f.typing);
      else if (f.presenceEvent) this.emit("presence", f.presenceEvent.presence);
      else if (f.contactEvent) this.emit("contact", f.contactEvent.contact);
      else if (f.hidden) this.emit("hidden", f.hidden);
      else if (f.conversationEvent) this.emit("conversation", f.conversationEvent);
      else if (f.push) this.emit("push", f.push);
      return;
    }
    if (this._state === "ready") void this.pump(conn);
  }
  /** Catch-up after (re)connecting: the conversation list, then every
   *  conversation after its cursor, then what was pushed meanwhile. */
  async catchUp(conn) {
    const convs = await this.allConversationsOn(conn);
    this.emit("conversations", convs);
    for (const c of convs) {
      const id = c.conversationId;
      let cur = this.cursorsMap.get(id);
      if (cur === void 0 && this.opts.resumeFromServer) {
        cur = Math.max(c.deliveredSeq ?? 0, c.clearedSeq ?? 0);
        this.cursorsMap.set(id, cur);
      }
      const held = this.reactionVersionsMap.get(id);
      if (held === void 0) this.reactionVersionsMap.set(id, c.reactionVersion ?? 0);
      const last = c.left ? Math.min(c.lastSeq ?? 0, c.leftSeq ?? c.lastSeq ?? 0) : c.lastSeq ?? 0;
      if (last > (cur ?? 0)) await this.syncConv(conn, id, 0);
      if (held !== void 0 && (c.reactionVersion ?? 0) > held && this.opts.syncReactions !== false) await this.syncReactionsOn(conn, id);
    }
    this.flushAcks(conn);
  }
  /** Hands the app the reaction changes of a conversation after the version it holds, page by page. */
  async syncReactionsOn(conn, conv) {
    let busy = 0;
    for (; ; ) {
      const after = this.reactionVersionsMap.get(conv) ?? 0;
      let page;
      try {
        page = (await conn.request("syncReactions", { conversationId: conv, afterVersion: after, limit: 500 })).reactions;
      } catch (err) {
        if (err instanceof ParleyError && !retryable(err)) return;
        if (err instanceof ParleyError && conn.open && busy < 8) {
          await this.sleep(jitter((this.opts.minBackoffMs ?? 200) * 2 ** Math.min(busy++, 5)));
          continue;
        }
        throw err;
      }
      busy = 0;
      const updates = page.updates ?? [];
      let top = after;
      for (const u of updates) {
        this.emit("reaction", u);
        top = Math.max(top, u.version ?? 0);
      }
      if (!page.hasMore || updates.length === 0) top = Math.max(top, page.version ?? 0);
      this.reactionVersionsMap.set(conv, top);
      if (!page.hasMore || top <= after) return;
    }
  }
  /** Delivers queued pushes one at a time; a gap is filled first. */
  async pump(conn) {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.inbox.length > 0 && conn.open && this.conn === conn) {
        const ev = this.inbox[0];
        if ("msg" in ev) await this.deliverPushed(conn, ev.msg);
        else if ("reaction" in ev) this.emit("reaction", ev.reaction);
        else this.emit("receipt", ev.rcpt);
        this.inbox.shift();
        if (this.inbox.length === 0) this.flushAcks(conn);
      }
    } catch {
    } finally {
      this.pumping = false;
    }
    if (this.inbox.length > 0 && this.conn?.open && this._state === "ready") void this.pump(this.conn);
  }
  async deliverPushed(conn, m) {
    const id = m.conversationId;
    let cur = this.cursorsMap.get(id);
    if (cur === void 0 && this.opts.resumeFromServer) {
      cur = m.seq - 1;
      this.cursorsMap.set(id, cur);
    }
    cur ?? (cur = 0);
    if (!this.reactionVersionsMap.has(id)) this.reactionVersionsMap.set(id, 0);
    if (m.seq <= cur) return;
    if (m.seq > cur + 1) await this.syncConv(conn, id, m.seq - 1);
    if (m.seq > this.cursor(id)) this.deliver(m);
  }
  /** Delivers a conversation's entries after its cursor, page by page, up to upTo (0: the end).
   *  The server bounds pages by bytes, so a page may hold fewer entries than asked: only
   *  hasMore says whether more follow. A busy server's refusal is retried on the same link. */
  async syncConv(conn, conv, upTo) {
    const limit = this.opts.syncPageSize ?? 200;
    let busy = 0;
    for (; ; ) {
      const cur = this.cursor(conv);
      if (upTo !== 0 && cur >= upTo) return;
      let page;
      try {
        page = (await conn.request("syncMessages", { conversationId: conv, afterSeq: cur, limit })).messages;
      } catch (err) {
        if (err instanceof ParleyError && !retryable(err)) return;
        if (err instanceof ParleyError && conn.open && busy < 8) {
          await this.sleep(jitter((this.opts.minBackoffMs ?? 200) * 2 ** Math.min(busy++, 5)));
          continue;
        }
        throw err;
      }
      busy = 0;
      const msgs = page.messages ?? [];
      for (const m of msgs) if (m.seq > this.cursor(conv)) this.deliver(m);
      if (!page.hasMore || msgs.length === 0) {
        const last = Math.min(page.lastSeq ?? 0, upTo || Infinity);
        if (last > this.cursor(conv)) this.cursorsMap.set(conv, last);
        return;
      }
    }
  }
  deliver(m) {
    this.cursorsMap.set(m.conversationId, Math.max(this.cursor(m.conversationId), m.seq));
    if (this.opts.autoDeliveredAck !== false) this.acks.set(m.conversationId, m.seq);
    this.emit("message", m);
  }
  flushAcks(conn) {
    if (!conn.open) return;
    for (const [conversationId, seq] of this.acks) {
      try {
        conn.notify("delivered", { conversationId, seq });
      } catch {
        return;
      }
    }
    this.acks.clear();
  }
  // ---- sending ----
  /**
   * Sends a message and resolves with its ack once it is stored. While
   * disconnected the send waits; after each reconnect it is resent under the
   * same clientMsgId, so it is stored exactly once. Rejects when the server
   * refuses it for good (ParleyError) or the client is closed. A refusal by
   * the app's moderation is ERROR_CODE_REJECTED, with the text to show the
   * sender in `reason` and the rule in `rejectCode`. A message too large
   * for the server's frame limit (AuthOk.maxFrameBytes; 64 KiB by default)
   * rejects at once with ERROR_CODE_TOO_LARGE: it is never written to the
   * socket (the server would close the connection) nor queued for a resend.
   */
  send(input) {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const send = sendBody(input);
    const big = this.oversized("send", send);
    if (big) return Promise.reject(big);
    return new Promise((resolve, reject) => {
      const e = { send, resolve, reject, inFlight: null };
      this.outbox.set(send.clientMsgId, e);
      this.trySend(e);
    });
  }
  /**
   * Sends UTF-8 text to a user (1:1) or, with a conversation id ("p:…" or
   * "g:…"), into that conversation. The third argument is a clientMsgId, or
   * options: `{ replyTo, mentions, mentionAll, threadRoot, attachments, clientMsgId }`.
   */
  sendText(target, text2, opts) {
    const isConv = target.startsWith("g:") || target.startsWith("p:");
    const o = typeof opts === "string" ? { clientMsgId: opts } : opts ?? {};
    return this.send({
      ...o,
      ...isConv ? { conversationId: target } : { to: target },
      contentType: "text",
      payload: text2
    });
  }
  trySend(e) {
    const conn = this.conn;
    if (!conn?.open || e.inFlight === conn || !this.outbox.has(e.send.clientMsgId)) return;
    e.inFlight = conn;
    conn.request("send", e.send).then(
      (f) => {
        const ack = f.sendAck;
        this.outbox.delete(e.send.clientMsgId);
        this.ownSeq(ack);
        this.emit("sent", ack);
        e.resolve(ack);
      },
      (err) => {
        e.inFlight = null;
        if (err instanceof ClosedError || err instanceof DisconnectError) return;
        if (retryable(err)) {
          setTimeout(() => this.trySend(e), 300 + Math.random() * 700);
          return;
        }
        this.outbox.delete(e.send.clientMsgId);
        e.reject(err instanceof Error ? err : new Error(String(err)));
      }
    );
  }
  /** Moves the cursor past a message this client sent when it directly
   *  follows what the app has, so the app is not handed its own message
   *  back. (After a gap it stays: the sync delivers it in order, and the app
   *  recognises it by clientMsgId.) */
  ownSeq(ack) {
    if (this.cursor(ack.conversationId) + 1 === ack.seq) this.cursorsMap.set(ack.conversationId, ack.seq);
  }
  // ---- requests ----
  /**
   * Sends any request and resolves with the reply frame. It waits for a
   * connection; with retry it is sent again after a reconnect or a temporary
   * refusal (only for requests that are safe to repeat). A request too
   * large for the server's frame limit fails at once with
   * ERROR_CODE_TOO_LARGE, as a send does.
   */
  async request(name, body, retry = false) {
    const big = this.oversized(name, body);
    if (big) throw big;
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return await conn.request(name, body);
      } catch (err) {
        if (!retry || this.closedErr) throw err;
        if (err instanceof ClosedError || err instanceof DisconnectError) continue;
        if (retryable(err) && attempt < 8) {
          await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
          continue;
        }
        throw err;
      }
    }
  }
  /**
   * The refusal of a request too large for the server's frame limit, when it
   * is known and the request would wait for a connection (a connection
   * refuses such a frame itself, before writing it). The estimate leaves out
   * the frame's id; the connection's check is exact.
   */
  oversized(name, body) {
    if (this.conn?.open || this.frameLimit === 0) return null;
    const data = encodeFrame({ [name]: body });
    const bytes = data.length * 3 <= this.frameLimit ? data.length : utf8Length(data);
    return bytes > this.frameLimit ? frameTooLarge(bytes, this.frameLimit) : null;
  }
  async ok(name, body, retry = false) {
    await this.request(name, body, retry);
  }
  /** One page of the conversation list (most recent first). */
  async syncConversations(limit, pageToken) {
    return (await this.request("syncConversations", { limit, pageToken }, true)).conversations ?? {};
  }
  /** Every conversation (all pages). */
  async conversations() {
    return this.allConversationsOn(await this.liveConn());
  }
  async allConversationsOn(conn) {
    const out = [];
    let pageToken;
    do {
      const l = (await conn.request("syncConversations", { limit: 500, pageToken })).conversations ?? {};
      out.push(...l.conversations ?? []);
      pageToken = l.nextPageToken;
    } while (pageToken);
    return out;
  }
  /** Entries with seq > afterSeq, ascending (forward paging). */
  async syncMessages(conversationId, afterSeq = 0, limit) {
    return (await this.request("syncMessages", { conversationId, afterSeq, limit }, true)).messages;
  }
  /** The newest entries with seq < beforeSeq (0: the newest), ascending (backward paging). */
  async history(conversationId, beforeSeq = 0, limit = 30) {
    return (await this.request("history", { conversationId, beforeSeq, limit }, true)).messages;
  }
  /** Moves the read cursor (unread counts derive from it; the peer gets a receipt). */
  markRead(conversationId, seq) {
    return this.ok("read", { conversationId, seq }, true);
  }
  /** Says the user is typing (fire and forget; dropped while disconnected). */
  typing(conversationId) {
    try {
      if (this.conn?.open) this.conn.notify("typing", { conversationId });
    } catch {
    }
  }
  /** Recalls a message; resolves with the RECALL event's ack (null when a
   *  retry found it already recalled). */
  async recall(conversationId, seq) {
    const clientMsgId = newClientMsgId();
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return (await conn.request("recall", { conversationId, seq, clientMsgId })).sendAck;
      } catch (err) {
        if (attempt > 0 && err instanceof ParleyError && err.code === "ERROR_CODE_CONFLICT") return null;
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }
  /** Replaces the content of your own message; resolves with the EDIT event's
   *  ack. `searchText` replaces what the server may search (see SendInput). */
  async edit(conversationId, seq, payload, contentType = "text", searchText) {
    const body = {
      conversationId,
      seq,
      contentType,
      payload: typeof payload === "string" ? utf8(payload) : payload,
      clientMsgId: newClientMsgId()
    };
    if (searchText) body.searchText = searchText;
    return (await this.request("edit", body, true)).sendAck;
  }
  /** Hides messages (or, with all, the whole conversation) for this user's devices. */
  deleteForMe(conversationId, seqs) {
    return this.ok("deleteForMe", seqs === "all" ? { conversationId, all: true } : { conversationId, seqs }, true);
  }
  /** How many members (other than the sender) read each seq, and who. */
  async readCounts(conversationId, seqs) {
    return (await this.request("readCounts", { conversationId, seqs }, true)).readCounts?.counts ?? [];
  }
  /** Subscribes to users' presence (kept across reconnects); returns their presence now. */
  async subscribePresence(userIds) {
    for (const u of userIds) this.presenceSubs.add(u);
    return (await this.request("subscribePresence", { userIds }, true)).presence?.users ?? [];
  }
  /** Ends presence subscriptions (none given: all of them). */
  unsubscribePresence(userIds = []) {
    if (userIds.length === 0) this.presenceSubs.clear();
    for (const u of userIds) this.presenceSubs.delete(u);
    return this.ok("unsubscribePresence", { userIds }, true);
  }
  // Groups
  async createGroup(input) {
    return (await this.request("createGroup", input)).group;
  }
  async updateGroup(input) {
    return (await this.request("updateGroup", input, true)).group;
  }
  addMembers(conversationId, userIds) {
    return this.ok("addMembers", { conversationId, userIds }, true);
  }
  removeMember(conversationId, userId) {
    return this.ok("removeMember", { conversationId, userId });
  }
  async joinGroup(conversationId) {
    return (await this.request("joinGroup", { conversationId })).group;
  }
  leaveGroup(conversationId) {
    return this.ok("leaveGroup", { conversationId });
  }
  setRole(conversationId, userId, role) {
    return this.ok("setRole", { conversationId, userId, role }, true);
  }
  muteMember(conversationId, userId, durationSeconds) {
    return this.ok("muteMember", { conversationId, userId, durationSeconds });
  }
  transferOwnership(conversationId, userId) {
    return this.ok("transferOwnership", { conversationId, userId });
  }
  dissolveGroup(conversationId) {
    return this.ok("dissolveGroup", { conversationId });
  }
  async getGroup(conversationId) {
    return (await this.request("getGroup", { conversationId }, true)).group;
  }
  async listMembers(conversationId, afterUserId = "", limit) {
    return (await this.request("listMembers", { conversationId, afterUserId, limit }, true)).members;
  }
  /** Every current member (all pages). */
  async allMembers(conversationId) {
    const out = [];
    let after = "";
    do {
      const p = await this.listMembers(conversationId, after, 1e3);
      out.push(...p.members ?? []);
      after = p.nextAfterUserId ?? "";
    } while (after);
    return out;
  }
  // Contacts
  friendRequest(userId, note) {
    return this.ok("friendRequest", { userId, note }, true);
  }
  respondFriend(userId, accept) {
    return this.ok("respondFriend", { userId, accept }, true);
  }
  removeFriend(userId) {
    return this.ok("removeFriend", { userId }, true);
  }
  async listContacts() {
    return (await this.request("listContacts", {}, true)).contacts ?? {};
  }
  block(userId) {
    return this.ok("block", { userId }, true);
  }
  unblock(userId) {
    return this.ok("unblock", { userId }, true);
  }
  /** Pins or mutes a conversation for this user. */
  setConversation(conversationId, settings) {
    return this.ok("setConversation", { conversationId, ...settings }, true);
  }
  // Moderation
  /**
   * Reports message seq of a conversation this user can read to the app's
   * moderators, with a reason code (1-32 bytes of a-z, 0-9 and "_": "spam",
   * "abuse", "other") and an optional note (at most 1000 bytes). The report
   * keeps the message as it is now. Reporting it again changes nothing, so
   * it is retried across reconnects. A bad reason, a note too long or one's
   * own message is ERROR_CODE_BAD_REQUEST; a message the user cannot read
   * ERROR_CODE_PERMISSION_DENIED.
   */
  reportMessage(conversationId, seq, reason, note) {
    return this.ok("reportMessage", note ? { conversationId, seq, reason, note } : { conversationId, seq, reason }, true);
  }
  // Rich messages: reactions, pins, threads, streams (replies and mentions are send options)
  /**
   * Adds this user's emoji reaction to message seq (1-32 bytes, no spaces;
   * at most 20 distinct emojis per message: ERROR_CODE_TOO_LARGE). Resolves
   * with the message's counts, personal (`me` set for this user); the other
   * members' devices get a `reaction` event. Adding one already there
   * changes nothing, so it is retried across reconnects.
   */
  async react(conversationId, seq, emoji) {
    return (await this.request("react", { conversationId, seq, emoji }, true)).reaction;
  }
  /** Takes back this user's emoji reaction (none there: nothing changes); as react. */
  async unreact(conversationId, seq, emoji) {
    return (await this.request("react", { conversationId, seq, emoji, remove: true }, true)).reaction;
  }
  /**
   * One page of the messages whose reactions changed after afterVersion,
   * oldest change first (personal updates). The client calls it itself after
   * each reconnect (ClientOptions.syncReactions); this is for apps that
   * keep their own versions.
   */
  async syncReactions(conversationId, afterVersion = 0, limit) {
    return (await this.request("syncReactions", { conversationId, afterVersion, limit }, true)).reactions;
  }
  /**
   * Pins message seq (a group's owner and admins, either side of a 1:1; at
   * most 50 per conversation). Resolves with the ack of the PINNED event the
   * other members (and your other devices) get as a message; this session
   * does not get it back. Pinning a pinned message is ERROR_CODE_CONFLICT;
   * a retry across a reconnect that finds it pinned resolves null.
   */
  pin(conversationId, seq) {
    return this.pinRequest(conversationId, seq, false);
  }
  /** Unpins message seq; as pin (the UNPINNED event; a message not pinned is ERROR_CODE_CONFLICT). */
  unpin(conversationId, seq) {
    return this.pinRequest(conversationId, seq, true);
  }
  /**
   * Sets the conversation's disappearing-messages timer in seconds (0: off;
   * else one of DISAPPEARING_TIMERS, others are ERROR_CODE_BAD_REQUEST):
   * either side of a 1:1, a group's owner or admins. Resolves with the ack of
   * the DISAPPEARING_SET event; messages sent after it carry `expiresAt`.
   */
  async setDisappearing(conversationId, seconds) {
    const body = { conversationId, seconds, clientMsgId: newClientMsgId() };
    for (; ; ) {
      const conn = await this.liveConn();
      try {
        return (await conn.request("setDisappearing", body)).sendAck;
      } catch (err) {
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }
  async pinRequest(conversationId, seq, unpin) {
    const body = { conversationId, seq, clientMsgId: newClientMsgId() };
    if (unpin) body.unpin = true;
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return (await conn.request("pin", body)).sendAck;
      } catch (err) {
        if (attempt > 0 && err instanceof ParleyError && err.code === "ERROR_CODE_CONFLICT") return null;
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }
  /**
   * The newest replies in the thread under rootSeq with seq < beforeSeq (0:
   * the newest), ascending. Replies are delivered live like any message
   * (with `threadRoot` set); this pages a thread's history.
   */
  async threadHistory(conversationId, rootSeq, beforeSeq = 0, limit = 30) {
    return (await this.request("threadHistory", { conversationId, rootSeq, beforeSeq, limit }, true)).messages;
  }
  /** The replies in the thread under rootSeq with seq > afterSeq, ascending (forward paging). */
  async syncThread(conversationId, rootSeq, afterSeq = 0, limit) {
    return (await this.request("threadHistory", { conversationId, rootSeq, afterSeq, limit }, true)).messages;
  }
  /**
   * Starts a streamed message (users with the bot role only; others get
   * ERROR_CODE_PERMISSION_DENIED): text appended with `append` reaches the
   * members online as `streamChunk` events, and `finish` stores it as one
   * message. A stream belongs to its user on the server node that opened it
   * (it outlives a dropped connection to the same node); its calls go on
   * the client's current connection and are not retried (a repeated append
   * would add the text twice): a call cut by a dropped link fails with
   * ClosedError, and one that reaches another node, or comes after the
   * server ended the stream, with ERROR_CODE_BAD_REQUEST. The server stores
   * a stream that went quiet (`stream_idle_timeout`, 30 s by default) as it
   * is, marked incomplete.
   */
  async openStream(input) {
    const body = { clientMsgId: input.clientMsgId ?? newClientMsgId() };
    if (input.to) body.to = input.to;
    if (input.conversationId) body.conversationId = input.conversationId;
    if (input.contentType) body.contentType = input.contentType;
    if (input.replyTo) body.replyTo = input.replyTo;
    if (input.threadRoot) body.threadRoot = input.threadRoot;
    if (input.mentions?.length) body.mentions = [...input.mentions];
    if (input.mentionAll) body.mentionAll = true;
    const f = await this.request("streamOpen", body);
    const send = (name, b) => this.request(name, b);
    if (f.sendAck) return new MessageStream(send, body.clientMsgId, f.sendAck.conversationId, "", f.sendAck);
    const o = f.streamOpened;
    return new MessageStream(send, body.clientMsgId, o.conversationId, o.streamId, null);
  }
  // Search (docs/search.md)
  /**
   * Finds messages this user may read, newest first: every word of query
   * in any order (case and accents do not matter; in Chinese, Japanese,
   * Korean and Thai a query also matches inside longer runs of
   * characters), or with `phrase` the words in this order. opts filter
   * (`conversationId`, `from`, `contentType`, `hasAttachment`, `since` and
   * `until` in unix ms) and page: pass the page's `next` as `before` for
   * the following one (absent at the end); `limit` is at most 100
   * (default 20). Each hit's `highlights` index its `snippet` string
   * directly (UTF-16 code units; the server's UTF-8 byte ranges are
   * converted). Retried across reconnects and, a few times, when the node
   * runs as many searches as it allows (ERROR_CODE_TOO_MANY_REQUESTS,
   * thrown if it lasts). ERROR_CODE_UNAVAILABLE, thrown at once: search
   * is off on this server, its index failed, or the search ran too long;
   * ERROR_CODE_BAD_REQUEST: an empty or overlong query (over 256 bytes or
   * 32 words), a limit over 100, since after until;
   * ERROR_CODE_PERMISSION_DENIED: a conversation filter the user does not
   * read. A page may hold fewer hits than the limit, even none, and still
   * have a `next`: the server bounds the work of each search. On a single
   * node, newly sent messages are found a moment after they are stored (the
   * index follows the store).
   */
  async search(query, opts = {}) {
    const body = { ...opts, query };
    const big = this.oversized("search", body);
    if (big) throw big;
    for (let again = 0; ; ) {
      const conn = await this.liveConn();
      let r;
      try {
        r = (await conn.request("search", body)).searchResults ?? {};
      } catch (err) {
        if (this.closedErr) throw err;
        if (err instanceof ClosedError || err instanceof DisconnectError) continue;
        const busy = err instanceof ParleyError && err.code === "ERROR_CODE_TOO_MANY_REQUESTS";
        if ((busy || err instanceof TimeoutError) && again < 4) {
          await new Promise((w) => setTimeout(w, jitter(250 * 2 ** again++)));
          continue;
        }
        throw err;
      }
      const page = { hits: (r.hits ?? []).map(searchMatch) };
      if (r.next) page.next = r.next;
      return page;
    }
  }
  /**
   * Every page of a search, one at a time (opts as for {@link search},
   * `before` where to start): `for await (const page of
   * client.searchPages('lantern')) ...`; stop early with `break`.
   */
  async *searchPages(query, opts = {}) {
    let before = opts.before;
    for (; ; ) {
      const page = await this.search(query, { ...opts, before });
      yield page;
      if (!page.next) return;
      before = page.next;
    }
  }
  // Rooms (not stored: a push reaches the sessions in the room at that moment)
  /** Joins a room (rejoined after every reconnect). */
  async joinRoom(room) {
    this.rooms.add(room);
    return (await this.request("joinRoom", { room }, true)).room;
  }
  leaveRoom(room) {
    this.rooms.delete(room);
    return this.ok("leaveRoom", { room }, true);
  }
  roomSend(room, op, body) {
    return this.ok("roomSend", { room, op, body: typeof body === "string" ? utf8(body) : body });
  }
  // Offline push notifications
  /**
   * Sets where this device gets notifications while it is offline (or does
   * not acknowledge a message in time), replacing any target it had: APNs,
   * FCM or Web Push. deviceId: empty for this session's device (the only one
   * a socket may name). Safe to repeat; retried across reconnects. Invalid
   * targets fail with ParleyError ERROR_CODE_BAD_REQUEST; a target naming no
   * platform or several with TypeError.
   */
  registerPush(target, deviceId) {
    let body;
    try {
      body = pushTargetBody(target);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.ok("registerPush", deviceId ? { deviceId, ...body } : body, true);
  }
  /** Removes this device's push target (also fine when it has none). */
  unregisterPush(deviceId) {
    return this.ok("unregisterPush", deviceId ? { deviceId } : {}, true);
  }
  /**
   * Turns on Web Push for this browser: asks the server for its VAPID key,
   * subscribes the service worker's registration with it
   * (`pushManager.subscribe({userVisibleOnly: true, applicationServerKey})`,
   * reusing an existing subscription made with the same key), and registers
   * the subscription as this device's push target. Resolves with the
   * PushSubscription. Call it after Notification.requestPermission() is
   * granted; the browser refuses (NotAllowedError) otherwise.
   */
  async subscribeWebPush(registration, opts = {}) {
    const publicKey = opts.publicKey ?? await webPushKey({ baseUrl: opts.baseUrl ?? this.httpOrigin(), fetch: opts.fetch });
    const sub = await subscribeWithKey(registration, publicKey);
    await this.registerPush({ webpush: webPushTarget(sub) }, opts.deviceId);
    return sub;
  }
  /**
   * Turns Web Push off for this browser: unregisters the device's target on
   * the server and ends the registration's push subscription (both are
   * attempted; the first failure is thrown after). Resolves with whether a
   * subscription was ended. The server request waits for a connection:
   * bound it with a timeout where that matters (e.g. on sign-out, which
   * removes the target on the server anyway).
   */
  async unsubscribeWebPush(registration, deviceId) {
    const sub = await registration.pushManager.getSubscription();
    const [server, local] = await Promise.allSettled([this.unregisterPush(deviceId), sub ? sub.unsubscribe() : Promise.resolve(false)]);
    if (server.status === "rejected") throw server.reason;
    if (local.status === "rejected") throw local.reason;
    return local.value;
  }
  // Files (docs/media.md)
  /**
   * A short-lived URL of a file: one carried by message (conversationId,
   * seq), or, without a conversation, one this user uploaded. thumbnail
   * asks for its thumbnail (Attachment.thumbnail). The URL is absolute (a
   * path the server gives is resolved against its HTTP origin) and works
   * without a token until expiresAt (unix ms; 10 minutes by default): ask
   * again for a new one rather than keeping it. Anything the user may not
   * read is ERROR_CODE_PERMISSION_DENIED.
   */
  async fileUrl(fileId, conversationId, seq, thumbnail) {
    const body = { fileId };
    if (conversationId) {
      body.conversationId = conversationId;
      body.seq = seq;
    }
    if (thumbnail) body.thumbnail = true;
    const r = (await this.request("fileUrl", body, true)).fileUrl;
    if (!r?.url) throw badResponse("no url in the answer");
    return { ...r, url: resolveFileUrl(this.httpBase(), r.url) };
  }
  /**
   * Uploads a file in one request (POST /v1/files) with this client's token
   * and returns it as the server describes it, to pass in `send`'s
   * attachments. name defaults to the File's name. In browsers onProgress
   * follows the bytes sent (XMLHttpRequest). Refusals reject with a
   * ParleyError of the server's code (ERROR_CODE_TOO_LARGE,
   * ERROR_CODE_UNSUPPORTED_MEDIA_TYPE, ERROR_CODE_QUOTA_EXCEEDED; the HTTP
   * answer's own code in `apiCode`); signal cancels (an AbortError).
   */
  uploadFile(file, name, opts) {
    return uploadFile(this.httpOptions(), () => this.currentToken(), file, name, opts);
  }
  /**
   * Uploads a file resumably (tus 1.0.0 at /v1/uploads/): in chunks, a
   * failed request resumed from what the server holds. Resolves with the
   * file's id, name and size; the message that carries it has the server's
   * full description. With keepOnAbort and onCreated, an aborted upload can
   * be continued later by passing its URL as uploadUrl.
   */
  uploadResumable(file, name, opts) {
    return uploadResumable(this.httpOptions(), () => this.currentToken(), file, name, opts);
  }
  /** Uploads with uploadFile, or uploadResumable for files over `resumableAbove` (default 4 MiB). */
  upload(file, name, opts = {}) {
    return file.size > (opts.resumableAbove ?? RESUMABLE_ABOVE) ? this.uploadResumable(file, name, opts) : this.uploadFile(file, name, opts);
  }
  currentToken() {
    return this.opts.getToken ? this.opts.getToken() : this.opts.token;
  }
  httpOptions() {
    return { baseUrl: this.httpBase(), fetch: this.opts.fetch };
  }
  /** The server's HTTP base: baseUrl, else the origin of the WebSocket URL in use. */
  httpBase() {
    return (this.opts.baseUrl ?? this.httpOrigin()).replace(/\/$/, "");
  }
  /** The HTTP origin of the server: that of the WebSocket URL in use (ws: → http:, wss: → https:). */
  httpOrigin() {
    return new URL((this.connectedUrl || this.urls[0]).replace(/^ws/i, "http")).origin;
  }
};
var MessageStream = class {
  /** @internal */
  constructor(call2, clientMsgId, conversationId, streamId, finished) {
    __publicField(this, "call", call2);
    __publicField(this, "clientMsgId", clientMsgId);
    __publicField(this, "conversationId", conversationId);
    __publicField(this, "streamId", streamId);
    __publicField(this, "done");
    __publicField(this, "sent", 0);
    this.done = finished ? Promise.resolve(finished) : null;
  }
  /** UTF-8 bytes appended so far (the next chunk's offset). */
  get length() {
    return this.sent;
  }
  /** Whether finish or abandon was called (or the stream was already stored when opened). */
  get finished() {
    return this.done !== null;
  }
  /** Adds text; members online get it as a streamChunk. Resolves once the server took it. */
  async append(text2) {
    if (this.done) throw new Error("parley: the stream is finished");
    if (!text2) return;
    const n = utf8(text2).length;
    this.sent += n;
    try {
      await this.call("streamAppend", { streamId: this.streamId, text: text2 });
    } catch (err) {
      if (err instanceof ParleyError) this.sent -= n;
      throw err;
    }
  }
  /** Stores what was appended as one message; resolves with its ack. Calling it again returns the same ack. */
  finish() {
    return this.done ?? (this.done = this.call("streamFinish", { streamId: this.streamId }).then((f) => f.sendAck));
  }
  /** Stores what was appended marked incomplete (the sender gave up). */
  abandon() {
    return this.done ?? (this.done = this.call("streamFinish", { streamId: this.streamId, abandon: true }).then((f) => f.sendAck));
  }
};
function sendBody(input) {
  const send = {
    clientMsgId: input.clientMsgId ?? newClientMsgId(),
    contentType: input.contentType ?? "text",
    payload: typeof input.payload === "string" ? utf8(input.payload) : input.payload
  };
  if (input.to) send.to = input.to;
  if (input.conversationId) send.conversationId = input.conversationId;
  if (input.attachments?.length) send.attachments = input.attachments.map((a) => ({ id: typeof a === "string" ? a : a.id }));
  if (input.replyTo) send.replyTo = input.replyTo;
  if (input.mentions?.length) send.mentions = [...input.mentions];
  if (input.mentionAll) send.mentionAll = true;
  if (input.threadRoot) send.threadRoot = input.threadRoot;
  if (input.searchText) send.searchText = input.searchText;
  return send;
}
function jitter(ms) {
  return ms / 2 + Math.random() * (ms / 2);
}

// src/rich.ts
function applyReaction(target, u) {
  const v = u.version ?? 0;
  const held = target.reactionVersion ?? 0;
  if (v < held || v === held && !u.personal) return false;
  const mine = new Set((target.reactions ?? []).filter((r) => r.me).map((r) => r.emoji));
  const next = (u.reactions ?? []).filter((r) => (r.count ?? 0) > 0).map((r) => {
    const me = u.personal ? !!r.me : mine.has(r.emoji);
    return me ? { emoji: r.emoji, count: r.count, me: true } : { emoji: r.emoji, count: r.count };
  });
  if (v === held && sameReactions(target.reactions ?? [], next)) return false;
  target.reactions = next.length ? next : void 0;
  target.reactionVersion = v;
  return true;
}
function sameReactions(a, b) {
  return a.length === b.length && a.every((r, i) => r.emoji === b[i].emoji && (r.count ?? 0) === (b[i].count ?? 0) && !!r.me === !!b[i].me);
}
function mentionsUser(m, userId) {
  if (!userId || m.from === userId) return false;
  return !!m.mentionAll || !!m.mentions?.includes(userId);
}

// src/retention.ts
var DISAPPEARING_TIMERS = [0, 30, 300, 3600, 86400, 604800, 2419200];
function isDisappearingTimer(seconds) {
  return DISAPPEARING_TIMERS.includes(seconds);
}
function isExpired(m, now = Date.now()) {
  return (m.expiresAt ?? 0) !== 0 && m.expiresAt <= now;
}
function msUntilExpiry(m, now = Date.now()) {
  if (!m.expiresAt) return void 0;
  return Math.max(0, m.expiresAt - now);
}
function disappearingSeconds(c) {
  return c.disappearingSeconds ?? 0;
}

// src/account.ts
async function request(o, method, path, token, body) {
  const f = o.fetch ?? globalThis.fetch;
  const headers = { Authorization: "Bearer " + token };
  if (body !== void 0) headers["Content-Type"] = "application/json";
  const res = await f((o.baseUrl ?? "").replace(/\/$/, "") + path, {
    method,
    headers,
    body: body === void 0 ? void 0 : JSON.stringify(body)
  });
  if (!res.ok) {
    let text2 = "";
    try {
      text2 = await res.text();
    } catch {
    }
    throw httpError(res.status, text2 || res.statusText);
  }
  return res;
}
var exportPath = (id) => "/v1/account/exports/" + encodeURIComponent(id);
async function startExport(o, token) {
  return (await request(o, "POST", "/v1/account/exports", token)).json();
}
async function exportStatus(o, token, id) {
  return (await request(o, "GET", exportPath(id), token)).json();
}
async function waitForExport(o, token, id, intervalMs = 1e3, signal) {
  for (; ; ) {
    const j = await exportStatus(o, token, id);
    if (j.state !== "pending" && j.state !== "running") return j;
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, intervalMs);
      signal?.addEventListener("abort", () => {
        clearTimeout(t);
        reject(signal.reason);
      });
    });
  }
}
async function downloadExport(o, token, id) {
  return request(o, "GET", exportPath(id) + "/archive", token);
}
async function deleteAccount(o, token, password) {
  return (await request(o, "POST", "/v1/account/delete", token, { password })).json();
}

// src/index.ts
function directConversationId(a, b) {
  return a < b ? `p:${a}:${b}` : `p:${b}:${a}`;
}
export {
  ClosedError,
  Connection,
  DISAPPEARING_TIMERS,
  DisconnectError,
  MessageStream,
  ParleyClient,
  ParleyError,
  RESUMABLE_ABOVE,
  TimeoutError,
  applyReaction,
  changePassword,
  decodeFrame,
  deleteAccount,
  directConversationId,
  disappearingSeconds,
  downloadExport,
  encodeFrame,
  errorCodeOfApi,
  exportStatus,
  fromBase64,
  isCode,
  isDisappearingTimer,
  isExpired,
  isTemporary,
  login,
  logout,
  mentionsUser,
  msUntilExpiry,
  newClientMsgId,
  pushTargetBody,
  register,
  resolveFileUrl,
  rpc,
  snippetParts,
  startExport,
  text,
  toBase64,
  toBase64Url,
  upload,
  uploadFile,
  uploadResumable,
  utf16Ranges,
  utf8,
  waitForExport,
  webPushKey,
  webPushTarget
};
