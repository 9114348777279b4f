/**
 * The guard of the embedded emulator. MiniStack checks no signature, answers any CORS preflight with
 * `Access-Control-Allow-Origin: *`, serves any `Host` and its Lambda service runs whatever code it is
 * given, so anyone who could send it a request (a link the operator opens, a web page, another local
 * user) could drive it. leaseq starts it through a small launcher that wraps its ASGI app before serving
 * it: every HTTP and WebSocket request is checked in the emulator process itself, so no unguarded port
 * exists at all (a proxy in front would leave the emulator's own port open behind it).
 *
 * Refused with 403 and a one-line reason:
 * - a request with an `Origin` header, with a `Sec-Fetch-Site` other than `none`, or whose `Host` names
 *   anything but the loopback (`127.0.0.1`, `localhost`, `[::1]`, any port: a local proxy such as
 *   Toxiproxy forwards its own);
 * - every request that is not SigV4-signed (`AWS4-HMAC-SHA256`, in the Authorization header or a
 *   presigned query) with the credential of this start (`shared/aws/local-credential.ts`), which only
 *   the operator can read; the signature is recomputed over the canonical request with MiniStack's own
 *   SigV4 module (`ministack.core.sigv4`, the one its AUTH mode uses), a hashed payload must be the
 *   body's, and the signing time must be within 15 minutes. The one exception is the PUT by which a
 *   custom resource's function answers CloudFormation, to a URL holding a random UUID it was given.
 *
 * Functions the emulator runs sign with the key id MiniStack gives them (their account id) and the
 * emulator's secret, which is in their environment; temporary credentials its STS issued (AssumeRole:
 * the CDK CLI assumes the bootstrap roles) are served with their own secret and session token; the AWS SDKs, CLIs and `curl --aws-sigv4` sign
 * with the credential `leaseq local env` prints and send neither browser header.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FUNCTION_ACCESS_KEY_ID } from '../aws/local-credential.ts';

/** The launcher's file name in the state directory; also how `emulator-record.ts` recognises its process. */
export const GUARD_FILE = 'emulator-guard.py';

/**
 * The launcher. It replaces `ministack.app.app` (the ASGI entry that `ministack.app.main()` serves) with
 * the guard and then runs `main()` as the `ministack` command would, so bind address, port, TLS and
 * logging stay MiniStack's own; `GATEWAY_PORT` (the port it listens on) only names an example in refusals.
 */
const LAUNCHER = `# Written by leaseq (shared/local/emulator-guard.ts) on every start; edits are overwritten.
import hashlib
import hmac
import json
import os
import re
import sys
from urllib.parse import parse_qs, quote

import ministack.app as gateway
from ministack.core import sigv4

PORT = os.environ["GATEWAY_PORT"]
# Loopback names only. Any port: a local TCP proxy (Toxiproxy in the fault tests) forwards the Host of
# its own port; a rebound DNS name is what a web page would send, and it never passes.
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}
# The credential of this start (leaseq wrote it into the state directory and the environment). The
# functions MiniStack runs sign with their account id as the key id and this secret.
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
KEY_IDS = {os.environ["AWS_ACCESS_KEY_ID"], "${FUNCTION_ACCESS_KEY_ID}"}
# A custom resource answers CloudFormation with a PUT to the URL it was handed, which holds a random UUID.
CFN_RESPONSE = re.compile(r"^/_ministack/cfn-response/[0-9a-f-]{36}$")
HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")
NOT_SIGNED = (
    "the request is not signed; this emulator serves only requests signed with the credential of its"
    " start (\`leaseq local env\` prints it)"
)
_served = gateway.app


def browser_refusal(scope):
    host = None
    for name, value in scope.get("headers", []):
        name = name.lower()
        if name == b"origin":
            return "refused by leaseq's emulator guard: requests from web pages (with an Origin header) are not served"
        if name == b"sec-fetch-site" and value.strip().lower() != b"none":
            return "refused by leaseq's emulator guard: cross-site browser requests (Sec-Fetch-Site) are not served"
        if name == b"host":
            if host is not None:
                return "refused by leaseq's emulator guard: more than one Host header"
            host = value.decode("latin-1").strip().lower()
    name = None if host is None else host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in LOOPBACK_NAMES:
        shown = "none" if host is None else repr(host)
        return (
            f"refused by leaseq's emulator guard: Host {shown} is not this emulator's loopback address"
            f" (127.0.0.1, localhost or [::1], e.g. 127.0.0.1:{PORT})"
        )
    return None


def header_map(scope):
    headers = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        text = sigv4.decode_header_value(value)
        headers[key] = headers[key] + ", " + text if key in headers else text
    return headers


def secret_for(key_id, headers, query, presigned):
    """The secret a key id signs with: this start's, or that of a live STS session the emulator issued
    (AssumeRole, which only a request signed with this start's credential could ask for), presented with
    its session token. None for any other key."""
    if key_id in KEY_IDS:
        return SECRET
    try:
        from ministack.services import sts as sts_svc

        session = sts_svc._sessions.get(key_id)
        if not session or sts_svc._session_expired(session):
            return None
    except Exception:
        return None
    token = (query.get("X-Amz-Security-Token") or [""])[0] if presigned else headers.get("x-amz-security-token", "")
    expected = str(session.get("SessionToken") or "")
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        return None
    return str(session.get("SecretAccessKey") or "") or None


def signature_refusal(scope, headers, body):
    """(code, reason) when the request is not signed with this start's credential, else None."""
    method = scope.get("method", "GET")
    path = scope.get("path", "/")
    if method == "PUT" and CFN_RESPONSE.match(path):
        return None
    query = parse_qs(scope.get("query_string", b"").decode("utf-8", "replace"), keep_blank_values=True)
    raw_path = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else quote(path)
    authorization = headers.get("authorization", "")
    presigned = not authorization and any(name.lower() == "x-amz-signature" for name in query)
    if not authorization and not presigned:
        return "MissingAuthenticationToken", NOT_SIGNED
    if presigned:
        if (query.get("X-Amz-Algorithm") or [""])[0] != "AWS4-HMAC-SHA256":
            return "IncompleteSignature", "only AWS4-HMAC-SHA256 (SigV4) signatures are served"
        signature = sigv4.parse_query_signature(query)
    else:
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return "IncompleteSignature", "only AWS4-HMAC-SHA256 (SigV4) signatures are served"
        signature = sigv4.parse_header_signature(headers)
    if isinstance(signature, tuple):
        return signature[0], signature[1].split("\\n")[0]
    secret = secret_for(signature.access_key_id, headers, query, presigned)
    if secret is None:
        return "UnrecognizedClientException", (
            "the request is signed with an access key id this emulator did not issue; sign with the"
            " credential of its start (\`leaseq local env\` prints it)"
        )
    if presigned:
        try:
            expired = sigv4.presigned_request_is_expired(signature.amz_date, (query.get("X-Amz-Expires") or [""])[0])
        except ValueError:
            expired = True
        if expired:
            return "AccessDenied", "the presigned request has expired (or gives no valid X-Amz-Expires)"
    else:
        skewed = sigv4.request_time_failure(signature)
        if skewed:
            return skewed
    declared = headers.get("x-amz-content-sha256", "")
    if HEX_SHA256.match(declared) and not hmac.compare_digest(declared, hashlib.sha256(body).hexdigest()):
        return "XAmzContentSHA256Mismatch", "the body is not the one whose hash was signed"
    failure = sigv4.header_signature_failure(
        signature, secret, method, raw_path, query, headers, body, presigned=presigned
    )
    if failure:
        return "InvalidSignatureException", (
            "the signature does not match the request signed with the credential of this start"
        )
    return None


async def refuse(send, status, reason, code=None, headers=None):
    """403 with the reason: as AWS error JSON or XML when a code is given (SDKs show it), else text."""
    if code is None:
        body, content_type = (reason + "\\n").encode(), b"text/plain; charset=utf-8"
    elif "json" in (headers or {}).get("content-type", "") or "x-amz-target" in (headers or {}):
        body = json.dumps({"__type": code, "message": reason}).encode()
        content_type = b"application/x-amz-json-1.0"
    else:
        text = reason.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{text}</Message></Error>"
            "<RequestId>0</RequestId></ErrorResponse>"
        ).encode()
        content_type = b"text/xml"
    response_headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if code is not None:
        response_headers.append((b"x-amzn-errortype", code.encode()))
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body, receive):
    """The receive callable the emulator gets: the body already read, then the connection's own."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


async def guarded(scope, receive, send):
    if scope["type"] not in ("http", "websocket"):
        await _served(scope, receive, send)
        return
    reason = browser_refusal(scope)
    headers = header_map(scope)
    if reason is None and scope["type"] == "websocket":
        refused = signature_refusal(scope, headers, b"")
        reason = None if refused is None else f"refused by leaseq's emulator guard: {refused[1]}"
    if reason is not None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await refuse(send, 403, reason)
        return
    if scope["type"] == "websocket":
        await _served(scope, receive, send)
        return
    body = await read_body(receive)
    if body is None:
        return
    refused = signature_refusal(scope, headers, body)
    if refused is not None:
        code, why = refused
        print(f"leaseq guard: refused {scope.get('method')} {scope.get('path')}: {code}", file=sys.stderr, flush=True)
        await refuse(send, 403, f"refused by leaseq's emulator guard: {why}", code, headers)
        return
    await _served(scope, replay(body, receive), send)


gateway.app = guarded
sys.argv = [sys.argv[0]]
sys.exit(gateway.main())
`;

/** Writes the launcher into `stateDir` (owner-only, like the rest of the state) and returns its path. */
export function writeGuardLauncher(stateDir: string): string {
  const file = join(stateDir, GUARD_FILE);
  writeFileSync(file, LAUNCHER, { mode: 0o600 });
  // `mode` applies only when the file is created; one left by an older start keeps its bits otherwise.
  chmodSync(file, 0o600);
  return file;
}
